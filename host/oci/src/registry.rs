//! Pushing and pulling check artifacts with the ORAS project's OCI client: plain HTTP only for the
//! registries named so, extra CA certificates for private registries, and bounded reads (a component is
//! never read past the size its caller accepts).

use crate::artifact::{Artifact, component_layer};
use crate::signature::signature_tag;
use crate::{
    CheckReference, Credentials, ImageSignature, OciError, SIGNATURE_ANNOTATION,
    SIMPLE_SIGNING_MEDIA_TYPE, sha256_digest,
};
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::{IMAGE_MANIFEST_MEDIA_TYPE, OCI_IMAGE_MEDIA_TYPE, OciImageManifest};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::AsyncWrite;

/// How to reach registries.
#[derive(Debug, Clone)]
pub struct RegistryOptions {
    /// Registries (`host:port`) reached over plain HTTP: test and in-cluster registries. Every other
    /// registry is reached over HTTPS.
    pub plain_http: Vec<String>,
    /// PEM CA certificates trusted besides the system's, for registries with a private CA.
    pub ca_certificates: Vec<Vec<u8>>,
    /// Bound on connecting and on each read: a registry that stops answering fails, it does not hang.
    pub timeout: Duration,
}

impl Default for RegistryOptions {
    fn default() -> Self {
        Self {
            plain_http: Vec::new(),
            ca_certificates: Vec::new(),
            timeout: Duration::from_secs(30),
        }
    }
}

/// A client for the registries that hold checks.
///
/// Each push and pull talks through a client of its own: oci-client keeps the first credentials it is
/// given for a registry (and the tokens they bought) for the life of its client, so a shared one would
/// answer every later check on that registry with the first check's login, and ignore a pull secret that
/// changed.
pub struct Registry {
    options: RegistryOptions,
}

/// What a push wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    /// The manifest digest: what a reference pins (`oci://…@sha256:…`) and what a signature signs.
    pub manifest_digest: String,
    /// The component's digest (the layer's), which a check ConfigMap's `sha256` key pins.
    pub component_digest: String,
}

/// A check artifact read from a registry, its digests verified.
#[derive(Debug, Clone)]
pub struct Pulled {
    /// The manifest digest.
    pub manifest_digest: String,
    /// The manifest, as the registry served it (its sha256 is `manifest_digest`).
    pub manifest: Vec<u8>,
    /// The component.
    pub component: Vec<u8>,
}

impl Registry {
    /// A client with `options`.
    pub fn new(options: &RegistryOptions) -> Self {
        // The TLS stack is built without a default provider, so that the host links one (ring) only.
        let _ = rustls::crypto::ring::default_provider().install_default();
        Self {
            options: options.clone(),
        }
    }

    /// A fresh oci-client, holding no credentials yet (see [`Registry`]).
    fn client(&self) -> oci_client::Client {
        let options = &self.options;
        oci_client::Client::new(ClientConfig {
            protocol: ClientProtocol::HttpsExcept(options.plain_http.clone()),
            extra_root_certificates: options
                .ca_certificates
                .iter()
                .map(|pem| Certificate {
                    encoding: CertificateEncoding::Pem,
                    data: pem.clone(),
                })
                .collect(),
            connect_timeout: Some(options.timeout),
            read_timeout: Some(options.timeout),
            platform_resolver: None,
            user_agent: concat!("preflight/", env!("CARGO_PKG_VERSION")),
            ..ClientConfig::default()
        })
    }

    /// Writes `component` to `reference` as a Wasm artifact (blobs, then the manifest, so that a reader
    /// never sees a manifest whose blobs are missing).
    pub async fn push(
        &self,
        reference: &CheckReference,
        component: &[u8],
        credentials: &Credentials,
    ) -> Result<Pushed, OciError> {
        let failed = |source| registry_error(reference, source);
        let image = reference.as_oci();
        let auth = credentials.for_registry(reference.registry())?;
        let client = self.client();
        client
            .store_auth_if_needed(image.resolve_registry(), &auth)
            .await;
        let artifact = Artifact::of(component);
        let component_digest = sha256_digest(component);
        let config_digest = sha256_digest(&artifact.config);
        for (blob, digest) in [
            (component.to_vec(), &component_digest),
            (artifact.config, &config_digest),
        ] {
            if !client.blob_exists(image, digest).await.map_err(failed)? {
                client
                    .push_blob(image, blob, digest)
                    .await
                    .map_err(failed)?;
            }
        }
        let manifest_digest = sha256_digest(&artifact.manifest);
        let content_type = OCI_IMAGE_MEDIA_TYPE.parse().map_err(|_| {
            failed(OciDistributionError::GenericError(Some(
                "manifest media type".into(),
            )))
        })?;
        client
            .push_manifest_raw(image, artifact.manifest, content_type)
            .await
            .map_err(failed)?;
        Ok(Pushed {
            manifest_digest,
            component_digest,
        })
    }

    /// Reads the check at `reference`: its manifest (which must be the Wasm layout with a component of at
    /// most `max_bytes`) and its component, both verified against their digests.
    pub async fn pull(
        &self,
        reference: &CheckReference,
        credentials: &Credentials,
        max_bytes: u64,
    ) -> Result<Pulled, OciError> {
        let failed = |source| registry_error(reference, source);
        let image = reference.as_oci();
        let auth = credentials.for_registry(reference.registry())?;
        let client = self.client();
        let (manifest, manifest_digest) = client
            .pull_manifest_raw(image, &auth, &[OCI_IMAGE_MEDIA_TYPE])
            .await
            .map_err(failed)?;
        let manifest = manifest.to_vec();
        verify(reference, "the manifest", &manifest, &manifest_digest)?;
        if let Some(pinned) = reference.digest() {
            verify(reference, "the manifest", &manifest, pinned)?;
        }
        let layer = component_layer(&reference.to_string(), &manifest, max_bytes)?;
        let mut component = BoundedBuffer::new(max_bytes);
        client
            .pull_blob(image, &layer, &mut component)
            .await
            .map_err(failed)?;
        let component = component.bytes;
        verify(reference, "the component", &component, &layer.digest)?;
        Ok(Pulled {
            manifest_digest,
            manifest,
            component,
        })
    }
}

/// The most signatures read beside one check, and the largest payload read: a signature tag is the
/// registry's to fill, and a payload is a few hundred bytes of JSON.
const MAX_SIGNATURES: usize = 64;
const MAX_PAYLOAD_BYTES: u64 = 64 << 10;

impl Registry {
    /// The cosign signatures stored beside the check `reference` whose manifest digest is
    /// `manifest_digest` (at the tag `sha256-<hex>.sig` of its repository); none when that tag does not
    /// exist. Each payload is read verified against its digest; whether a signature verifies is the
    /// [`SignaturePolicy`](crate::SignaturePolicy)'s to say.
    pub async fn pull_signatures(
        &self,
        reference: &CheckReference,
        manifest_digest: &str,
        credentials: &Credentials,
    ) -> Result<Vec<ImageSignature>, OciError> {
        let image = reference.as_oci();
        let tag = oci_client::Reference::with_tag(
            image.registry().to_owned(),
            image.repository().to_owned(),
            signature_tag(manifest_digest),
        );
        let tag_reference = CheckReference::from_oci(tag.clone());
        let failed = |source| registry_error(&tag_reference, source);
        let auth = credentials.for_registry(reference.registry())?;
        let client = self.client();
        let accepted = [OCI_IMAGE_MEDIA_TYPE, IMAGE_MANIFEST_MEDIA_TYPE];
        let (manifest, digest) = match client.pull_manifest_raw(&tag, &auth, &accepted).await {
            Ok(pulled) => pulled,
            Err(error) if is_not_found(&error) => return Ok(Vec::new()),
            Err(error) => return Err(failed(error)),
        };
        verify(&tag_reference, "the signature manifest", &manifest, &digest)?;
        let manifest: OciImageManifest =
            serde_json::from_slice(&manifest).map_err(|error| OciError::NotACheck {
                reference: tag_reference.to_string(),
                reason: format!("its manifest is not an OCI image manifest: {error}"),
            })?;
        let mut signatures = Vec::new();
        let layers = manifest
            .layers
            .iter()
            .filter(|layer| layer.media_type == SIMPLE_SIGNING_MEDIA_TYPE)
            .filter(|layer| (0..=MAX_PAYLOAD_BYTES as i64).contains(&layer.size))
            .take(MAX_SIGNATURES);
        for layer in layers {
            let Some(signature) = layer
                .annotations
                .as_ref()
                .and_then(|annotations| annotations.get(SIGNATURE_ANNOTATION))
            else {
                continue;
            };
            let mut payload = BoundedBuffer::new(MAX_PAYLOAD_BYTES);
            client
                .pull_blob(&tag, layer, &mut payload)
                .await
                .map_err(failed)?;
            verify(
                &tag_reference,
                "a signature payload",
                &payload.bytes,
                &layer.digest,
            )?;
            signatures.push(ImageSignature {
                payload: payload.bytes,
                signature: signature.clone(),
            });
        }
        Ok(signatures)
    }
}

/// Whether the registry answered that the manifest does not exist.
fn is_not_found(error: &OciDistributionError) -> bool {
    match error {
        OciDistributionError::ImageManifestNotFoundError(_) => true,
        OciDistributionError::ServerError { code, .. } => *code == 404,
        OciDistributionError::RegistryError { envelope, .. } => {
            envelope.errors.iter().any(|error| {
                matches!(
                    error.code,
                    OciErrorCode::ManifestUnknown | OciErrorCode::NotFound
                )
            })
        }
        _ => false,
    }
}

/// Refuses `bytes` unless their sha256 is `expected`.
pub(crate) fn verify(
    reference: &CheckReference,
    what: &'static str,
    bytes: &[u8],
    expected: &str,
) -> Result<(), OciError> {
    let actual = sha256_digest(bytes);
    if actual == expected {
        return Ok(());
    }
    Err(OciError::DigestMismatch {
        reference: reference.to_string(),
        what,
        expected: expected.to_owned(),
        actual,
    })
}

fn registry_error(reference: &CheckReference, source: OciDistributionError) -> OciError {
    OciError::Registry {
        reference: reference.to_string(),
        source,
    }
}

/// A buffer that refuses to grow past its bound: a registry that streams more than the manifest
/// declared fails the pull instead of filling memory.
struct BoundedBuffer {
    bytes: Vec<u8>,
    max: u64,
}

impl BoundedBuffer {
    fn new(max: u64) -> Self {
        Self {
            bytes: Vec::new(),
            max,
        }
    }
}

impl AsyncWrite for BoundedBuffer {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let buffer = self.get_mut();
        if (buffer.bytes.len() + data.len()) as u64 > buffer.max {
            return Poll::Ready(Err(std::io::Error::other(format!(
                "the layer is longer than {} bytes",
                buffer.max
            ))));
        }
        buffer.bytes.extend_from_slice(data);
        Poll::Ready(Ok(data.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
