//! Check references: `oci://REGISTRY/REPOSITORY[:TAG][@sha256:DIGEST]`, as a check ConfigMap's `source`
//! and the CLI's `--check` take them (`oci://` may be left out where only a reference can stand).

use crate::OciError;
use oci_client::Reference;
use std::fmt;

/// The scheme that marks a check reference where a file path could also stand.
pub(crate) const SCHEME: &str = "oci://";

/// A parsed check reference. A digest pins the bytes; a tag alone names whatever the registry holds now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckReference {
    reference: Reference,
}

impl CheckReference {
    /// Parses `[oci://]REGISTRY/REPOSITORY[:TAG][@sha256:DIGEST]`. The registry must be named (no implied
    /// Docker Hub: a check's origin is never a guess), and a digest must be a sha256 one.
    pub fn parse(text: &str) -> Result<Self, OciError> {
        let refused = |reason: &str| OciError::Reference {
            text: text.to_owned(),
            reason: reason.to_owned(),
        };
        let bare = text.trim();
        let bare = bare.strip_prefix(SCHEME).unwrap_or(bare);
        let (name, _) = bare.split_once('@').unwrap_or((bare, ""));
        let registry = name.split_once('/').map(|(first, _)| first);
        if !registry.is_some_and(|first| first.contains(['.', ':']) || first == "localhost") {
            return Err(refused(
                "name the registry, e.g. oci://ghcr.io/acme/checks/ready:1.0 or oci://localhost:5000/ready@sha256:…",
            ));
        }
        let reference: Reference = bare
            .parse()
            .map_err(|error: oci_client::ParseError| refused(&error.to_string()))?;
        if let Some(digest) = reference.digest() {
            let hex = digest.strip_prefix("sha256:").unwrap_or_default();
            if hex.len() != 64 || !hex.bytes().all(|byte| byte.is_ascii_hexdigit()) {
                return Err(refused(
                    "the digest must be sha256: and 64 hexadecimal digits",
                ));
            }
        }
        Ok(Self { reference })
    }

    /// Whether `text` is written as a check reference (starts with `oci://`) rather than a file path.
    pub fn is_reference(text: &str) -> bool {
        text.trim_start().starts_with(SCHEME)
    }

    /// The manifest digest the reference pins (`sha256:…`), if any.
    pub fn digest(&self) -> Option<&str> {
        self.reference.digest()
    }

    /// The tag, if the reference names one.
    pub fn tag(&self) -> Option<&str> {
        self.reference.tag()
    }

    /// The registry's host (and port).
    pub fn registry(&self) -> &str {
        self.reference.registry()
    }

    /// The same repository pinned to `digest`.
    pub fn pinned(&self, digest: &str) -> Self {
        Self {
            reference: self.reference.clone_with_digest(digest.to_owned()),
        }
    }

    /// A reference the registry client built (the tag of a check's signatures).
    pub(crate) fn from_oci(reference: Reference) -> Self {
        Self { reference }
    }

    /// The reference as the registry client takes it.
    pub(crate) fn as_oci(&self) -> &Reference {
        &self.reference
    }
}

impl fmt::Display for CheckReference {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{SCHEME}{}", self.reference.whole())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn references_name_their_registry_and_pin_with_sha256() {
        let tagged = CheckReference::parse("oci://localhost:5000/checks/ready:1.0").unwrap();
        assert_eq!(
            (tagged.registry(), tagged.tag(), tagged.digest()),
            ("localhost:5000", Some("1.0"), None)
        );
        assert_eq!(tagged.to_string(), "oci://localhost:5000/checks/ready:1.0");
        let pinned =
            CheckReference::parse(&format!("registry.example.com/ready@{DIGEST}")).unwrap();
        assert_eq!(pinned.digest(), Some(DIGEST));
        assert_eq!(tagged.pinned(DIGEST).digest(), Some(DIGEST));

        for (text, says) in [
            ("oci://ready:1.0", "name the registry"),
            ("oci://checks/ready:1.0", "name the registry"),
            ("oci://localhost:5000/Ready", "is not a check reference"),
            (
                "oci://localhost:5000/ready@sha256:abc",
                "is not a check reference",
            ),
        ] {
            let error = CheckReference::parse(text).unwrap_err().to_string();
            assert!(error.contains(says), "{text}: {error}");
        }
        let sha512 = format!("oci://localhost:5000/ready@sha512:{}", "ab".repeat(64));
        let error = CheckReference::parse(&sha512).unwrap_err().to_string();
        assert!(error.contains("must be sha256"), "{error}");
        assert!(CheckReference::is_reference(" oci://x/y"));
        assert!(!CheckReference::is_reference("check.wasm"));
    }
}
