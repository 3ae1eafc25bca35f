//! A real OCI registry for the tests: the CNCF distribution registry built from Go modules by
//! `tests/registry/build` (with oras beside it), on a loopback port, over plain HTTP or TLS with a private
//! CA made for the test, storing into a temporary directory, open to anyone or behind a login (htpasswd, the
//! registry's basic authentication). Stopped when dropped. [`CosignKeys`] signs with the real cosign CLI.

use crate::workspace_root;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// How the registry serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Plain HTTP (clients must be told: `--plain-http`).
    PlainHttp,
    /// TLS with a certificate for `localhost` and 127.0.0.1 from a private CA ([`TestRegistry::ca_pem`]).
    PrivateCa,
}

/// A running registry.
pub struct TestRegistry {
    child: Option<Child>,
    dir: PathBuf,
    port: u16,
    transport: Transport,
    ca_pem: String,
    binary: PathBuf,
    login: Option<(String, String)>,
}

/// The registry, oras and cosign binaries, built once per machine (the build script returns at once when
/// they exist).
pub fn registry_tools() -> RegistryTools {
    let output = Command::new(workspace_root().join("tests/registry/build"))
        .stderr(Stdio::inherit())
        .output()
        .expect("tests/registry/build runs");
    assert!(output.status.success(), "tests/registry/build failed");
    let text = String::from_utf8(output.stdout).expect("paths are UTF-8");
    let mut lines = text.lines().map(PathBuf::from);
    match (lines.next(), lines.next(), lines.next()) {
        (Some(registry), Some(oras), Some(cosign)) => RegistryTools {
            registry,
            oras,
            cosign,
        },
        _ => panic!("tests/registry/build printed {text:?}"),
    }
}

/// The binaries `tests/registry/build` makes.
pub struct RegistryTools {
    /// The CNCF distribution registry.
    pub registry: PathBuf,
    /// The oras CLI (for interoperability tests).
    pub oras: PathBuf,
    /// The cosign CLI (for signatures).
    pub cosign: PathBuf,
}

/// The oras CLI (for interoperability tests).
pub fn oras() -> PathBuf {
    registry_tools().oras
}

impl TestRegistry {
    /// Starts a registry with `transport`, and waits until it answers.
    pub fn start(transport: Transport) -> Self {
        Self::start_with(transport, None)
    }

    /// Starts a registry with `transport` that answers only to `username` with `password` (basic
    /// authentication from an htpasswd file, the registry's own), and waits until it answers.
    pub fn start_with_login(transport: Transport, username: &str, password: &str) -> Self {
        Self::start_with(transport, Some((username.to_owned(), password.to_owned())))
    }

    fn start_with(transport: Transport, login: Option<(String, String)>) -> Self {
        static STARTED: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "preflight-registry-{}-{}",
            std::process::id(),
            STARTED.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(dir.join("storage")).expect("registry directory");
        let ca_pem = match transport {
            Transport::PlainHttp => String::new(),
            Transport::PrivateCa => write_certificates(&dir),
        };
        let mut registry = Self {
            child: None,
            dir,
            port: free_port(),
            transport,
            ca_pem,
            binary: registry_tools().registry,
            login,
        };
        registry.resume();
        registry
    }

    /// `127.0.0.1:PORT`: the registry part of references.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// A docker `config.json` holding this registry's login (what `docker login` writes; the
    /// `.dockerconfigjson` of a pull secret); no credentials when the registry needs none.
    pub fn docker_config_json(&self) -> String {
        use base64::Engine;
        let auths = match &self.login {
            None => serde_json::json!({}),
            Some((username, password)) => {
                let auth = base64::engine::general_purpose::STANDARD
                    .encode(format!("{username}:{password}"));
                serde_json::json!({ self.host(): { "auth": auth } })
            }
        };
        serde_json::json!({ "auths": auths }).to_string()
    }

    /// The private CA's PEM (empty over plain HTTP).
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The CA file (for `oras --ca-file`).
    pub fn ca_file(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// Stops the registry (its storage is kept, [`TestRegistry::resume`] serves it again on the same port).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the registry again after [`TestRegistry::stop`] and waits until it answers.
    pub fn resume(&mut self) {
        let tls = match self.transport {
            Transport::PlainHttp => String::new(),
            Transport::PrivateCa => format!(
                "  tls:\n    certificate: {}\n    key: {}\n",
                self.dir.join("server.pem").display(),
                self.dir.join("server.key").display()
            ),
        };
        let auth = match &self.login {
            None => String::new(),
            Some((username, password)) => {
                let hash = bcrypt::hash(password, 4).expect("bcrypt hash");
                let htpasswd = self.dir.join("htpasswd");
                std::fs::write(&htpasswd, format!("{username}:{hash}\n")).expect("htpasswd");
                format!(
                    "auth:\n  htpasswd:\n    realm: preflight-tests\n    path: {}\n",
                    htpasswd.display()
                )
            }
        };
        let config = format!(
            "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {}\n{tls}{auth}",
            self.dir.join("storage").display(),
            self.host()
        );
        let config_path = self.dir.join("config.yml");
        std::fs::write(&config_path, config).expect("registry config");
        let log = std::fs::File::create(self.dir.join("registry.log")).expect("registry log");
        let child = Command::new(&self.binary)
            .arg("serve")
            .arg(&config_path)
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("the registry starts");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(self.host()).is_err() {
            assert!(
                Instant::now() < deadline,
                "the registry did not listen on {} within 30 s: {}",
                self.host(),
                std::fs::read_to_string(self.dir.join("registry.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Runs oras against this registry: `oras ARGS… --plain-http|--ca-file CA`, in `dir`. Returns stdout;
    /// panics with stderr when oras fails.
    pub fn oras(&self, dir: &Path, args: &[&str]) -> String {
        let mut command = Command::new(oras());
        command.current_dir(dir).args(args);
        match self.transport {
            Transport::PlainHttp => command.arg("--plain-http"),
            Transport::PrivateCa => command.arg("--ca-file").arg(self.ca_file()),
        };
        let output = command.env("HOME", &self.dir).output().expect("oras runs");
        assert!(
            output.status.success(),
            "oras {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).expect("oras prints UTF-8")
    }
}

impl TestRegistry {
    /// Signs the image `reference` (`HOST/REPO@sha256:…`, in this registry) with cosign and `keys`,
    /// storing the signature beside it as cosign does for every image (no transparency log: offline).
    pub fn cosign_sign(&self, keys: &CosignKeys, reference: &str) {
        let mut insecure = vec!["--allow-insecure-registry"];
        if self.transport == Transport::PlainHttp {
            insecure.push("--allow-http-registry");
        }
        let key = keys.private_key_file();
        let mut arguments = vec!["sign", "--key", key.to_str().expect("UTF-8 path")];
        arguments.extend(["--tlog-upload=false", "--yes"]);
        arguments.extend(insecure);
        arguments.push(reference);
        keys.cosign(&self.dir, &arguments);
    }

    /// Copies the cosign signatures of the manifest `from` (`sha256:…`) in `repository` (`HOST/REPO`) to
    /// the signature tag of `to`, with oras: what someone with push rights does to make other bytes look
    /// signed. The signatures still verify with their key, but name the digest they were made for.
    pub fn copy_cosign_signature(&self, repository: &str, from: &str, to: &str) {
        let work = self.dir.join("signature-copy");
        std::fs::create_dir_all(&work).expect("work directory");
        let tag = |digest: &str| format!("{repository}:{}.sig", digest.replacen(':', "-", 1));
        let manifest = self.oras(&work, &["manifest", "fetch", &tag(from)]);
        std::fs::write(work.join("signature.json"), manifest).expect("signature manifest");
        self.oras(&work, &["manifest", "push", &tag(to), "signature.json"]);
    }
}

/// A cosign key pair, made by `cosign generate-key-pair` (empty password) in a directory of its own,
/// removed when dropped.
pub struct CosignKeys {
    dir: PathBuf,
}

impl CosignKeys {
    /// Generates a key pair.
    pub fn generate() -> Self {
        static MADE: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "preflight-cosign-{}-{}",
            std::process::id(),
            MADE.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("key directory");
        let keys = Self { dir };
        keys.cosign(&keys.dir, &["generate-key-pair"]);
        keys
    }

    /// `cosign.pub`: the PEM public key.
    pub fn public_key_file(&self) -> PathBuf {
        self.dir.join("cosign.pub")
    }

    /// The PEM public key.
    pub fn public_pem(&self) -> String {
        std::fs::read_to_string(self.public_key_file()).expect("cosign.pub")
    }

    /// `cosign.key`: the encrypted private key.
    pub fn private_key_file(&self) -> PathBuf {
        self.dir.join("cosign.key")
    }

    /// The base64 signature of the file `path`, as `cosign sign-blob` prints it (no transparency log).
    pub fn sign_blob(&self, path: &Path) -> String {
        let key = self.private_key_file();
        let output = self.cosign(
            &self.dir,
            &[
                "sign-blob",
                "--key",
                key.to_str().expect("UTF-8 path"),
                "--tlog-upload=false",
                "--yes",
                path.to_str().expect("UTF-8 path"),
            ],
        );
        output.trim().to_owned()
    }

    /// Runs cosign with `arguments` in `dir` (an empty key password, `HOME` there); returns stdout and
    /// panics with stderr when cosign fails.
    fn cosign(&self, dir: &Path, arguments: &[&str]) -> String {
        let output = Command::new(registry_tools().cosign)
            .current_dir(dir)
            .args(arguments)
            .env("COSIGN_PASSWORD", "")
            .env("HOME", dir)
            .stdin(Stdio::null())
            .output()
            .expect("cosign runs");
        assert!(
            output.status.success(),
            "cosign {arguments:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).expect("cosign prints UTF-8")
    }
}

impl Drop for CosignKeys {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Drop for TestRegistry {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A port free now on 127.0.0.1.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free loopback port")
}

/// Writes a private CA (`ca.pem`) and a server certificate for localhost and 127.0.0.1 signed by it
/// (`server.pem`, `server.key`) into `dir`; returns the CA's PEM.
fn write_certificates(dir: &Path) -> String {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().expect("CA key"))
        .expect("CA certificate");
    let server_key = KeyPair::generate().expect("server key");
    let server = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
        .expect("server parameters")
        .signed_by(&server_key, &ca)
        .expect("server certificate");
    std::fs::write(dir.join("ca.pem"), ca.pem()).expect("ca.pem");
    std::fs::write(dir.join("server.pem"), server.pem()).expect("server.pem");
    std::fs::write(dir.join("server.key"), server_key.serialize_pem()).expect("server.key");
    ca.pem()
}
