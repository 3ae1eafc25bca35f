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
    /// `no-reason`, `bad-reason`, `clock`; anything else proceeds.
    mode: String,
    /// Size of the message of `huge-result`, in bytes (10 MiB when absent).
    bytes: Option<usize>,
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
        "clock" => {
            let now = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or_default();
            Outcome::proceed().because("Clock", now.as_secs().to_string())
        }
        "log-flood" => {
            for line in 0..20_000 {
                preflight_guest::info(&format!("line {line} of a flood"));
            }
            Outcome::proceed()
        }
        "exit" => std::process::exit(3),
        "no-reason" => Outcome::block(),
        "bad-reason" => Outcome::block().because("not a valid reason!", "spaces are not allowed"),
        _ => Outcome::proceed().because("Behaved", "this time"),
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

preflight_guest::check!(check);
