//! What can go wrong between a check and a registry, with the registry client's error kept as the source.

/// Why a check could not be pushed, pulled or read from the cache. The message names the reference and
/// says what to do; the registry client's error (HTTP status, TLS, authentication) is the source.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    /// The reference is not `oci://REGISTRY/REPOSITORY[:TAG][@sha256:DIGEST]`.
    #[error("`{text}` is not a check reference: {reason}")]
    Reference {
        /// The text given.
        text: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The registry refused the request or could not be reached.
    #[error("registry request for {reference} failed: {source}")]
    Registry {
        /// The reference asked for.
        reference: String,
        /// The registry client's error.
        #[source]
        source: oci_client::errors::OciDistributionError,
    },
    /// The artifact is not a check: not the Wasm layout, several layers, or too large.
    #[error("{reference} is not a check artifact: {reason}")]
    NotACheck {
        /// The reference pulled.
        reference: String,
        /// What the artifact is instead.
        reason: String,
    },
    /// Bytes whose digest is not the one that names them (a registry or cache that lies, or damage).
    #[error("{what} of {reference} has digest {actual}, not {expected}")]
    DigestMismatch {
        /// The reference pulled.
        reference: String,
        /// Which bytes: the manifest or the component.
        what: &'static str,
        /// The digest they should have.
        expected: String,
        /// The digest they have.
        actual: String,
    },
    /// The check's signatures do not meet the signature policy: the check must not run.
    #[error("{reference} is refused before it runs: {reason}")]
    Unsigned {
        /// The reference, pinned to the manifest digest whose signatures were verified.
        reference: String,
        /// Which key's signature is missing, and why none verifies.
        reason: String,
    },
    /// The registry credentials could not be read.
    #[error("cannot read registry credentials for {registry}: {reason}")]
    Credentials {
        /// The registry whose credentials were looked up.
        registry: String,
        /// Why they could not be read.
        reason: String,
    },
    /// The TLS configuration (a CA certificate) is unusable.
    #[error("registry TLS configuration: {0}")]
    Tls(String),
}

impl OciError {
    /// The message with every cause after it, on one line: what the registry answered, or why TLS failed,
    /// is in the causes (a cause whose text the message already holds is not repeated).
    pub fn describe(&self) -> String {
        let mut message = self.to_string();
        let mut source = std::error::Error::source(self);
        while let Some(cause) = source {
            let text = cause.to_string();
            if !message.contains(&text) {
                message.push_str(&format!(": {text}"));
            }
            source = cause.source();
        }
        message
    }
}
