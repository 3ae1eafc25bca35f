//! Components of checks shipped in parts, kept on local disk by digest (beside the compiled-check cache), so
//! that an operator restarted while a part ConfigMap is missing still serves the version it served before,
//! as it does after every other failure. A check in one ConfigMap needs no copy: its bytes cannot go missing
//! without the ConfigMap itself.
//!
//! The copy stands in only for the parts: the check ConfigMap (its settings and its `sha256` pin) must
//! still be there, and the copy must decompress to a component with that digest, as parts must.
//!
//! One copy per check: only the version the ConfigMap pins can stand in, so keeping a new version removes
//! the copy of the one it replaces, and removing a check removes its copy. The directory (an emptyDir whose
//! size limit evicts the pod) holds at most one copy per check in parts, however often checks change.

use crate::config_map_format::{COMPONENT_KEY, PARTS_KEY};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use std::path::{Path, PathBuf};

/// zstd level of the kept copies: fast to write on the load path; the copies are not shipped anywhere.
const KEPT_LEVEL: i32 = 3;

/// File name ending of a kept copy.
const COPY_SUFFIX: &str = ".wasm.zst";

/// A directory of `<namespace>_<name>_<sha256>.wasm.zst` files: per check, the version last loaded from its
/// parts (`_` is in neither a namespace nor a ConfigMap name, so a check's prefix names its files only).
#[derive(Debug)]
pub(crate) struct KeptComponents {
    dir: PathBuf,
}

impl KeptComponents {
    /// Keeps copies under `dir`, created if needed; `None` (logged) when it cannot be created: the copies
    /// only add resilience. Copies named by digest alone, as older operators kept them (every version, of
    /// no known check), are removed.
    pub fn open(dir: &Path) -> Option<Self> {
        match std::fs::create_dir_all(dir) {
            Ok(()) => {
                remove_copies_named_by_digest_alone(dir);
                Some(Self {
                    dir: dir.to_owned(),
                })
            }
            Err(error) => {
                tracing::warn!(dir = %dir.display(), %error, "cannot keep copies of checks in parts");
                None
            }
        }
    }

    /// Keeps `component`, whose sha256 is `digest`, as the copy of `check` (`namespace/name`), unless it is
    /// kept already, and removes the copies of the check's other versions. Failures are logged, not fatal.
    pub fn keep(&self, check: &str, digest: &str, component: &[u8]) {
        let Some(path) = self.path(check, digest) else {
            return;
        };
        if !path.exists() {
            self.write(&path, component);
        }
        self.remove_copies_of(check, Some(&path));
    }

    /// Removes the copy kept of `check` (`namespace/name`), whose ConfigMap is gone.
    pub fn forget(&self, check: &str) {
        self.remove_copies_of(check, None);
    }

    fn write(&self, path: &Path, component: &[u8]) {
        let temporary = path.with_extension(format!("tmp{}", std::process::id()));
        let written = zstd::encode_all(component, KEPT_LEVEL)
            .and_then(|bytes| std::fs::write(&temporary, bytes))
            .and_then(|()| std::fs::rename(&temporary, path));
        if let Err(error) = written {
            let _ = std::fs::remove_file(&temporary);
            tracing::warn!(path = %path.display(), %error, "cannot keep a copy of a check in parts");
        }
    }

    /// The check ConfigMap `config_map` of `check` (in parts) as if it carried its component itself, from
    /// the copy kept of the version it pins; `None` when it is not in parts or no copy of that version is
    /// kept.
    pub fn stand_in(&self, check: &str, config_map: &ConfigMap) -> Option<ConfigMap> {
        let data = config_map.data.as_ref()?;
        if !data.contains_key(PARTS_KEY) {
            return None;
        }
        let bytes = std::fs::read(self.path(check, data.get("sha256")?.trim())?).ok()?;
        let mut stand_in = config_map.clone();
        if let Some(data) = stand_in.data.as_mut() {
            data.remove(PARTS_KEY);
        }
        stand_in.binary_data = Some([(COMPONENT_KEY.to_owned(), ByteString(bytes))].into());
        Some(stand_in)
    }

    /// Removes the kept copies of `check` but `except`. Failures are logged.
    fn remove_copies_of(&self, check: &str, except: Option<&Path>) {
        let Some(prefix) = file_prefix(check) else {
            return;
        };
        remove_files_where(
            &self.dir,
            "removed the kept copy of a replaced or removed version",
            |path, name| {
                name.starts_with(&prefix) && name.ends_with(COPY_SUFFIX) && Some(path) != except
            },
        );
    }

    /// The file of `check`'s version `digest`; `None` unless the digest is 64 hexadecimal digits and the
    /// check a `namespace/name` of DNS characters (both name a file).
    fn path(&self, check: &str, digest: &str) -> Option<PathBuf> {
        let prefix = file_prefix(check)?;
        is_sha256_hex(digest).then(|| {
            self.dir.join(format!(
                "{prefix}{}{COPY_SUFFIX}",
                digest.to_ascii_lowercase()
            ))
        })
    }
}

/// Removes the `<sha256>.wasm.zst` files of older operators in `dir`.
fn remove_copies_named_by_digest_alone(dir: &Path) {
    remove_files_where(dir, "removed a copy an older operator kept", |_, name| {
        name.strip_suffix(COPY_SUFFIX).is_some_and(is_sha256_hex)
    });
}

/// Removes the files in `dir` whose path and name `remove` selects, logging each with `why`; failures are
/// logged.
fn remove_files_where(dir: &Path, why: &str, remove: impl Fn(&Path, &str) -> bool) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for path in entries.flatten().map(|entry| entry.path()) {
        let name = path
            .file_name()
            .and_then(|name| name.to_str())
            .unwrap_or_default();
        if remove(&path, name) {
            match std::fs::remove_file(&path) {
                Ok(()) => tracing::info!(path = %path.display(), "{why}"),
                Err(error) => {
                    tracing::warn!(path = %path.display(), %error, "cannot remove a kept copy")
                }
            }
        }
    }
}

/// Whether `digest` is a sha256 in hexadecimal (64 digits).
fn is_sha256_hex(digest: &str) -> bool {
    digest.len() == 64 && digest.bytes().all(|byte| byte.is_ascii_hexdigit())
}

/// `<namespace>_<name>_` for the check `namespace/name`; `None` unless both are made of the characters
/// Kubernetes allows in them (lower-case letters, digits, `-` and `.`), so that the prefix names a file in
/// the directory and no other check's.
fn file_prefix(check: &str) -> Option<String> {
    let (namespace, name) = check.split_once('/')?;
    let allowed = |part: &str| {
        !part.is_empty()
            && !part.starts_with('.')
            && part.bytes().all(|byte| {
                byte.is_ascii_lowercase() || byte.is_ascii_digit() || b"-.".contains(&byte)
            })
    };
    (allowed(namespace) && allowed(name)).then(|| format!("{namespace}_{name}_"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    const CHECK: &str = "team-a/deps";

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
            kept.stand_in(CHECK, &in_parts(&digest)).is_none(),
            "nothing kept yet"
        );
        kept.keep(CHECK, &digest, b"component bytes");
        let stand_in = kept.stand_in(CHECK, &in_parts(&digest)).unwrap();
        let data = stand_in.data.as_ref().unwrap();
        assert!(!data.contains_key(PARTS_KEY) && data.contains_key("config"));
        let compressed = &stand_in.binary_data.as_ref().unwrap()[COMPONENT_KEY].0;
        assert_eq!(
            zstd::decode_all(&compressed[..]).unwrap(),
            b"component bytes"
        );
        assert!(
            kept.stand_in(CHECK, &in_parts(&"cd".repeat(32))).is_none(),
            "another version"
        );
        let mut whole = in_parts(&digest);
        whole.data.as_mut().unwrap().remove(PARTS_KEY);
        assert!(kept.stand_in(CHECK, &whole).is_none(), "not in parts");
        assert!(
            kept.stand_in(CHECK, &in_parts("../../etc/passwd"))
                .is_none()
        );
        assert!(kept.stand_in("../x", &in_parts(&digest)).is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_check_keeps_one_copy_the_one_its_newest_version_loaded() {
        let dir = std::env::temp_dir().join(format!("preflight-kept-one-{}", std::process::id()));
        let kept = KeptComponents::open(&dir).unwrap();
        let files = || {
            let mut names: Vec<_> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|entry| entry.unwrap().file_name().into_string().unwrap())
                .collect();
            names.sort();
            names
        };
        let (first, second) = ("ab".repeat(32), "cd".repeat(32));
        kept.keep(CHECK, &first, b"first version");
        kept.keep("team-a/deps-two", &first, b"another check, same bytes");
        kept.keep(CHECK, &second, b"second version");
        assert_eq!(
            files(),
            [
                format!("team-a_deps-two_{first}.wasm.zst"),
                format!("team-a_deps_{second}.wasm.zst")
            ],
            "the replaced version's copy went, the other check's stayed"
        );
        assert!(kept.stand_in(CHECK, &in_parts(&first)).is_none());
        assert!(kept.stand_in(CHECK, &in_parts(&second)).is_some());

        kept.forget(CHECK);
        assert_eq!(files(), [format!("team-a_deps-two_{first}.wasm.zst")]);
        std::fs::write(
            dir.join(format!("{second}.wasm.zst")),
            b"an older operator's copy",
        )
        .unwrap();
        let kept = KeptComponents::open(&dir).unwrap();
        assert_eq!(
            files(),
            [format!("team-a_deps-two_{first}.wasm.zst")],
            "the older operator's copy went when the directory was opened"
        );
        kept.keep("Team-A/deps", &first, b"not a Kubernetes name");
        assert_eq!(
            files().len(),
            1,
            "nothing kept under a name that is not a check's"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
