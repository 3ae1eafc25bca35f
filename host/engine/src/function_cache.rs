//! Compiled functions shared between checks, on local disk: the store behind wasmtime's incremental
//! compilation cache.
//!
//! Checks built by one toolchain share most of their code: every Python check carries the same CPython,
//! every JavaScript check the same StarlingMonkey, and only a small part (and the memory image) is the
//! author's. Cranelift can reuse the machine code of a function it compiled before, keyed by a SHA-256 of the
//! function's body and the compiler's settings. With this store a second Python check, or the next version
//! of one, compiles in a third to a half of the time (docs/performance.md).
//!
//! The store is one append-only file, `functions.pack`, beside the precompiled checks. Several processes may
//! share it (the CLI's runs, the tests): each appends whole records under an exclusive file lock, and reads
//! what it finds at its first compile plus what it appends itself. Each record carries a checksum of its key
//! and value, verified when read, so a damaged or overwritten record is a miss, never code. The file is
//! bounded: nothing is appended beyond `max_bytes`, and the next process to open it nearly full starts it
//! anew.

use sha2::{Digest as _, Sha256};
use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// Name of the store's file in the cache directory.
pub(crate) const PACK_FILE: &str = "functions.pack";

/// First bytes of the file: its format. A file without them (another format) is started anew.
const MAGIC: &[u8; 8] = b"pffn\x00\x00\x00\x01";

/// Bytes before a record's key: key length, value length (little-endian u32 each) and checksum.
const RECORD_HEADER: usize = 4 + 4 + CHECKSUM;

/// Bytes of the SHA-256 of key and value kept per record.
const CHECKSUM: usize = 8;

/// The longest key a record may have (Cranelift's keys are SHA-256 digests, 32 bytes): a longer one read
/// from the file means the record is damaged.
const MAX_KEY: u32 = 256;

/// Where a record's value lies in the file.
#[derive(Clone, Copy)]
struct Location {
    offset: u64,
    len: u32,
}

/// The open file and what it holds.
struct Pack {
    file: File,
    index: Mutex<HashMap<Vec<u8>, Location>>,
    /// Serialises this process's appends (the file lock serialises processes, not threads sharing a file).
    appending: Mutex<()>,
}

/// wasmtime's [`CacheStore`](wasmtime::CacheStore) over `functions.pack` in a directory, opened at the first
/// compile (a process that compiles nothing never reads it).
pub(crate) struct FunctionCache {
    path: PathBuf,
    max_bytes: u64,
    pack: OnceLock<Option<Pack>>,
}

impl std::fmt::Debug for FunctionCache {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("FunctionCache")
            .field("path", &self.path)
            .field("max_bytes", &self.max_bytes)
            .finish_non_exhaustive()
    }
}

impl FunctionCache {
    /// A store in `dir` of at most `max_bytes`.
    pub fn new(dir: &Path, max_bytes: u64) -> Self {
        Self {
            path: dir.join(PACK_FILE),
            max_bytes,
            pack: OnceLock::new(),
        }
    }

    /// The open pack, or `None` when it cannot be opened (the reason is logged once: compiling goes on
    /// without reuse).
    fn pack(&self) -> Option<&Pack> {
        self.pack
            .get_or_init(|| match Pack::open(&self.path, self.max_bytes) {
                Ok(pack) => Some(pack),
                Err(error) => {
                    tracing::warn!(path = %self.path.display(), %error,
                        "compiled functions are not reused: their cache file cannot be opened");
                    None
                }
            })
            .as_ref()
    }
}

impl wasmtime::CacheStore for FunctionCache {
    fn get(&self, key: &[u8]) -> Option<Cow<'_, [u8]>> {
        self.pack()?.read(key).map(Cow::Owned)
    }

    fn insert(&self, key: &[u8], value: Vec<u8>) -> bool {
        let Some(pack) = self.pack() else {
            return false;
        };
        match pack.append(key, &value, self.max_bytes) {
            Ok(appended) => appended,
            Err(error) => {
                tracing::debug!(path = %self.path.display(), %error, "could not keep a compiled function");
                false
            }
        }
    }
}

impl Pack {
    /// Opens (or creates) the file and indexes its records, starting it anew when it has another format or
    /// is full.
    fn open(path: &Path, max_bytes: u64) -> std::io::Result<Self> {
        let file = File::options()
            .read(true)
            .append(true)
            .create(true)
            .open(path)?;
        file.lock()?;
        let indexed = index(&file, max_bytes);
        file.unlock()?;
        Ok(Self {
            file,
            index: Mutex::new(indexed?),
            appending: Mutex::new(()),
        })
    }

    /// The value stored under `key`, if its record is intact.
    fn read(&self, key: &[u8]) -> Option<Vec<u8>> {
        let location = *self.index().get(key)?;
        let start = location.offset - (RECORD_HEADER + key.len()) as u64;
        let mut record = vec![0; RECORD_HEADER + key.len() + location.len as usize];
        self.file.read_exact_at(&mut record, start).ok()?;
        let (header, body) = record.split_at(RECORD_HEADER);
        let (stored_key, value) = body.split_at(key.len());
        (stored_key == key && header[8..] == checksum(key, value)).then(|| value.to_vec())
    }

    /// Appends a record for `key`, unless the file has reached `max_bytes`. Returns whether it was kept.
    fn append(&self, key: &[u8], value: &[u8], max_bytes: u64) -> std::io::Result<bool> {
        let (Ok(key_len), Ok(value_len)) = (u32::try_from(key.len()), u32::try_from(value.len()))
        else {
            return Ok(false);
        };
        let mut record = Vec::with_capacity(RECORD_HEADER + key.len() + value.len());
        record.extend_from_slice(&key_len.to_le_bytes());
        record.extend_from_slice(&value_len.to_le_bytes());
        record.extend_from_slice(&checksum(key, value));
        record.extend_from_slice(key);
        record.extend_from_slice(value);
        let _appending = self
            .appending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.file.lock()?;
        let written = (|| -> std::io::Result<Option<u64>> {
            let end = (&self.file).seek(SeekFrom::End(0))?;
            if end + record.len() as u64 > max_bytes {
                return Ok(None);
            }
            (&self.file).write_all(&record)?;
            Ok(Some(end))
        })();
        self.file.unlock()?;
        let Some(start) = written? else {
            return Ok(false);
        };
        self.index().insert(
            key.to_vec(),
            Location {
                offset: start + (RECORD_HEADER + key.len()) as u64,
                len: value_len,
            },
        );
        Ok(true)
    }

    fn index(&self) -> std::sync::MutexGuard<'_, HashMap<Vec<u8>, Location>> {
        // The map is only ever inserted into whole: a panicking thread cannot leave it half-changed.
        self.index
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Reads the records of `file` (locked by the caller) into an index. A damaged record (a process that died
/// while appending, a full disk) and what follows it are cut off, so that later appends are found again. A
/// file of another format, or one nearly full (seven eighths of `max_bytes`: appends stop short of it), is
/// emptied and given this format's header.
fn index(file: &File, max_bytes: u64) -> std::io::Result<HashMap<Vec<u8>, Location>> {
    let len = file.metadata()?.len();
    let mut reader = BufReader::with_capacity(1 << 16, file);
    reader.seek(SeekFrom::Start(0))?;
    let mut magic = [0; MAGIC.len()];
    let readable = reader.read_exact(&mut magic).is_ok() && &magic == MAGIC;
    if !readable || len > max_bytes / 8 * 7 {
        file.set_len(0)?;
        (&*file).write_all(MAGIC)?;
        return Ok(HashMap::new());
    }
    let mut index = HashMap::new();
    let mut offset = MAGIC.len() as u64;
    let mut header = [0; RECORD_HEADER];
    while reader.read_exact(&mut header).is_ok() {
        let key_len = u32::from_le_bytes(header[..4].try_into().expect("four bytes"));
        let value_len = u32::from_le_bytes(header[4..8].try_into().expect("four bytes"));
        let value_offset = offset + RECORD_HEADER as u64 + u64::from(key_len);
        let end = value_offset + u64::from(value_len);
        if key_len > MAX_KEY || end > len {
            break;
        }
        let mut key = vec![0; key_len as usize];
        if reader.read_exact(&mut key).is_err()
            || reader.seek_relative(i64::from(value_len)).is_err()
        {
            break;
        }
        index.insert(
            key,
            Location {
                offset: value_offset,
                len: value_len,
            },
        );
        offset = end;
    }
    if offset < len {
        file.set_len(offset)?;
    }
    Ok(index)
}

/// The first bytes of the SHA-256 of `key` and `value`.
fn checksum(key: &[u8], value: &[u8]) -> [u8; CHECKSUM] {
    let mut hasher = Sha256::new();
    hasher.update(key);
    hasher.update(value);
    hasher.finalize()[..CHECKSUM]
        .try_into()
        .expect("a SHA-256 digest is longer than the checksum")
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::CacheStore as _;

    /// A fresh directory for one test.
    fn dir(test: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("preflight-functions-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// A budget no test reaches.
    const ROOMY: u64 = 1 << 20;

    /// What the next process to open the store in `dir` finds under `key`.
    fn found_by_next(dir: &Path, max_bytes: u64, key: &[u8]) -> Option<Vec<u8>> {
        FunctionCache::new(dir, max_bytes)
            .get(key)
            .map(Cow::into_owned)
    }

    fn pack_len(dir: &Path) -> u64 {
        std::fs::metadata(dir.join(PACK_FILE)).unwrap().len()
    }

    #[test]
    fn what_one_process_keeps_the_next_finds() {
        let dir = dir("shared");
        let first = FunctionCache::new(&dir, ROOMY);
        assert!(first.get(b"key-1").is_none());
        assert!(first.insert(b"key-1", b"code one".to_vec()));
        assert!(first.insert(b"key-2", b"code two".to_vec()));
        assert_eq!(first.get(b"key-1").as_deref(), Some(&b"code one"[..]));

        let second = FunctionCache::new(&dir, ROOMY);
        assert_eq!(second.get(b"key-2").as_deref(), Some(&b"code two"[..]));
        assert!(second.insert(b"key-3", b"code three".to_vec()));
        assert_eq!(
            first.get(b"key-3"),
            None,
            "an open store sees its own appends, not later ones of others"
        );
        assert_eq!(
            found_by_next(&dir, ROOMY, b"key-3").as_deref(),
            Some(&b"code three"[..])
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_damaged_record_is_a_miss_never_code() {
        let dir = dir("damaged");
        let cache = FunctionCache::new(&dir, ROOMY);
        assert!(cache.insert(b"key-1", b"code one".to_vec()));
        assert!(cache.insert(b"key-2", b"code two".to_vec()));
        let mut bytes = std::fs::read(dir.join(PACK_FILE)).unwrap();
        let value = bytes.windows(8).position(|w| w == b"code one").unwrap();
        bytes[value] ^= 1;
        // Another record's value under this key would deserialise as code: the checksum covers the key.
        let other = bytes.windows(5).position(|w| w == b"key-2").unwrap();
        bytes[other + 4] = b'3';
        std::fs::write(dir.join(PACK_FILE), &bytes).unwrap();

        let reader = FunctionCache::new(&dir, ROOMY);
        assert_eq!(reader.get(b"key-1"), None, "a changed value");
        assert_eq!(reader.get(b"key-3"), None, "a record under another key");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_torn_tail_is_cut_off_so_later_appends_are_found() {
        let dir = dir("torn");
        let cache = FunctionCache::new(&dir, ROOMY);
        assert!(cache.insert(b"key-1", b"code one".to_vec()));
        let whole = pack_len(&dir);
        // A process that died in the middle of an append.
        let mut file = File::options()
            .append(true)
            .open(dir.join(PACK_FILE))
            .unwrap();
        file.write_all(&[5, 0, 0, 0, 200, 0]).unwrap();

        let next = FunctionCache::new(&dir, ROOMY);
        assert_eq!(next.get(b"key-1").as_deref(), Some(&b"code one"[..]));
        assert_eq!(pack_len(&dir), whole, "the torn record is cut off");
        assert!(next.insert(b"key-2", b"code two".to_vec()));
        assert_eq!(
            found_by_next(&dir, ROOMY, b"key-2").as_deref(),
            Some(&b"code two"[..])
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_foreign_file_and_a_full_one_are_started_anew() {
        let dir = dir("anew");
        std::fs::write(dir.join(PACK_FILE), b"written by something else").unwrap();
        let cache = FunctionCache::new(&dir, 100);
        assert!(cache.insert(b"key-1", vec![1; 60]));
        assert!(!cache.insert(b"key-2", vec![2; 40]), "beyond the budget");
        assert_eq!(cache.get(b"key-2"), None);
        assert!(pack_len(&dir) <= 100);

        let next = FunctionCache::new(&dir, 100);
        assert_eq!(next.get(b"key-1"), None, "a full file is started anew");
        assert!(next.insert(b"key-2", vec![2; 40]));
        assert_eq!(next.get(b"key-2").as_deref(), Some(&[2; 40][..]));
        assert_eq!(
            found_by_next(&dir, 100, b"key-2").as_deref(),
            Some(&[2; 40][..]),
            "one not nearly full is kept"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_unwritable_directory_compiles_without_reuse() {
        let cache = FunctionCache::new(Path::new("/proc/preflight-cannot-be-here"), 1 << 20);
        assert!(!cache.insert(b"key-1", b"code one".to_vec()));
        assert_eq!(cache.get(b"key-1"), None);
    }
}
