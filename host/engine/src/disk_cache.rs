//! Precompiled checks on local disk, keyed by the component's digest and the engine's compatibility hash,
//! so that a restart (or a second replica on the node) deserialises in microseconds instead of compiling.

use crate::digest::Digest;
use crate::error::Error;
use sha2::{Digest as _, Sha256};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use wasmtime::component::Component;

/// A directory of `<digest>-<engine hash>.cwasm` files written by this process or an identical engine.
pub(crate) struct DiskCache {
    dir: PathBuf,
    engine_hash: String,
}

impl DiskCache {
    pub fn open(dir: &Path, engine: &wasmtime::Engine) -> Result<Self, Error> {
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
            Ok(component) => Some(component),
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "ignoring an unusable precompiled check");
                None
            }
        }
    }

    /// Writes the compiled form of `digest`, atomically (temporary file + rename). Failures are logged, not
    /// fatal: the cache only saves time.
    pub fn store(&self, digest: Digest, component: &Component) {
        let path = self.path(digest);
        let temporary = path.with_extension(format!("tmp{}", std::process::id()));
        let written = component
            .serialize()
            .map_err(|error| error.to_string())
            .and_then(|bytes| std::fs::write(&temporary, bytes).map_err(|error| error.to_string()))
            .and_then(|()| std::fs::rename(&temporary, &path).map_err(|error| error.to_string()));
        if let Err(error) = written {
            let _ = std::fs::remove_file(&temporary);
            tracing::warn!(path = %path.display(), %error, "could not cache a compiled check");
        }
    }

    fn path(&self, digest: Digest) -> PathBuf {
        self.dir
            .join(format!("{digest}-{}.cwasm", self.engine_hash))
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
