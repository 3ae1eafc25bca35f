//! Reading what the user points at: components, objects and configuration in YAML or JSON, sizes.

use super::{Evaluate, GrantArgs, Problem};
use preflight_engine::{
    Check, Engine, EngineConfig, Grants, HttpGrant, HttpPolicy, Limits, Request, Target,
};
use preflight_operator::HttpSettings;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Reads a file, naming it in the error.
pub fn read(path: &Path) -> Result<Vec<u8>, Problem> {
    std::fs::read(path)
        .map_err(|error| Problem::Input(format!("cannot read {}: {error}", path.display())))
}

/// Writes a file, naming it in the error.
pub fn write(path: &Path, bytes: &[u8]) -> Result<(), Problem> {
    std::fs::write(path, bytes)
        .map_err(|error| Problem::Input(format!("cannot write {}: {error}", path.display())))
}

/// Parses one YAML or JSON document into JSON.
pub fn parse_document(path: &Path) -> Result<serde_json::Value, Problem> {
    let bytes = read(path)?;
    let text = String::from_utf8(bytes)
        .map_err(|_| Problem::Input(format!("{} is not UTF-8 text", path.display())))?;
    // JSON first when it looks like JSON, then YAML (a one-line flow mapping `{apiVersion: v1, ...}` starts
    // with `{` too, and is YAML).
    let parsed = serde_json::from_str(&text)
        .ok()
        .filter(|_| text.trim_start().starts_with('{'))
        .map_or_else(
            || serde_norway::from_str(&text).map_err(|error| error.to_string()),
            Ok,
        );
    parsed.map_err(|error| {
        Problem::Input(format!(
            "{} is not a single YAML or JSON document: {error}",
            path.display()
        ))
    })
}

/// Everything `run` and `bench` need: an engine sized for the limits, the check's bytes and what to ask it.
pub struct Prepared {
    pub engine: Engine,
    pub bytes: Vec<u8>,
    object: serde_json::Value,
    config: serde_json::Value,
    now: std::time::SystemTime,
    whole_object: bool,
    pub limits: Limits,
    /// Outbound HTTP when `--allow-http` or `--http-grant` was given; never lookups (there is no cluster).
    pub grants: Grants,
}

impl Evaluate {
    /// Reads the inputs besides the check's `bytes` (a file or a registry's: [`super::oci::read_check`]) and
    /// starts an engine whose memory ceiling admits the requested limit.
    pub fn prepare(
        &self,
        max_concurrent_evaluations: u32,
        bytes: Vec<u8>,
    ) -> Result<Prepared, Problem> {
        let object = parse_document(&self.object)?;
        if !object.is_object() {
            return Err(Problem::Input(format!(
                "{} must hold one Kubernetes object (a mapping)",
                self.object.display()
            )));
        }
        let config = match &self.config {
            Some(path) => parse_document(path)?,
            None => serde_json::json!({}),
        };
        let limits = Limits {
            timeout: self.timeout,
            memory_bytes: self.memory_limit,
            max_result_bytes: self.max_result,
            ..Limits::default()
        };
        let engine = engine(max_concurrent_evaluations, self.memory_limit)?;
        let grants = self.grant.grants()?;
        Ok(Prepared {
            engine,
            bytes,
            object,
            config,
            now: self.now.unwrap_or_else(std::time::SystemTime::now),
            whole_object: self.whole_object,
            limits,
            grants,
        })
    }
}

impl GrantArgs {
    /// The grants these arguments give: the `http` key's file with its Secret, or the allow-list patterns,
    /// or nothing.
    pub fn grants(&self) -> Result<Grants, Problem> {
        let http = match &self.http_grant {
            Some(path) => {
                let text = String::from_utf8(read(path)?)
                    .map_err(|_| Problem::Input(format!("{} is not UTF-8 text", path.display())))?;
                let settings = HttpSettings::parse(&text)
                    .map_err(|problem| Problem::Input(format!("{}: {problem}", path.display())))?;
                let secret = match &self.secret {
                    Some(path) => {
                        let secret: k8s_openapi::api::core::v1::Secret =
                            serde_json::from_value(parse_document(path)?).map_err(|error| {
                                Problem::Input(format!(
                                    "{} is not a Secret: {error}",
                                    path.display()
                                ))
                            })?;
                        Some((path.display().to_string(), secret))
                    }
                    None => None,
                };
                let grant = settings
                    .grant_with(
                        secret
                            .as_ref()
                            .map(|(from, secret)| (from.as_str(), secret)),
                    )
                    .map_err(|problem| Problem::Input(format!("{}: {problem}", path.display())))?;
                Some(grant)
            }
            None if !self.allow_http.is_empty() => {
                let mut policy = HttpPolicy::allowing(self.allow_http.clone());
                policy.request_timeout = self.http_timeout;
                let grant =
                    HttpGrant::new(policy).map_err(|error| Problem::Input(error.to_string()))?;
                Some(Arc::new(grant))
            }
            None => None,
        };
        Ok(Grants {
            http,
            ..Grants::default()
        })
    }
}

impl Prepared {
    /// The request `check` receives, as the operator would send it (or with the whole object when asked).
    pub fn request(&self, check: &Check) -> Request {
        let sent = if self.whole_object {
            self.object.to_string()
        } else {
            check.input(&self.object)
        };
        request(sent, &self.object, &self.config, self.now)
    }
}

/// The request about `object` (a Kubernetes object as JSON) that sends `sent` (all of it, or the parts a
/// check declared it reads: [`Check::input`]) with `config` at `now`.
pub fn request(
    sent: String,
    object: &serde_json::Value,
    config: &serde_json::Value,
    now: std::time::SystemTime,
) -> Request {
    Request {
        object: sent,
        config: config.to_string(),
        target: Target::of_object(object),
        now,
    }
}

/// An engine for `max_concurrent_evaluations` whose memory ceiling admits `memory_limit`.
/// Loads `bytes` as a check in a one-slot engine: refuses, with the engine's message, what this host
/// cannot run.
pub fn load_check(bytes: &[u8]) -> Result<std::sync::Arc<preflight_engine::Check>, Problem> {
    engine(1, 0)?.load(bytes).map_err(Problem::Unusable)
}

/// What the check's `validate-config` says of `config` (JSON), as the operator asks it when it loads a
/// ConfigMap: `None` when the check accepts it (or has no such export), else why it refuses it, which the
/// operator would report as `CheckRejected` without ever evaluating the check.
pub async fn refused_config(
    engine: &Engine,
    check: &Check,
    config: &str,
    limits: &Limits,
) -> Option<String> {
    engine
        .validate_config(check, config, limits)
        .await
        .err()
        .map(|failure| failure.message)
}

/// The variable naming a directory where compiled checks are kept between runs: the operator's
/// `--cache-dir` variable, so that one setting serves every command.
pub const COMPILED_CACHE_VARIABLE: &str = "PREFLIGHT_CACHE_DIR";

/// An engine for a command: `max_concurrent_evaluations` slots, a memory ceiling that admits
/// `memory_limit`, and compiled checks kept in [`compiled_cache_dir`] (a 15 MB Python or JavaScript check
/// then compiles once, not on every run, and a changed one in a third to a half of the time).
pub fn engine(max_concurrent_evaluations: u32, memory_limit: usize) -> Result<Engine, Problem> {
    let defaults = EngineConfig::default();
    Engine::new(EngineConfig {
        max_concurrent_evaluations,
        max_memory_bytes: defaults.max_memory_bytes.max(memory_limit),
        cache_dir: compiled_cache_dir(std::env::var_os(COMPILED_CACHE_VARIABLE)),
        ..defaults
    })
    .map_err(Problem::Engine)
}

/// Where commands keep compiled checks: `$PREFLIGHT_CACHE_DIR` (given as `variable`) when set, none when it
/// is set empty, else the user's cache directory, as wasmtime's own CLI caches by default.
fn compiled_cache_dir(variable: Option<OsString>) -> Option<PathBuf> {
    match variable {
        Some(dir) if dir.is_empty() => None,
        Some(dir) => Some(PathBuf::from(dir)),
        None => user_cache_dir("compiled"),
    }
}

/// `part` of this user's preflight cache: under `$XDG_CACHE_HOME/preflight`, else `~/.cache/preflight`;
/// none without either.
pub fn user_cache_dir(part: &str) -> Option<PathBuf> {
    std::env::var_os("XDG_CACHE_HOME")
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
        .map(|dir| dir.join("preflight").join(part))
}
