//! Registry credentials, from a docker `config.json`: the file `docker login`, `oras login` and
//! `podman login` write, and the `.dockerconfigjson` of a Kubernetes pull secret. Read with the
//! `docker_credential` crate (which also runs credential helpers), not by hand.

use crate::OciError;
use docker_credential::{CredentialRetrievalError, DockerCredential};
use oci_client::secrets::RegistryAuth;

/// Where a registry's credentials come from.
#[derive(Debug, Clone, Default)]
pub enum Credentials {
    /// None: anonymous access.
    #[default]
    Anonymous,
    /// The user's docker config (`$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`); anonymous
    /// when it does not exist or names no credentials for the registry.
    DockerConfig,
    /// The contents of a docker config.json (a pull secret's `.dockerconfigjson`); anonymous when it
    /// names no credentials for the registry.
    DockerConfigJson(Vec<u8>),
}

impl Credentials {
    /// The authentication for `registry`.
    pub(crate) fn for_registry(&self, registry: &str) -> Result<RegistryAuth, OciError> {
        let json = match self {
            Self::Anonymous => return Ok(RegistryAuth::Anonymous),
            Self::DockerConfigJson(json) => json.clone(),
            Self::DockerConfig => match docker_config_file() {
                None => return Ok(RegistryAuth::Anonymous),
                Some(path) => std::fs::read(&path).map_err(|error| OciError::Credentials {
                    registry: registry.to_owned(),
                    reason: format!("{}: {error}", path.display()),
                })?,
            },
        };
        let found = docker_credential::get_credential_from_reader(json.as_slice(), registry);
        match found {
            Ok(DockerCredential::UsernamePassword(username, password)) => {
                Ok(RegistryAuth::Basic(username, password))
            }
            Ok(DockerCredential::IdentityToken(token)) => Ok(RegistryAuth::Bearer(token)),
            Err(
                CredentialRetrievalError::ConfigNotFound
                | CredentialRetrievalError::NoCredentialConfigured,
            ) => Ok(RegistryAuth::Anonymous),
            Err(error) => Err(OciError::Credentials {
                registry: registry.to_owned(),
                reason: error.to_string(),
            }),
        }
    }
}

/// `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`, if it exists.
fn docker_config_file() -> Option<std::path::PathBuf> {
    let dir = std::env::var_os("DOCKER_CONFIG")
        .filter(|dir| !dir.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|home| std::path::Path::new(&home).join(".docker"))
        })?;
    Some(dir.join("config.json")).filter(|path| path.exists())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_json_gives_the_registry_its_own_credentials() {
        let json = br#"{"auths":{"registry.example.com":{"auth":"YWxpY2U6czNjcmV0"}}}"#.to_vec();
        let credentials = Credentials::DockerConfigJson(json);
        let auth = credentials.for_registry("registry.example.com").unwrap();
        assert!(
            matches!(&auth, RegistryAuth::Basic(user, password) if user == "alice" && password == "s3cret"),
            "{auth:?}"
        );
        let other = credentials.for_registry("ghcr.io").unwrap();
        assert!(matches!(other, RegistryAuth::Anonymous), "{other:?}");
        let broken = Credentials::DockerConfigJson(b"not json".to_vec());
        let error = broken.for_registry("ghcr.io").unwrap_err().to_string();
        assert!(
            error.contains("cannot read registry credentials for ghcr.io"),
            "{error}"
        );
    }
}
