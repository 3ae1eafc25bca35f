//! Pulled checks kept on local disk by digest, so that a check pinned by digest is never pulled twice and
//! a check keeps serving when its registry cannot be reached (an operator restarted during a registry
//! outage serves the version it served before).
//!
//! Layout: `manifests/<hex>.json` (named by the manifest digest), `components/<hex>.wasm` (named by the
//! layer digest), `tags/<hex>` (the manifest digest a tagged reference last resolved to, named by the
//! sha256 of the reference) and `signatures/<hex>.json` (the cosign signatures last read beside a manifest,
//! so that a signed check is verified again, offline, when its registry is down). Every read is verified
//! against the names, so a damaged file is a miss, never wrong bytes (signatures verify themselves); every
//! write is a rename, so a crash leaves no half file.
//!
//! Every pull of a new version adds files; [`ArtifactCache::retain`] removes all but the versions a caller
//! still uses (the operator: what its check ConfigMaps name now, what a restart would load).

use crate::artifact::component_layer;
use crate::registry::verify;
use crate::{CheckReference, ImageSignature, Pulled, sha256_digest};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// A directory of pulled checks.
#[derive(Debug, Clone)]
pub struct ArtifactCache {
    dir: PathBuf,
}

impl ArtifactCache {
    /// A cache in `dir` (created on the first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The check `reference` pinned to `manifest_digest`, if kept and intact (a component of at most
    /// `max_bytes`).
    pub fn get(
        &self,
        reference: &CheckReference,
        manifest_digest: &str,
        max_bytes: u64,
    ) -> Option<Pulled> {
        let manifest = std::fs::read(self.file("manifests", manifest_digest, "json")?).ok()?;
        let intact = |what, bytes: &[u8], digest: &str| {
            verify(reference, what, bytes, digest)
                .map_err(
                    |error| tracing::warn!(%error, "a cached check is damaged; pulling it again"),
                )
                .is_ok()
        };
        if !intact("the cached manifest", &manifest, manifest_digest) {
            return None;
        }
        let layer = component_layer(&reference.to_string(), &manifest, max_bytes).ok()?;
        let component = std::fs::read(self.file("components", &layer.digest, "wasm")?).ok()?;
        if !intact("the cached component", &component, &layer.digest) {
            return None;
        }
        Some(Pulled {
            manifest_digest: manifest_digest.to_owned(),
            manifest,
            component,
        })
    }

    /// The manifest digest the tagged `reference` last resolved to.
    pub fn last_resolved(&self, reference: &CheckReference) -> Option<String> {
        let text = std::fs::read_to_string(self.tag_file(reference)).ok()?;
        let digest = text.trim();
        self.file("manifests", digest, "json")?;
        Some(digest.to_owned())
    }

    /// Keeps `pulled`, read from `reference`. Failures are logged, not returned: the cache only adds
    /// resilience.
    pub fn put(&self, reference: &CheckReference, pulled: &Pulled) {
        let layer_digest = sha256_digest(&pulled.component);
        let mut writes = vec![
            (
                self.file("components", &layer_digest, "wasm"),
                pulled.component.as_slice(),
            ),
            (
                self.file("manifests", &pulled.manifest_digest, "json"),
                pulled.manifest.as_slice(),
            ),
        ];
        if reference.digest().is_none() {
            writes.push((
                Some(self.tag_file(reference)),
                pulled.manifest_digest.as_bytes(),
            ));
        }
        for (path, bytes) in writes {
            let Some(path) = path else { continue };
            if let Err(error) = write_atomically(&path, bytes) {
                tracing::warn!(path = %path.display(), %error, "cannot cache a pulled check");
            }
        }
    }

    /// The signatures last read beside the manifest `manifest_digest`, if kept.
    pub fn signatures(&self, manifest_digest: &str) -> Option<Vec<ImageSignature>> {
        let text = std::fs::read(self.file("signatures", manifest_digest, "json")?).ok()?;
        serde_json::from_slice(&text).ok()
    }

    /// Keeps the `signatures` read beside the manifest `manifest_digest` (replacing those kept before).
    pub fn put_signatures(&self, manifest_digest: &str, signatures: &[ImageSignature]) {
        let Some(path) = self.file("signatures", manifest_digest, "json") else {
            return;
        };
        let written = serde_json::to_vec(signatures)
            .map_err(std::io::Error::other)
            .and_then(|json| write_atomically(&path, &json));
        if let Err(error) = written {
            tracing::warn!(path = %path.display(), %error, "cannot cache the signatures of a check");
        }
    }

    /// Removes every version but the manifests `in_use` (`sha256:…` digests): other manifests, their
    /// signatures, components no kept manifest names, and tags that resolve to a removed manifest. Returns
    /// how many files went; failures are logged. The caller keeps pulls from writing meanwhile (a manifest
    /// written before its digest is recorded as in use would go).
    pub fn retain(&self, in_use: &HashSet<&str>) -> usize {
        let mut removed = 0;
        let mut remove = |path: &Path| match std::fs::remove_file(path) {
            Ok(()) => removed += 1,
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "cannot remove a cached check")
            }
        };
        let mut layers = HashSet::new();
        for (path, digest) in self.files("manifests", ".json") {
            if in_use.contains(digest.as_str()) {
                let manifest = std::fs::read(&path).unwrap_or_default();
                if let Ok(layer) = component_layer(&digest, &manifest, u64::MAX) {
                    layers.insert(layer.digest);
                }
            } else {
                remove(&path);
            }
        }
        for (path, digest) in self.files("signatures", ".json") {
            if !in_use.contains(digest.as_str()) {
                remove(&path);
            }
        }
        for (path, digest) in self.files("components", ".wasm") {
            if !layers.contains(&digest) {
                remove(&path);
            }
        }
        for (path, _) in self.files("tags", "") {
            let resolved = std::fs::read_to_string(&path).unwrap_or_default();
            if !in_use.contains(resolved.trim()) {
                remove(&path);
            }
        }
        removed
    }

    /// The files in `<dir>/<kind>` named `<hex><extension>`, with the `sha256:<hex>` digest each names.
    fn files(&self, kind: &str, extension: &str) -> Vec<(PathBuf, String)> {
        let Ok(entries) = std::fs::read_dir(self.dir.join(kind)) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name().into_string().ok()?;
                let hex = name.strip_suffix(extension)?;
                (hex.len() == 64).then(|| (entry.path(), format!("sha256:{hex}")))
            })
            .collect()
    }

    /// `<dir>/<kind>/<hex>.<extension>` for a `sha256:<64 hex>` digest; `None` for anything else (a digest
    /// names a file: it must not be able to name any other).
    fn file(&self, kind: &str, digest: &str, extension: &str) -> Option<PathBuf> {
        let hex = digest.strip_prefix("sha256:")?;
        (hex.len() == 64 && hex.bytes().all(|byte| byte.is_ascii_hexdigit()))
            .then(|| self.dir.join(kind).join(format!("{hex}.{extension}")))
    }

    fn tag_file(&self, reference: &CheckReference) -> PathBuf {
        let name = sha256_digest(reference.to_string().as_bytes());
        self.dir
            .join("tags")
            .join(name.trim_start_matches("sha256:"))
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let temporary = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&temporary, bytes)
        .and_then(|()| std::fs::rename(&temporary, path))
        .inspect_err(|_| {
            let _ = std::fs::remove_file(&temporary);
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ImageSignature;
    use crate::artifact::Artifact;

    #[test]
    fn a_kept_check_reads_back_verified_and_a_damaged_one_is_a_miss() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ArtifactCache::new(dir.path());
        let tagged = CheckReference::parse("oci://localhost:5000/ready:1").unwrap();
        let component = b"\0asm\x0d\0\x01\0 component".to_vec();
        let manifest = Artifact::of(&component).manifest;
        let digest = sha256_digest(&manifest);
        assert!(cache.get(&tagged, &digest, 1 << 20).is_none());
        assert!(cache.last_resolved(&tagged).is_none());
        let pulled = Pulled {
            manifest_digest: digest.clone(),
            manifest,
            component: component.clone(),
        };
        cache.put(&tagged, &pulled);
        assert_eq!(
            cache.last_resolved(&tagged).as_deref(),
            Some(digest.as_str())
        );
        let read = cache
            .get(&tagged.pinned(&digest), &digest, 1 << 20)
            .unwrap();
        assert_eq!(read.component, component);
        assert!(
            cache.get(&tagged, &digest, 4).is_none(),
            "over the size bound"
        );

        let path = dir.path().join("components").join(
            sha256_digest(&component)
                .trim_start_matches("sha256:")
                .to_owned()
                + ".wasm",
        );
        std::fs::write(&path, b"other bytes").unwrap();
        assert!(cache.get(&tagged, &digest, 1 << 20).is_none(), "damaged");
        assert!(cache.get(&tagged, "sha256:../../x", 1 << 20).is_none());
    }

    #[test]
    fn retain_keeps_the_versions_in_use_and_removes_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ArtifactCache::new(dir.path());
        let version = |tag: &str, bytes: &[u8]| {
            let component = [b"\0asm\x0d\0\x01\0".as_slice(), bytes].concat();
            let manifest = Artifact::of(&component).manifest;
            let pulled = Pulled {
                manifest_digest: sha256_digest(&manifest),
                manifest,
                component,
            };
            let reference = CheckReference::parse(&format!("oci://localhost:5000/{tag}")).unwrap();
            cache.put(&reference, &pulled);
            let signature = ImageSignature {
                payload: b"{}".to_vec(),
                signature: String::new(),
            };
            cache.put_signatures(&pulled.manifest_digest, &[signature]);
            (reference, pulled.manifest_digest)
        };
        let (tagged, in_use) = version("ready:1", b"first");
        let (replaced_tag, replaced) = version("ready:2", b"second");
        let pinned_digest = sha256_digest(&Artifact::of(b"\0asm\x0d\0\x01\0third").manifest);
        let (pinned, pinned_in_use) = version(&format!("other@{pinned_digest}"), b"third");
        assert_eq!(pinned_in_use, pinned_digest);

        let removed = cache.retain(&HashSet::from([in_use.as_str(), pinned_in_use.as_str()]));
        assert_eq!(
            removed, 4,
            "the replaced version's manifest, component, signatures and tag"
        );
        assert!(cache.get(&tagged, &in_use, 1 << 20).is_some());
        assert_eq!(
            cache.last_resolved(&tagged).as_deref(),
            Some(in_use.as_str())
        );
        assert!(cache.signatures(&in_use).is_some());
        assert!(cache.get(&pinned, &pinned_in_use, 1 << 20).is_some());
        assert!(cache.get(&replaced_tag, &replaced, 1 << 20).is_none());
        assert!(cache.last_resolved(&replaced_tag).is_none());
        assert!(cache.signatures(&replaced).is_none());
        let components = std::fs::read_dir(dir.path().join("components"))
            .unwrap()
            .count();
        assert_eq!(components, 2);
    }
}
