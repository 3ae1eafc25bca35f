//! Checks in OCI registries: `preflight push` and `preflight pull`, and the `oci://` references `run`,
//! `bench` and `test` take for `--check`. Credentials come from the docker config (`docker login`,
//! `oras login`); pulled checks are cached by digest in `$XDG_CACHE_HOME/preflight/oci` (else
//! `~/.cache/preflight/oci`), so a check pinned by digest is pulled once. With `--verify-key`, a check runs
//! only with a cosign signature by one of the keys for the digest pulled.

use super::{
    ClusterRegistryArgs, EXIT_PROCEED, Format, Problem, PullArgs, PushArgs, RegistryArgs, input,
};
use preflight_oci::{
    ArtifactCache, CheckReference, Credentials, Origin, Registry, RegistryOptions, SignaturePolicy,
    VerificationKey,
};
use serde_json::json;
use std::path::PathBuf;

/// The largest component read from a registry: the operator's bound on a ConfigMap's component.
const MAX_COMPONENT_BYTES: u64 = preflight_operator::MAX_COMPONENT_BYTES as u64;

/// `preflight push CHECK.wasm REF`: loads the component (one this host cannot run is refused here), writes
/// it as a Wasm OCI artifact, and prints its digests and the pinned reference.
pub async fn push(args: PushArgs) -> Result<u8, Problem> {
    let component = input::read(&args.check)?;
    input::load_check(&component)?;
    let reference = parse(&args.reference)?;
    let registry = args.registry.registry(&reference)?;
    let pushed = registry
        .push(&reference, &component, &Credentials::DockerConfig)
        .await
        .map_err(registry_problem)?;
    let pinned = reference.pinned(&pushed.manifest_digest);
    report(
        args.output,
        &[
            ("pushed", reference.to_string()),
            ("digest", pushed.manifest_digest),
            ("component", pushed.component_digest),
            ("pinned", pinned.to_string()),
        ],
    );
    Ok(EXIT_PROCEED)
}

/// `preflight pull REF -o FILE`: reads a check artifact (digests verified), writes its component.
pub async fn pull(args: PullArgs) -> Result<u8, Problem> {
    let reference = parse(&args.reference)?;
    let keys = verification_keys(&args.registry.verify_key)?;
    let fetched = fetch(&reference, &args.registry, &keys).await?;
    let verified = match keys.as_slice() {
        [] => "no (no --verify-key)".to_owned(),
        keys => format!(
            "cosign signature by {}",
            keys.iter()
                .map(VerificationKey::name)
                .collect::<Vec<_>>()
                .join(" or ")
        ),
    };
    input::write(&args.output_file, &fetched.pulled.component)?;
    report(
        args.output,
        &[
            ("pulled", reference.to_string()),
            ("digest", fetched.pulled.manifest_digest.clone()),
            (
                "component",
                preflight_oci::sha256_digest(&fetched.pulled.component),
            ),
            ("pinned", fetched.reference.to_string()),
            ("verified", verified),
            ("written", args.output_file.display().to_string()),
        ],
    );
    Ok(EXIT_PROCEED)
}

/// The component at `location`: a file, or an `oci://` reference pulled (or read from the cache).
pub async fn read_check(location: &str, registry: &RegistryArgs) -> Result<Vec<u8>, Problem> {
    if !CheckReference::is_reference(location) {
        return input::read(std::path::Path::new(location));
    }
    let reference = parse(location)?;
    let keys = verification_keys(&registry.verify_key)?;
    Ok(fetch(&reference, registry, &keys).await?.pulled.component)
}

/// Fetches `reference` through the cache, and verifies that one of `keys` (the `--verify-key` keys; none:
/// no verification) signed it; a tag served from the cache because the registry failed is said on stderr.
async fn fetch(
    reference: &CheckReference,
    registry: &RegistryArgs,
    keys: &[VerificationKey],
) -> Result<preflight_oci::Fetched, Problem> {
    let client = registry.registry(reference)?;
    let cache = input::user_cache_dir("oci").map(ArtifactCache::new);
    let fetched = preflight_oci::fetch(
        &client,
        cache.as_ref(),
        reference,
        &Credentials::DockerConfig,
        MAX_COMPONENT_BYTES,
    )
    .await
    .map_err(registry_problem)?;
    if let Origin::CacheAfterRegistryFailure(error) = &fetched.origin {
        eprintln!(
            "warning: {error}; using {}, which {reference} resolved to when last pulled",
            fetched.reference
        );
    }
    let mut policy = SignaturePolicy::default();
    policy.require_one_of(keys.to_vec());
    preflight_oci::verify_signatures(
        &client,
        cache.as_ref(),
        &fetched.reference,
        &Credentials::DockerConfig,
        &policy,
    )
    .await
    .map_err(registry_problem)?;
    Ok(fetched)
}

/// The cosign public keys in `files`, each named by its file.
pub fn verification_keys(files: &[PathBuf]) -> Result<Vec<VerificationKey>, Problem> {
    files
        .iter()
        .map(|path| {
            let pem = input::read(path)?;
            VerificationKey::from_pem(format!("key {}", path.display()), &pem)
                .map_err(Problem::Input)
        })
        .collect()
}

impl RegistryArgs {
    /// A registry client for `reference` with these options.
    fn registry(&self, reference: &CheckReference) -> Result<Registry, Problem> {
        let ca_certificates = read_all(&self.registry_ca)?;
        Ok(Registry::new(&RegistryOptions {
            plain_http: if self.plain_http {
                vec![reference.registry().to_owned()]
            } else {
                Vec::new()
            },
            ca_certificates,
            ..RegistryOptions::default()
        }))
    }
}

impl ClusterRegistryArgs {
    /// The registry options these flags give.
    pub fn options(&self) -> Result<RegistryOptions, Problem> {
        Ok(RegistryOptions {
            plain_http: self.registry_plain_http.clone(),
            ca_certificates: read_all(&self.registry_ca)?,
            ..RegistryOptions::default()
        })
    }
}

/// The contents of `files`.
fn read_all(files: &[PathBuf]) -> Result<Vec<Vec<u8>>, Problem> {
    files.iter().map(|path| input::read(path)).collect()
}

fn parse(text: &str) -> Result<CheckReference, Problem> {
    CheckReference::parse(text).map_err(|error| Problem::Input(error.to_string()))
}

fn registry_problem(error: preflight_oci::OciError) -> Problem {
    Problem::Input(error.describe())
}

/// Prints `fields` as aligned text or one JSON object.
fn report(format: Format, fields: &[(&str, String)]) {
    match format {
        Format::Text => {
            for (name, value) in fields {
                println!("{name:<10}{value}");
            }
        }
        Format::Json => {
            let object: serde_json::Map<String, serde_json::Value> = fields
                .iter()
                .map(|(name, value)| ((*name).to_owned(), json!(value)))
                .collect();
            println!("{:#}", serde_json::Value::Object(object));
        }
    }
}
