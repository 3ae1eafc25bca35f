//! Reading what the user points at: components, objects and configuration in YAML or JSON, sizes.

use super::{Evaluate, Problem};
use preflight_engine::{
    Check, Engine, EngineConfig, Grants, HttpGrant, HttpPolicy, Limits, Request, Target,
};
use std::path::Path;
use std::sync::Arc;

/// Reads a file, naming it in the error.
pub fn read(path: &Path) -> Result<Vec<u8>, Problem> {
    std::fs::read(path)
        .map_err(|error| Problem::Input(format!("cannot read {}: {error}", path.display())))
}

/// Parses one YAML or JSON document into JSON.
pub fn parse_document(path: &Path) -> Result<serde_json::Value, Problem> {
    let bytes = read(path)?;
    let text = String::from_utf8(bytes)
        .map_err(|_| Problem::Input(format!("{} is not UTF-8 text", path.display())))?;
    let parsed = if text.trim_start().starts_with('{') {
        serde_json::from_str(&text).map_err(|error| error.to_string())
    } else {
        serde_norway::from_str(&text).map_err(|error| error.to_string())
    };
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
    /// Outbound HTTP when `--allow-http` was given; never lookups (there is no cluster).
    pub grants: Grants,
}

impl Evaluate {
    /// Reads the inputs and starts an engine whose memory ceiling admits the requested limit.
    pub fn prepare(&self, max_concurrent_evaluations: u32) -> Result<Prepared, Problem> {
        let bytes = read(&self.check)?;
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
        let mut grants = Grants::default();
        if !self.allow_http.is_empty() {
            let mut policy = HttpPolicy::allowing(self.allow_http.clone());
            policy.request_timeout = self.http_timeout;
            let grant =
                HttpGrant::new(policy).map_err(|error| Problem::Input(error.to_string()))?;
            grants.http = Some(Arc::new(grant));
        }
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

/// The variable naming a directory where compiled checks are kept between runs: the operator's
/// `--cache-dir` variable, so that one setting serves every command.
pub const COMPILED_CACHE_VARIABLE: &str = "PREFLIGHT_CACHE_DIR";

/// An engine for a command: `max_concurrent_evaluations` slots, a memory ceiling that admits
/// `memory_limit`, and compiled checks kept in `$PREFLIGHT_CACHE_DIR` when it is set (a 15 MB Python or
/// JavaScript check then compiles once, not on every run).
pub fn engine(max_concurrent_evaluations: u32, memory_limit: usize) -> Result<Engine, Problem> {
    let defaults = EngineConfig::default();
    Engine::new(EngineConfig {
        max_concurrent_evaluations,
        max_memory_bytes: defaults.max_memory_bytes.max(memory_limit),
        cache_dir: std::env::var_os(COMPILED_CACHE_VARIABLE).map(std::path::PathBuf::from),
        ..defaults
    })
    .map_err(Problem::Engine)
}
