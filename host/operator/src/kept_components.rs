//! Components of checks shipped in parts, kept on local disk by digest (beside the compiled-check cache), so
//! that an operator restarted while a part ConfigMap is missing still serves the version it served before,
//! as it does after every other failure. A check in one ConfigMap needs no copy: its bytes cannot go missing
//! without the ConfigMap itself.
//!
//! The copy stands in only for the parts: the check ConfigMap (its settings and its `sha256` pin) must
//! still be there, and the copy must decompress to a component with that digest, as parts must.

use crate::config_map_format::{COMPONENT_KEY, PARTS_KEY};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use std::path::{Path, PathBuf};

/// zstd level of the kept copies: fast to write on the load path; the copies are not shipped anywhere.
const KEPT_LEVEL: i32 = 3;

/// A directory of `<sha256>.wasm.zst` files.
#[derive(Debug)]
pub(crate) struct KeptComponents {
    dir: PathBuf,
}

impl KeptComponents {
    /// Keeps copies under `dir`, created if needed; `None` (logged) when it cannot be created: the copies
    /// only add resilience.
    pub fn open(dir: &Path) -> Option<Self> {
        match std::fs::create_dir_all(dir) {
            Ok(()) => Some(Self {
                dir: dir.to_owned(),
            }),
            Err(error) => {
                tracing::warn!(dir = %dir.display(), %error, "cannot keep copies of checks in parts");
                None
            }
        }
    }

    /// Keeps `component`, whose sha256 is `digest`, unless a copy exists. Failures are logged, not fatal.
    pub fn keep(&self, digest: &str, component: &[u8]) {
        let Some(path) = self.path(digest) else {
            return;
        };
        if path.exists() {
            return;
        }
        let temporary = path.with_extension(format!("tmp{}", std::process::id()));
        let written = zstd::encode_all(component, KEPT_LEVEL)
            .and_then(|bytes| std::fs::write(&temporary, bytes))
            .and_then(|()| std::fs::rename(&temporary, &path));
        if let Err(error) = written {
            let _ = std::fs::remove_file(&temporary);
            tracing::warn!(path = %path.display(), %error, "cannot keep a copy of a check in parts");
        }
    }

    /// The check ConfigMap `config_map` (in parts) as if it carried its component itself, from the copy
    /// kept of the version it pins; `None` when it is not in parts or no copy of that version is kept.
    pub fn stand_in(&self, config_map: &ConfigMap) -> Option<ConfigMap> {
        let data = config_map.data.as_ref()?;
        if !data.contains_key(PARTS_KEY) {
            return None;
        }
        let bytes = std::fs::read(self.path(data.get("sha256")?.trim())?).ok()?;
        let mut stand_in = config_map.clone();
        if let Some(data) = stand_in.data.as_mut() {
            data.remove(PARTS_KEY);
        }
        stand_in.binary_data = Some([(COMPONENT_KEY.to_owned(), ByteString(bytes))].into());
        Some(stand_in)
    }

    /// The file of `digest`; `None` unless it is 64 hexadecimal digits (it names a file).
    fn path(&self, digest: &str) -> Option<PathBuf> {
        (digest.len() == 64 && digest.bytes().all(|byte| byte.is_ascii_hexdigit())).then(|| {
            self.dir
                .join(format!("{}.wasm.zst", digest.to_ascii_lowercase()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn in_parts(digest: &str) -> ConfigMap {
        ConfigMap {
            data: Some(BTreeMap::from([
                (PARTS_KEY.to_owned(), "3".to_owned()),
                ("sha256".to_owned(), digest.to_owned()),
                ("config".to_owned(), "{}".to_owned()),
            ])),
            ..ConfigMap::default()
        }
    }

    #[test]
    fn a_kept_copy_stands_in_for_the_parts_of_its_version_only() {
        let dir = std::env::temp_dir().join(format!("preflight-kept-{}", std::process::id()));
        let kept = KeptComponents::open(&dir).unwrap();
        let digest = "ab".repeat(32);
        assert!(
            kept.stand_in(&in_parts(&digest)).is_none(),
            "nothing kept yet"
        );
        kept.keep(&digest, b"component bytes");
        let stand_in = kept.stand_in(&in_parts(&digest)).unwrap();
        let data = stand_in.data.as_ref().unwrap();
        assert!(!data.contains_key(PARTS_KEY) && data.contains_key("config"));
        let compressed = &stand_in.binary_data.as_ref().unwrap()[COMPONENT_KEY].0;
        assert_eq!(
            zstd::decode_all(&compressed[..]).unwrap(),
            b"component bytes"
        );
        assert!(
            kept.stand_in(&in_parts(&"cd".repeat(32))).is_none(),
            "another version"
        );
        let mut whole = in_parts(&digest);
        whole.data.as_mut().unwrap().remove(PARTS_KEY);
        assert!(kept.stand_in(&whole).is_none(), "not in parts");
        assert!(kept.stand_in(&in_parts("../../etc/passwd")).is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
