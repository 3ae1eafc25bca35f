//! A typed view of a Kubernetes object, for checks that only need metadata and their own spec.

use serde::Deserialize;
use std::collections::BTreeMap;

/// A Kubernetes object with a typed `spec`; unknown fields are ignored, and a missing `spec` is
/// `S::default()`. Use `Object<serde_json::Value>` (the default) to read any object's metadata.
#[derive(Debug, Clone, Deserialize)]
#[serde(
    rename_all = "camelCase",
    bound(deserialize = "S: Deserialize<'de> + Default")
)]
pub struct Object<S = serde_json::Value> {
    /// `apiVersion`, e.g. `example.com/v1`.
    #[serde(default)]
    pub api_version: String,
    /// `kind`, e.g. `Database`.
    #[serde(default)]
    pub kind: String,
    /// The object's metadata.
    #[serde(default)]
    pub metadata: Metadata,
    /// The object's spec, deserialised into the check's own type.
    #[serde(default)]
    pub spec: S,
}

/// The parts of `metadata` that checks use.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Metadata {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`, empty for cluster-scoped objects.
    pub namespace: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.generation`.
    pub generation: i64,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `metadata.annotations`.
    pub annotations: BTreeMap<String, String>,
}
