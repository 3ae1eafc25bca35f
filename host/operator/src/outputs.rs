//! Records a gate's outputs on the object, only when they change (the steady state writes nothing): by
//! default in the `preflight.dev/outputs` annotation, a JSON object; or in a status field the check's
//! ConfigMap names (`outputs: status.dependency`), which the CRD must declare, because a structural schema
//! prunes undeclared status fields (the write would be silently dropped, and retried on every evaluation).

use crate::field_managers::patch_params;
use crate::vocabulary::OutputsPlacement;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, Patch};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// The annotation that carries outputs by default.
pub const OUTPUTS_ANNOTATION: &str = "preflight.dev/outputs";

/// What the object holds at `placement`, as a map (empty when absent or unreadable).
fn existing(object: &DynamicObject, placement: &OutputsPlacement) -> BTreeMap<String, String> {
    let value = match placement {
        OutputsPlacement::Annotation => object
            .annotations()
            .get(OUTPUTS_ANNOTATION)
            .and_then(|text| serde_json::from_str(text).ok()),
        OutputsPlacement::Status(path) => {
            let pointer = format!("/status/{}", path.join("/"));
            object.data.pointer(&pointer).cloned()
        }
    };
    value
        .and_then(|value| serde_json::from_value(value).ok())
        .unwrap_or_default()
}

/// The merge patch that makes the object hold `outputs` at `placement`, or `None` when it already does.
/// In a status field, keys no longer output are removed (set to null), other fields are left alone.
pub(crate) fn patch(
    object: &DynamicObject,
    placement: &OutputsPlacement,
    outputs: &BTreeMap<String, String>,
) -> Option<Value> {
    let before = existing(object, placement);
    if before == *outputs {
        return None;
    }
    Some(match placement {
        OutputsPlacement::Annotation => {
            let text =
                (!outputs.is_empty()).then(|| serde_json::to_string(outputs).unwrap_or_default());
            json!({"metadata": {"annotations": {OUTPUTS_ANNOTATION: text}}})
        }
        OutputsPlacement::Status(path) => {
            let mut fields: Map<String, Value> = before
                .keys()
                .filter(|key| !outputs.contains_key(*key))
                .map(|key| (key.clone(), Value::Null))
                .collect();
            fields.extend(
                outputs
                    .iter()
                    .map(|(key, value)| (key.clone(), json!(value))),
            );
            let nested = path.iter().rev().fold(
                Value::Object(fields),
                |inner, field| json!({ field: inner }),
            );
            json!({ "status": nested })
        }
    })
}

/// Writes `outputs` at `placement` when they differ from what `object` holds. Returns whether it wrote.
pub(crate) async fn record(
    api: &Api<DynamicObject>,
    object: &DynamicObject,
    placement: &OutputsPlacement,
    outputs: &BTreeMap<String, String>,
) -> Result<bool, kube::Error> {
    let Some(body) = patch(object, placement, outputs) else {
        return Ok(false);
    };
    let name = object.name_any();
    let params = patch_params();
    match placement {
        OutputsPlacement::Annotation => {
            api.patch(&name, &params, &Patch::Merge(body)).await?;
        }
        OutputsPlacement::Status(_) => {
            let written = api
                .patch_status(&name, &params, &Patch::Merge(body))
                .await?;
            if existing(&written, placement) != *outputs {
                tracing::warn!(
                    %placement,
                    "the API server dropped the outputs written to {placement}: declare the field in the \
                     CRD's status schema (an object of strings), or use the default annotation"
                );
            }
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::{ApiResource, GroupVersionKind};

    fn object() -> DynamicObject {
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "App"));
        DynamicObject::new("a", &resource).within("ns")
    }

    fn outputs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_annotation_is_written_only_when_the_outputs_change() {
        let mut object = object();
        assert_eq!(
            patch(&object, &OutputsPlacement::Annotation, &outputs(&[])),
            None
        );
        let body = patch(
            &object,
            &OutputsPlacement::Annotation,
            &outputs(&[("key", "K")]),
        )
        .unwrap();
        assert_eq!(
            body["metadata"]["annotations"][OUTPUTS_ANNOTATION],
            r#"{"key":"K"}"#
        );
        object
            .annotations_mut()
            .insert(OUTPUTS_ANNOTATION.into(), r#"{"key":"K"}"#.into());
        assert_eq!(
            patch(
                &object,
                &OutputsPlacement::Annotation,
                &outputs(&[("key", "K")])
            ),
            None
        );
        let cleared = patch(&object, &OutputsPlacement::Annotation, &outputs(&[])).unwrap();
        assert_eq!(
            cleared["metadata"]["annotations"][OUTPUTS_ANNOTATION],
            Value::Null
        );
    }

    #[test]
    fn a_status_field_is_patched_in_place_and_stale_keys_removed() {
        let placement = OutputsPlacement::parse("status.dependency.found").unwrap();
        let mut object = object();
        object.data =
            json!({"status": {"dependency": {"found": {"old": "x", "key": "K"}}, "other": 1}});
        assert_eq!(
            patch(&object, &placement, &outputs(&[("old", "x"), ("key", "K")])),
            None
        );
        let body = patch(&object, &placement, &outputs(&[("key", "K2")])).unwrap();
        assert_eq!(
            body,
            json!({"status": {"dependency": {"found": {"old": null, "key": "K2"}}}})
        );
    }

    #[test]
    fn placements_parse_or_say_what_is_expected() {
        assert_eq!(
            OutputsPlacement::parse("annotation"),
            Ok(OutputsPlacement::Annotation)
        );
        assert_eq!(
            OutputsPlacement::parse("status.dependency")
                .unwrap()
                .to_string(),
            "status.dependency"
        );
        for bad in ["status", "status.", "spec.x", "status.a..b", "status.a-b"] {
            assert!(OutputsPlacement::parse(bad).is_err(), "{bad}");
        }
    }
}
