//! Checks as Wasm OCI artifacts: a check travels through any OCI registry in the CNCF Wasm artifact layout
//! (config `application/vnd.wasm.config.v0+json`, one `application/wasm` layer), so that `oras`, `wkg` and
//! registries' UIs recognise it and registries' access control, replication and signatures apply to it.
//!
//! This crate knows registries, not Kubernetes nor wasmtime: [`Registry`] pushes and pulls, [`ArtifactCache`]
//! keeps what was pulled on disk by manifest digest (verified again on every read), and [`fetch`] puts the
//! two together the way both the CLI and the operator want it: the cache first for a digest, the registry
//! for a tag, the cache again when the registry cannot be reached. [`verify_signatures`] holds a check to
//! the cosign signatures a [`SignaturePolicy`] asks for, offline once they are cached.

mod artifact;
mod cache;
mod credentials;
mod error;
mod fetch;
mod reference;
mod registry;
mod signature;

pub use artifact::{CONFIG_MEDIA_TYPE, LAYER_MEDIA_TYPE};
pub use cache::ArtifactCache;
pub use credentials::Credentials;
pub use error::OciError;
pub use fetch::{Fetched, Origin, fetch, verify_signatures};
pub use reference::CheckReference;
pub use registry::{Pulled, Pushed, Registry, RegistryOptions};
pub use signature::{
    ImageSignature, SIGNATURE_ANNOTATION, SIMPLE_SIGNING_MEDIA_TYPE, SignaturePolicy,
    VerificationKey,
};

/// `sha256:<hex>` of `bytes`: the digest form OCI uses.
pub fn sha256_digest(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}
