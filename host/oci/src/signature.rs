//! Cosign signatures of checks, verified offline against public keys.
//!
//! A check in a registry is signed the way every image is: `cosign sign --key cosign.key REF@sha256:…`
//! stores, at the tag `sha256-<hex>.sig` of the same repository, a manifest whose layers are
//! simple-signing payloads naming the signed manifest digest, each with its signature in an annotation. A
//! signature counts when it verifies with the key *and* its payload names the digest being run: a signature
//! copied onto other bytes verifies, but names the bytes it was made for.
//!
//! A check in a ConfigMap is signed as a file: `cosign sign-blob --key cosign.key check.wasm` prints a
//! signature over the component's bytes, which the ConfigMap carries.

use serde::{Deserialize, Serialize};
use sigstore::crypto::{CosignVerificationKey, Signature};
use std::fmt;

/// The media type of a cosign simple-signing payload layer.
pub const SIMPLE_SIGNING_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The layer annotation holding the base64 signature of the payload.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// The `critical.type` of a payload that signs an image.
const IMAGE_SIGNATURE_TYPE: &str = "cosign container image signature";

/// A public key checks must be signed with (ECDSA P-256 as `cosign generate-key-pair` makes it, P-384,
/// Ed25519 or RSA), with the name messages call it by.
#[derive(Clone)]
pub struct VerificationKey {
    name: String,
    key: CosignVerificationKey,
}

impl fmt::Debug for VerificationKey {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_tuple("VerificationKey")
            .field(&self.name)
            .finish()
    }
}

impl VerificationKey {
    /// Reads a PEM public key (`cosign.pub`); `name` says where it came from (a file, a Secret).
    pub fn from_pem(name: impl Into<String>, pem: &[u8]) -> Result<Self, String> {
        let name = name.into();
        CosignVerificationKey::try_from_pem(pem)
            .map(|key| Self {
                name: name.clone(),
                key,
            })
            .map_err(|error| format!("{name} is not a PEM public key: {error}"))
    }

    /// Where the key came from, as messages name it.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn verifies(&self, signature: &str, message: &[u8]) -> bool {
        self.key
            .verify_signature(
                Signature::Base64Encoded(signature.trim().as_bytes()),
                message,
            )
            .is_ok()
    }
}

/// One signature stored beside an image: a simple-signing payload and its base64 signature.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageSignature {
    /// The payload, as signed (JSON naming the manifest digest).
    pub payload: Vec<u8>,
    /// The signature of `payload`, base64.
    pub signature: String,
}

/// The simple-signing payload, as far as verification reads it.
#[derive(Deserialize)]
struct Payload {
    critical: Critical,
}

#[derive(Deserialize)]
struct Critical {
    image: SignedImage,
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Deserialize)]
struct SignedImage {
    #[serde(rename = "docker-manifest-digest")]
    manifest_digest: String,
}

/// The signatures a check must carry: for each requirement, one signature by one of its keys. Empty, it
/// asks for nothing.
#[derive(Debug, Clone, Default)]
pub struct SignaturePolicy {
    requirements: Vec<Vec<VerificationKey>>,
}

impl SignaturePolicy {
    /// Adds a requirement: a signature by one of `keys` (none: nothing is added).
    pub fn require_one_of(&mut self, keys: Vec<VerificationKey>) {
        if !keys.is_empty() {
            self.requirements.push(keys);
        }
    }

    /// Whether the policy asks for no signature.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether the `signatures` stored beside the image whose manifest digest is `manifest_digest` meet
    /// every requirement; the first one unmet is described, naming its keys.
    pub fn verify_image(
        &self,
        manifest_digest: &str,
        signatures: &[ImageSignature],
    ) -> Result<(), String> {
        for keys in &self.requirements {
            let mut signed_other = None;
            let met = keys.iter().any(|key| {
                signatures.iter().any(|signature| {
                    if !key.verifies(&signature.signature, &signature.payload) {
                        return false;
                    }
                    match serde_json::from_slice::<Payload>(&signature.payload) {
                        Ok(payload) if payload.critical.kind != IMAGE_SIGNATURE_TYPE => false,
                        Ok(payload)
                            if payload.critical.image.manifest_digest == manifest_digest =>
                        {
                            true
                        }
                        Ok(payload) => {
                            signed_other =
                                Some((key.name(), payload.critical.image.manifest_digest));
                            false
                        }
                        Err(_) => false,
                    }
                })
            });
            if met {
                continue;
            }
            let wanted = names(keys);
            return Err(match (signatures.len(), signed_other) {
                (_, Some((key, other))) => format!(
                    "its signature by {key} is for {other}, not {manifest_digest}: the bytes changed after \
                     signing (or the signature was copied from other bytes); it must be signed by {wanted}"
                ),
                (0, None) => format!(
                    "{manifest_digest} carries no cosign signature (nothing at the tag {}); it must be \
                     signed by {wanted}",
                    signature_tag(manifest_digest)
                ),
                (count, None) => format!(
                    "none of the {count} signature(s) of {manifest_digest} verifies with {wanted}"
                ),
            });
        }
        Ok(())
    }

    /// Whether `signatures` (base64, as `cosign sign-blob` prints them) over `bytes`, whose digest is
    /// `digest`, meet every requirement; the first one unmet is described, naming its keys.
    pub fn verify_blob(
        &self,
        bytes: &[u8],
        digest: &str,
        signatures: &[&str],
    ) -> Result<(), String> {
        for keys in &self.requirements {
            let met = keys.iter().any(|key| {
                signatures
                    .iter()
                    .any(|signature| key.verifies(signature, bytes))
            });
            if met {
                continue;
            }
            let wanted = names(keys);
            return Err(if signatures.is_empty() {
                format!(
                    "the component (sha256 {digest}) carries no signature; it must be signed by {wanted} \
                     (cosign sign-blob --key … check.wasm, into the data key `signature`)"
                )
            } else {
                format!(
                    "no signature of the component (sha256 {digest}) verifies with {wanted}: the bytes \
                     changed after signing, or another key signed them"
                )
            });
        }
        Ok(())
    }
}

/// The tag cosign stores the signatures of `manifest_digest` at: `sha256-<hex>.sig`.
pub(crate) fn signature_tag(manifest_digest: &str) -> String {
    format!("{}.sig", manifest_digest.replacen(':', "-", 1))
}

/// `key a or key b`.
fn names(keys: &[VerificationKey]) -> String {
    keys.iter()
        .map(VerificationKey::name)
        .collect::<Vec<_>>()
        .join(" or ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;
    use sigstore::crypto::{SigStoreSigner, SigningScheme};

    fn signer() -> SigStoreSigner {
        SigningScheme::ECDSA_P256_SHA256_ASN1
            .create_signer()
            .unwrap()
    }

    fn key(name: &str, signer: &SigStoreSigner) -> VerificationKey {
        let pem = signer
            .to_sigstore_keypair()
            .unwrap()
            .public_key_to_pem()
            .unwrap();
        VerificationKey::from_pem(name, pem.as_bytes()).unwrap()
    }

    fn sign(signer: &SigStoreSigner, bytes: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(signer.sign(bytes).unwrap())
    }

    fn image_signature(signer: &SigStoreSigner, digest: &str, kind: &str) -> ImageSignature {
        let payload = serde_json::json!({
            "critical": {
                "identity": {"docker-reference": "localhost:5000/checks/ready"},
                "image": {"docker-manifest-digest": digest},
                "type": kind,
            },
            "optional": null,
        })
        .to_string()
        .into_bytes();
        ImageSignature {
            signature: sign(signer, &payload),
            payload,
        }
    }

    const DIGEST: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
    const OTHER: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";

    #[test]
    fn an_image_is_accepted_only_with_a_signature_by_a_required_key_for_its_own_digest() {
        let (ours, theirs) = (signer(), signer());
        let mut policy = SignaturePolicy::default();
        assert!(policy.is_empty());
        assert_eq!(policy.verify_image(DIGEST, &[]), Ok(()), "nothing asked");
        policy.require_one_of(vec![key("key A", &ours)]);
        let by_ours = image_signature(&ours, DIGEST, IMAGE_SIGNATURE_TYPE);
        let by_theirs = image_signature(&theirs, DIGEST, IMAGE_SIGNATURE_TYPE);
        let for_other = image_signature(&ours, OTHER, IMAGE_SIGNATURE_TYPE);
        let other_type = image_signature(&ours, DIGEST, "cosign attestation");
        let mut tampered = by_ours.clone();
        tampered.payload = image_signature(&theirs, OTHER, IMAGE_SIGNATURE_TYPE).payload;
        let table: [(&str, Vec<ImageSignature>, Option<&str>); 7] = [
            ("signed", vec![by_ours.clone()], None),
            (
                "signed among others",
                vec![by_theirs.clone(), by_ours],
                None,
            ),
            (
                "unsigned",
                vec![],
                Some("carries no cosign signature (nothing at the tag sha256-1111"),
            ),
            (
                "other key",
                vec![by_theirs],
                Some("none of the 1 signature(s) of sha256:1111"),
            ),
            (
                "other bytes",
                vec![for_other],
                Some("its signature by key A is for sha256:2222"),
            ),
            (
                "not an image signature",
                vec![other_type],
                Some("verifies with key A"),
            ),
            (
                "payload replaced",
                vec![tampered],
                Some("verifies with key A"),
            ),
        ];
        for (case, signatures, refused) in table {
            match (policy.verify_image(DIGEST, &signatures), refused) {
                (Ok(()), None) => {}
                (Err(problem), Some(expected)) => {
                    assert!(problem.contains(expected), "{case}: {problem}");
                    assert!(problem.contains("key A"), "{case} names the key: {problem}");
                }
                (result, _) => panic!("{case}: {result:?}"),
            }
        }
    }

    #[test]
    fn every_requirement_needs_its_own_signature_and_any_key_of_one_meets_it() {
        let (a, b, c) = (signer(), signer(), signer());
        let mut policy = SignaturePolicy::default();
        policy.require_one_of(vec![key("key A", &a), key("key B", &b)]);
        policy.require_one_of(vec![key("key C", &c)]);
        let blob = b"\0asm component";
        let by = |signer| sign(signer, blob);
        assert_eq!(policy.verify_blob(blob, "d", &[&by(&b), &by(&c)]), Ok(()));
        assert_eq!(policy.verify_blob(blob, "d", &[&by(&c), &by(&a)]), Ok(()));
        let refused = policy.verify_blob(blob, "d", &[&by(&a)]).unwrap_err();
        assert!(refused.contains("verifies with key C"), "{refused}");
        let refused = policy.verify_blob(blob, "d", &[&by(&c)]).unwrap_err();
        assert!(refused.contains("key A or key B"), "{refused}");
        let refused = policy
            .verify_blob(b"other", "d", &[&by(&a), &by(&c)])
            .unwrap_err();
        assert!(
            refused.contains("the bytes changed after signing"),
            "{refused}"
        );
        let refused = policy.verify_blob(blob, "d", &[]).unwrap_err();
        assert!(refused.contains("carries no signature"), "{refused}");
        assert!(policy.verify_blob(blob, "d", &["not base64!"]).is_err());
    }

    #[test]
    fn a_key_that_is_not_pem_is_refused_by_name() {
        let problem = VerificationKey::from_pem("secret ns/keys", b"cosign").unwrap_err();
        assert!(
            problem.starts_with("secret ns/keys is not a PEM public key"),
            "{problem}"
        );
    }
}
