//! Precompiled checks on local disk, keyed by the component's digest and the engine's compatibility hash,
//! so that a restart (or a second replica on the node) deserialises in microseconds instead of compiling.
//!
//! The directory is bounded: every new version of a check adds a file (35 MiB for a Python check), and an
//! operator's cache is an emptyDir whose size limit gets the pod evicted. After each write the least
//! recently used files go until the rest fit the budget; a file's modification time is its last use (it is
//! touched when loaded), so the files of another engine version, never loaded here, go first. The compiled
//! functions checks share (function_cache.rs) live beside them under a budget of their own.

use crate::digest::Digest;
use crate::error::Error;
use sha2::{Digest as _, Sha256};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};
use wasmtime::component::Component;

/// File name extension of a compiled check.
const COMPILED_EXTENSION: &str = "cwasm";

/// Age past which a temporary file is a leftover of a process that died while writing it.
const LEFTOVER_AGE: Duration = Duration::from_secs(3600);

/// A directory of `<digest>-<engine hash>.cwasm` files written by this process or an identical engine, of
/// at most `max_bytes` in all.
pub(crate) struct DiskCache {
    dir: PathBuf,
    engine_hash: String,
    max_bytes: u64,
}

impl DiskCache {
    pub fn open(dir: &Path, engine: &wasmtime::Engine, max_bytes: u64) -> Result<Self, Error> {
        std::fs::create_dir_all(dir).map_err(|source| Error::Cache {
            path: dir.to_owned(),
            source,
        })?;
        let mut hasher = Sha256Hasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let engine_hash = hex::encode(&hasher.0.finalize()[..8]);
        Ok(Self {
            dir: dir.to_owned(),
            engine_hash,
            max_bytes,
        })
    }

    /// The cached compilation of `digest`, if present and loadable by this engine.
    ///
    /// The file is read into memory rather than mapped: a mapped file truncated by anyone else (a cleanup
    /// job, a full disk) would crash the process with SIGBUS.
    pub fn load(&self, engine: &wasmtime::Engine, digest: Digest) -> Option<Component> {
        let path = self.path(digest);
        let bytes = std::fs::read(&path).ok()?;
        // SAFETY: files in this directory are only ever written by `store` below, from `Component::serialize`
        // of an engine with the same compatibility hash (it is part of the file name). A damaged file fails
        // wasmtime's header checks and is recompiled and overwritten.
        match unsafe { Component::deserialize(engine, &bytes) } {
            Ok(component) => {
                touch(&path);
                Some(component)
            }
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "ignoring an unusable precompiled check");
                None
            }
        }
    }

    /// Writes the compiled form of `digest`, atomically (temporary file + rename), then evicts the least
    /// recently used files beyond the budget. Failures are logged, not fatal: the cache only saves time.
    pub fn store(&self, digest: Digest, component: &Component) {
        let path = self.path(digest);
        let temporary = path.with_extension(format!("tmp{}", std::process::id()));
        let written = component
            .serialize()
            .map_err(|error| error.to_string())
            .and_then(|bytes| {
                if bytes.len() as u64 > self.max_bytes {
                    return Err(format!(
                        "its {} bytes exceed the cache's budget of {}",
                        bytes.len(),
                        self.max_bytes
                    ));
                }
                std::fs::write(&temporary, bytes).map_err(|error| error.to_string())
            })
            .and_then(|()| std::fs::rename(&temporary, &path).map_err(|error| error.to_string()));
        match written {
            Ok(()) => self.evict_beyond_budget(&path),
            Err(error) => {
                let _ = std::fs::remove_file(&temporary);
                tracing::warn!(path = %path.display(), %error, "could not cache a compiled check");
            }
        }
    }

    /// Removes the least recently used compiled checks (any engine's) until the rest, `kept` among them,
    /// fit the budget, and temporary files left by processes that died while writing.
    fn evict_beyond_budget(&self, kept: &Path) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let now = SystemTime::now();
        let mut compiled = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(metadata) = entry.metadata() else {
                continue;
            };
            let modified = metadata.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            let extension = path.extension().and_then(|extension| extension.to_str());
            match extension {
                Some(COMPILED_EXTENSION) => compiled.push((modified, metadata.len(), path)),
                Some(extension) if extension.starts_with("tmp") => {
                    let age = now.duration_since(modified).unwrap_or_default();
                    if age > LEFTOVER_AGE {
                        let _ = std::fs::remove_file(&path);
                    }
                }
                _ => {}
            }
        }
        let mut total: u64 = compiled.iter().map(|(_, bytes, _)| bytes).sum();
        compiled.sort();
        let (mut evicted, mut freed) = (0, 0);
        for (_, bytes, path) in compiled {
            if total <= self.max_bytes {
                break;
            }
            if path != kept && std::fs::remove_file(&path).is_ok() {
                total -= bytes;
                evicted += 1;
                freed += bytes;
            }
        }
        if evicted > 0 {
            tracing::info!(
                dir = %self.dir.display(),
                evicted,
                freed_bytes = freed,
                max_bytes = self.max_bytes,
                "evicted the least recently used compiled checks"
            );
        }
    }

    fn path(&self, digest: Digest) -> PathBuf {
        self.dir.join(format!(
            "{digest}-{}.{COMPILED_EXTENSION}",
            self.engine_hash
        ))
    }
}

/// Marks `path` used now (its modification time), for the eviction order. Best effort: a file that cannot
/// be touched is only evicted sooner.
fn touch(path: &Path) {
    if let Ok(file) = std::fs::File::options().write(true).open(path) {
        let _ = file.set_modified(SystemTime::now());
    }
}

/// Feeds `Hash` input into SHA-256, for a hash that is stable across processes.
struct Sha256Hasher(Sha256);

impl Hasher for Sha256Hasher {
    fn finish(&self) -> u64 {
        let digest = self.0.clone().finalize();
        u64::from_le_bytes(
            digest[..8]
                .try_into()
                .expect("a SHA-256 digest has 32 bytes"),
        )
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}
