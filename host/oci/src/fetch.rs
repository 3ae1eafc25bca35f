//! Getting a check by reference, the way the CLI and the operator both want it: a digest already in the
//! cache is read from disk without asking the registry (its bytes cannot have changed); anything else is
//! pulled and cached; a tag whose registry fails is served from the digest it last resolved to, and the
//! failure is returned beside it to be reported. Signatures are verified the same way: those kept in the
//! cache first, the registry's when those do not suffice, the cache's alone when the registry is down.

use crate::{
    ArtifactCache, CheckReference, Credentials, OciError, Pulled, Registry, SignaturePolicy,
};

/// Where a fetched check came from.
#[derive(Debug)]
pub enum Origin {
    /// Pulled from the registry now.
    Registry,
    /// Read from the cache: the reference pins a digest already pulled.
    Cache,
    /// Read from the cache because the registry failed: the digest the tag last resolved to.
    CacheAfterRegistryFailure(OciError),
}

/// A check fetched by reference.
#[derive(Debug)]
pub struct Fetched {
    /// The reference, pinned to the digest fetched.
    pub reference: CheckReference,
    /// The manifest and component.
    pub pulled: Pulled,
    /// Where they came from.
    pub origin: Origin,
}

/// Fetches `reference` (a component of at most `max_bytes`), using `cache` when given.
pub async fn fetch(
    registry: &Registry,
    cache: Option<&ArtifactCache>,
    reference: &CheckReference,
    credentials: &Credentials,
    max_bytes: u64,
) -> Result<Fetched, OciError> {
    let cached = |digest: &str| cache.and_then(|cache| cache.get(reference, digest, max_bytes));
    if let Some(pulled) = reference.digest().and_then(cached) {
        return Ok(Fetched {
            reference: reference.clone(),
            pulled,
            origin: Origin::Cache,
        });
    }
    match registry.pull(reference, credentials, max_bytes).await {
        Ok(pulled) => {
            if let Some(cache) = cache {
                cache.put(reference, &pulled);
            }
            Ok(Fetched {
                reference: reference.pinned(&pulled.manifest_digest),
                pulled,
                origin: Origin::Registry,
            })
        }
        Err(error @ OciError::Registry { .. }) => {
            let last = cache
                .and_then(|cache| cache.last_resolved(reference))
                .filter(|_| reference.digest().is_none());
            match last.as_deref().and_then(cached) {
                Some(pulled) => Ok(Fetched {
                    reference: reference.pinned(&pulled.manifest_digest),
                    pulled,
                    origin: Origin::CacheAfterRegistryFailure(error),
                }),
                None => Err(error),
            }
        }
        Err(error) => Err(error),
    }
}

/// Verifies that the check `reference`, pinned to a manifest digest, carries the signatures `policy` asks
/// for. The signatures kept in `cache` are tried first (a check verified once verifies again with no
/// registry); when they do not meet the policy the registry's are read, kept, and tried. A registry that
/// cannot be reached then is an [`OciError::Registry`] (it may pass); signatures that do not meet the policy
/// are [`OciError::Unsigned`], naming the key and the digest.
pub async fn verify_signatures(
    registry: &Registry,
    cache: Option<&ArtifactCache>,
    reference: &CheckReference,
    credentials: &Credentials,
    policy: &SignaturePolicy,
) -> Result<(), OciError> {
    if policy.is_empty() {
        return Ok(());
    }
    let Some(digest) = reference.digest() else {
        return Err(OciError::Unsigned {
            reference: reference.to_string(),
            reason: "a signature can only be verified for a reference pinned to a digest".into(),
        });
    };
    let kept = cache.and_then(|cache| cache.signatures(digest));
    if kept.is_some_and(|kept| policy.verify_image(digest, &kept).is_ok()) {
        return Ok(());
    }
    let signatures = registry
        .pull_signatures(reference, digest, credentials)
        .await?;
    if let Some(cache) = cache {
        cache.put_signatures(digest, &signatures);
    }
    policy
        .verify_image(digest, &signatures)
        .map_err(|reason| OciError::Unsigned {
            reference: reference.to_string(),
            reason,
        })
}
