//! The CNCF Wasm OCI artifact layout (TAG Runtime's "Wasm OCI Artifact layout"): an image manifest whose
//! config has media type [`CONFIG_MEDIA_TYPE`] and whose one layer is the component, [`LAYER_MEDIA_TYPE`].
//! Writing is deterministic (no timestamp): the same component always gets the same manifest digest.

use crate::{OciError, sha256_digest};
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciDescriptor, OciImageManifest};
use std::collections::BTreeMap;

/// The config media type of a Wasm artifact.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The media type of the layer holding the component.
pub const LAYER_MEDIA_TYPE: &str = "application/wasm";
/// The empty config OCI 1.1 tools (`oras push` without `--config`) write; accepted when reading.
const EMPTY_CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.empty.v1+json";
/// The layer's file name for tools that unpack artifacts (`oras pull` writes the layer under it).
pub(crate) const LAYER_TITLE: &str = "check.wasm";

/// The three blobs of a check artifact, ready to push: config, layer, and the manifest that names both.
pub(crate) struct Artifact {
    pub config: Vec<u8>,
    pub manifest: Vec<u8>,
}

impl Artifact {
    /// The artifact of `component`.
    pub fn of(component: &[u8]) -> Self {
        let layer_digest = sha256_digest(component);
        let config = serde_json::json!({
            "architecture": "wasm",
            "os": "wasip2",
            "layerDigests": [layer_digest],
        })
        .to_string()
        .into_bytes();
        let manifest = OciImageManifest {
            schema_version: 2,
            media_type: Some(OCI_IMAGE_MEDIA_TYPE.to_owned()),
            config: OciDescriptor {
                media_type: CONFIG_MEDIA_TYPE.to_owned(),
                digest: sha256_digest(&config),
                size: config.len() as i64,
                ..OciDescriptor::default()
            },
            layers: vec![OciDescriptor {
                media_type: LAYER_MEDIA_TYPE.to_owned(),
                digest: layer_digest,
                size: component.len() as i64,
                annotations: Some(BTreeMap::from([(
                    "org.opencontainers.image.title".to_owned(),
                    LAYER_TITLE.to_owned(),
                )])),
                ..OciDescriptor::default()
            }],
            subject: None,
            artifact_type: None,
            annotations: None,
        };
        let manifest = serde_json::to_vec(&manifest).unwrap_or_default();
        Self { config, manifest }
    }
}

/// The component's layer in `manifest` (raw bytes, already digest-checked by the caller): the one
/// `application/wasm` layer, at most `max_bytes` long, under a Wasm or empty config.
pub(crate) fn component_layer(
    reference: &str,
    manifest: &[u8],
    max_bytes: u64,
) -> Result<OciDescriptor, OciError> {
    let not_a_check = |reason: String| OciError::NotACheck {
        reference: reference.to_owned(),
        reason,
    };
    let manifest: OciImageManifest = serde_json::from_slice(manifest).map_err(|error| {
        not_a_check(format!(
            "its manifest is not an OCI image manifest: {error}"
        ))
    })?;
    let config = manifest.config.media_type.as_str();
    if config != CONFIG_MEDIA_TYPE && config != EMPTY_CONFIG_MEDIA_TYPE {
        return Err(not_a_check(format!(
            "its config is {config}, not {CONFIG_MEDIA_TYPE} (a container image is not a check)"
        )));
    }
    let mut layers = manifest.layers.into_iter();
    let layer = match (layers.next(), layers.next()) {
        (Some(layer), None) if layer.media_type == LAYER_MEDIA_TYPE => layer,
        (Some(layer), None) => {
            return Err(not_a_check(format!(
                "its layer is {}, not {LAYER_MEDIA_TYPE}",
                layer.media_type
            )));
        }
        _ => {
            return Err(not_a_check(
                "a check artifact has exactly one layer, the component".to_owned(),
            ));
        }
    };
    match u64::try_from(layer.size) {
        Ok(size) if size <= max_bytes => Ok(layer),
        _ => Err(not_a_check(format!(
            "its component is {} bytes, more than the {max_bytes} accepted",
            layer.size
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_artifact_is_the_cncf_layout_and_reads_back_as_its_component_layer() {
        let component = b"\0asm\x0d\0\x01\0 component";
        let artifact = Artifact::of(component);
        assert_eq!(
            Artifact::of(component).manifest,
            artifact.manifest,
            "deterministic"
        );
        let layer = component_layer("r", &artifact.manifest, 1 << 20).unwrap();
        assert_eq!(layer.digest, sha256_digest(component));
        assert_eq!(layer.size, component.len() as i64);
        let config: serde_json::Value = serde_json::from_slice(&artifact.config).unwrap();
        assert_eq!(config["layerDigests"][0], sha256_digest(component).as_str());

        let too_small = component_layer("r", &artifact.manifest, 4).unwrap_err();
        assert!(too_small.to_string().contains("more than the 4 accepted"));

        let image = artifact_with(|manifest| {
            manifest.config.media_type = "application/vnd.oci.image.config.v1+json".to_owned();
        });
        let error = component_layer("r", &image, 1 << 20)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("a container image is not a check"),
            "{error}"
        );
        let two = artifact_with(|manifest| manifest.layers.push(manifest.layers[0].clone()));
        let error = component_layer("r", &two, 1 << 20).unwrap_err().to_string();
        assert!(error.contains("exactly one layer"), "{error}");
        let tarball = artifact_with(|manifest| {
            manifest.layers[0].media_type = "application/vnd.oci.image.layer.v1.tar".to_owned();
        });
        let error = component_layer("r", &tarball, 1 << 20)
            .unwrap_err()
            .to_string();
        assert!(error.contains("not application/wasm"), "{error}");
        let error = component_layer("r", b"{}", 1 << 20)
            .unwrap_err()
            .to_string();
        assert!(error.contains("not an OCI image manifest"), "{error}");
    }

    fn artifact_with(change: impl FnOnce(&mut OciImageManifest)) -> Vec<u8> {
        let mut manifest: OciImageManifest =
            serde_json::from_slice(&Artifact::of(b"\0asm").manifest).unwrap();
        change(&mut manifest);
        serde_json::to_vec(&manifest).unwrap()
    }
}
