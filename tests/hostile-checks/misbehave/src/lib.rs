//! A check that misbehaves on purpose, as its configuration's `mode` says. The host must contain each.

use preflight_guest::{Outcome, Request};
use serde::Deserialize;
use std::hint::black_box;

/// Which misbehaviour to perform.
#[derive(Deserialize, Default)]
#[serde(default)]
pub struct Config {
    /// `loop`, `memory`, `recursion`, `huge-result`, `panic`, `log-flood`, `exit`, `bad-reason`; anything else proceeds.
    mode: String,
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
        "huge-result" => Outcome::block().because("Huge", "x".repeat(10 << 20)),
        "panic" => panic!("the dependency table is corrupt"),
        "log-flood" => {
            for line in 0..20_000 {
                preflight_guest::info(&format!("line {line} of a flood"));
            }
            Outcome::proceed()
        }
        "exit" => std::process::exit(3),
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
