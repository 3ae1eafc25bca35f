//! SHA-256 digests: the identity of a check's bytes, used to deduplicate compiles and key the cache.

use sha2::{Digest as _, Sha256};
use std::fmt;

/// The SHA-256 of a component's bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest([u8; 32]);

impl Digest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Self(Sha256::digest(bytes).into())
    }

    /// Parses 64 hexadecimal digits, with or without a `sha256:` prefix.
    pub fn parse(text: &str) -> Option<Self> {
        let hex_digits = text.trim().strip_prefix("sha256:").unwrap_or(text.trim());
        let mut bytes = [0; 32];
        hex::decode_to_slice(hex_digits, &mut bytes).ok()?;
        Some(Self(bytes))
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{self}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_hex_with_or_without_prefix() {
        let digest = Digest::of(b"abc");
        assert_eq!(
            digest.to_string(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(Digest::parse(&digest.to_string()), Some(digest));
        assert_eq!(Digest::parse(&format!("sha256:{digest}")), Some(digest));
        assert_eq!(Digest::parse("xyz"), None);
    }
}
