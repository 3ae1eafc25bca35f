//! A check that misbehaves on purpose, as its configuration's `mode` says. The host must contain each.

use preflight_guest::{Outcome, Request};
use serde::Deserialize;
use std::hint::black_box;
use std::time::{Duration, SystemTime};

/// Which misbehaviour to perform.
#[derive(Deserialize, Default)]
#[serde(default)]
pub struct Config {
    /// `loop`, `sleep`, `memory`, `recursion`, `huge-result`, `panic`, `plain-panic`, `log-flood`, `exit`,
    /// `no-reason`, `bad-reason`, `clock`, `dirty`, `scan`, `dirty-then-scan`, `fetch`, `lookup`; anything
    /// else proceeds.
    mode: String,
    /// `fetch`: the URLs to GET, in order; the message lists each answer (`200 <body>`) or error, then
    /// the lookup's answer when `lookup` is given.
    urls: Vec<String>,
    /// `fetch`: request headers to send with each URL, as `[name, value]` pairs.
    headers: Vec<[String; 2]>,
    /// `lookup` (and `fetch`): `apiVersion`, `kind`, namespace (empty: the object's) and name to get.
    lookup: Vec<String>,
    /// Size of the message of `huge-result`, in bytes (10 MiB when absent).
    bytes: Option<usize>,
    /// Any mode: the configuration's validation computes without end while the clock reads earlier than
    /// this (seconds since the epoch), as a validation starved of CPU would run out of time, then accepts.
    validates_after: Option<u64>,
}

/// Validates a configuration: see [`Config::validates_after`]. The host stops the wall clock at the start
/// of a validation, so the loop ends only when the host cuts it off.
pub fn validate(config: &Config) -> Result<(), String> {
    if let Some(after) = config.validates_after {
        while seconds_since_epoch() < after {
            black_box(config);
        }
    }
    Ok(())
}

/// What the guest's wall clock says, in whole seconds since the epoch.
fn seconds_since_epoch() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

/// Gets the object `[apiVersion, kind, namespace, name]` names.
fn look_up(lookup: &[String]) -> Result<Option<serde_json::Value>, String> {
    let [api_version, kind, namespace, name] = lookup else {
        return Err("lookup needs apiVersion, kind, namespace, name".to_owned());
    };
    let namespace = (!namespace.is_empty()).then_some(namespace.as_str());
    preflight_guest::cluster::get(api_version, kind, namespace, name)
        .map_err(|error| error.to_string())
}

/// The check.
pub fn check(request: Request<serde_json::Value, Config>) -> Outcome {
    match request.config.mode.as_str() {
        "loop" => loop {
            black_box(&request);
        },
        "memory" => {
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            loop {
                hoard.push(vec![1; 1 << 20]);
                black_box(&hoard);
            }
        }
        "recursion" => Outcome::proceed().because("Depth", format!("{}", recurse(black_box(1)))),
        // Blocks in a host call (a WASI clock poll): no wasm runs, so no epoch fires.
        "sleep" => {
            std::thread::sleep(Duration::from_secs(3600));
            Outcome::proceed()
        }
        "huge-result" => {
            Outcome::block().because("Huge", "x".repeat(request.config.bytes.unwrap_or(10 << 20)))
        }
        "panic" => panic!("the dependency table is corrupt"),
        // As a check without the SDK's panic hook: std's default hook prints to stderr.
        "plain-panic" => {
            drop(std::panic::take_hook());
            panic!("the quota table is corrupt")
        }
        // What the guest's wall clock says, in seconds since the epoch.
        "clock" => Outcome::proceed().because("Clock", seconds_since_epoch().to_string()),
        "log-flood" => {
            for line in 0..20_000 {
                preflight_guest::info(&format!("line {line} of a flood"));
            }
            Outcome::proceed()
        }
        "exit" => std::process::exit(3),
        "fetch" => {
            let headers: Vec<(&str, &str)> = request
                .config
                .headers
                .iter()
                .map(|[name, value]| (name.as_str(), value.as_str()))
                .collect();
            let answers: Vec<String> = request
                .config
                .urls
                .iter()
                .map(
                    |url| match preflight_guest::http::get_with_headers(url, &headers) {
                        Ok(response) => format!(
                            "{} {}",
                            response.status,
                            String::from_utf8_lossy(&response.body)
                        ),
                        Err(error) => format!("error: {error}"),
                    },
                )
                .collect();
            let mut message = answers.join(" | ");
            if !request.config.lookup.is_empty() {
                message += &format!(" | {:?}", look_up(&request.config.lookup));
            }
            Outcome::proceed().because("Fetched", message)
        }
        "lookup" => match look_up(&request.config.lookup) {
            Ok(found) => Outcome::proceed().because("LookedUp", format!("{found:?}")),
            Err(error) => Outcome::error(error).because("LookupFailed", ""),
        },
        "no-reason" => Outcome::block(),
        "bad-reason" => Outcome::block().because("not a valid reason!", "spaces are not allowed"),
        // Linear memory exists only in WebAssembly: natively these modes behave.
        #[cfg(target_arch = "wasm32")]
        "dirty" => Outcome::proceed().because("Dirtied", isolation::dirty().to_string()),
        #[cfg(target_arch = "wasm32")]
        "scan" | "dirty-then-scan" => {
            if request.config.mode == "dirty-then-scan" {
                isolation::dirty();
            }
            let (markers, nonzero) = isolation::scan();
            Outcome::proceed().because("Scanned", format!("markers={markers} nonzero={nonzero}"))
        }
        _ => Outcome::proceed().because("Behaved", "this time"),
    }
}

/// What one evaluation leaves in its linear memory, and what the next fresh instance can see of it.
#[cfg(target_arch = "wasm32")]
mod isolation {
    /// Pages grown by `dirty` and `scan` (16 MiB).
    const GROWN_PAGES: usize = 256;
    const PAGE: usize = 65536;
    /// Written by `dirty`; found anywhere by `scan` only if memory leaked from an earlier instance. Built from
    /// two words at run time so that it appears in no data segment.
    fn marker() -> [u64; 2] {
        [
            std::hint::black_box(0x4c45_414b_2d50_5245),
            std::hint::black_box(0x464c_4947_4854_2121),
        ]
    }

    unsafe extern "C" {
        static __heap_base: u8;
    }

    /// Grows memory and writes the marker on every other 4 KiB page of it (many separate dirty regions),
    /// returning how many pages were written.
    pub fn dirty() -> usize {
        let start = grow();
        let [low, high] = marker();
        let mut written = 0;
        for page in (0..GROWN_PAGES * PAGE / 4096).step_by(2) {
            let address = (start + page * 4096) as *mut u64;
            // SAFETY: the pages were just grown and belong to no allocation; wasm loads and stores in
            // bounds cannot fault.
            unsafe {
                address.write_volatile(low);
                address.add(1).write_volatile(high);
            }
            written += 1;
        }
        written
    }

    /// Grows memory by as much as `dirty`, then reads all of it above the data segments: how many markers
    /// it finds, and how many non-zero bytes the newly grown pages hold. Both must be 0 in a fresh instance.
    pub fn scan() -> (usize, usize) {
        let start = grow();
        let end = core::arch::wasm32::memory_size(0) * PAGE;
        // The linker defines `__heap_base` as the end of the data segments.
        let heap_base = core::ptr::addr_of!(__heap_base) as usize;
        let [low, high] = marker();
        let mut markers = 0;
        for address in (heap_base.next_multiple_of(8)..end - 8).step_by(8) {
            // SAFETY: in-bounds wasm loads; the memory outside allocations is plain bytes to a scan.
            let (first, second) = unsafe {
                (
                    (address as *const u64).read_volatile(),
                    ((address + 8) as *const u64).read_volatile(),
                )
            };
            if first == low && second == high {
                markers += 1;
            }
        }
        let nonzero = (start..end)
            // SAFETY: as above.
            .filter(|address| unsafe { (*address as *const u8).read_volatile() } != 0)
            .count();
        (markers, nonzero)
    }

    /// Grows memory by `GROWN_PAGES` and returns the address where the new pages start.
    fn grow() -> usize {
        let previous = core::arch::wasm32::memory_grow(0, GROWN_PAGES);
        assert!(previous != usize::MAX, "memory.grow failed");
        previous * PAGE
    }
}

fn recurse(depth: u64) -> u64 {
    let frame = black_box([depth; 64]);
    if black_box(depth) == 0 {
        frame[0]
    } else {
        recurse(depth + 1) + frame[3]
    }
}

preflight_guest::check!(check, validate = validate);
