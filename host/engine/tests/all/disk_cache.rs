//! The on-disk precompiled cache: written on first load, used by the next engine, and never trusted blindly.

use object::{Object, ObjectSection};
use preflight_engine::{Engine, EngineConfig, Limits, Request, Target};
use preflight_test_support::check_bytes;
use std::time::SystemTime;

fn engine(dir: &std::path::Path) -> Engine {
    Engine::new(EngineConfig {
        cache_dir: Some(dir.to_owned()),
        ..EngineConfig::default()
    })
    .unwrap()
}

/// The precompiled checks in `dir` (not the compiled functions checks share, which have a budget of their
/// own).
fn cached_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.file_name() != Some(FUNCTIONS.as_ref()))
        .collect()
}

/// A request the required-metadata check proceeds on.
fn labelled_request() -> Request {
    Request {
        object: r#"{"metadata":{"name":"a","labels":{"team":"x"}},"spec":{}}"#.into(),
        config: r#"{"labels":["team"]}"#.into(),
        target: Target::default(),
        now: SystemTime::now(),
    }
}

/// The file of compiled functions checks share.
const FUNCTIONS: &str = "functions.pack";

fn functions_len(dir: &std::path::Path) -> u64 {
    std::fs::metadata(dir.join(FUNCTIONS)).unwrap().len()
}

#[tokio::test]
async fn a_second_engine_loads_the_precompiled_check_and_a_damaged_file_is_replaced() {
    let dir = std::env::temp_dir().join(format!("preflight-cache-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let bytes = check_bytes("required-metadata");
    let digest = engine(&dir).load(&bytes).unwrap().digest();

    let files = cached_files(&dir);
    assert_eq!(files.len(), 1, "{files:?}");
    let name = files[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with(&digest.to_string()) && name.ends_with(".cwasm"),
        "{name}"
    );

    let request = labelled_request();
    let from_cache = engine(&dir);
    let check = from_cache.load(&bytes).unwrap();
    assert!(
        from_cache
            .evaluate(&check, &request, &Limits::default())
            .await
            .outcome
            .unwrap()
            .proceed
    );

    std::fs::write(&files[0], b"not a compiled component").unwrap();
    let recovering = engine(&dir);
    let check = recovering.load(&bytes).unwrap();
    assert!(
        recovering
            .evaluate(&check, &request, &Limits::default())
            .await
            .outcome
            .unwrap()
            .proceed
    );
    assert!(
        std::fs::metadata(&files[0]).unwrap().len() > 1000,
        "the damaged file was rewritten"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

fn engine_with_budget(dir: &std::path::Path, cache_max_bytes: u64) -> Engine {
    Engine::new(EngineConfig {
        cache_dir: Some(dir.to_owned()),
        cache_max_bytes,
        ..EngineConfig::default()
    })
    .unwrap()
}

fn set_age(path: &std::path::Path, age: std::time::Duration) {
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(SystemTime::now() - age)
        .unwrap();
}

#[test]
fn the_cache_keeps_its_budget_by_evicting_the_least_recently_used() {
    let dir = std::env::temp_dir().join(format!("preflight-cache-budget-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let [first, second, third] = [
        "required-metadata",
        "dependency-ready",
        "maintenance-window",
    ]
    .map(check_bytes);
    let sizes = [&first, &second, &third].map(|bytes| {
        let digest = engine(&dir).load(bytes).unwrap().digest().to_string();
        let file = cached_files(&dir)
            .into_iter()
            .find(|file| file.to_string_lossy().contains(&digest))
            .unwrap();
        std::fs::metadata(&file).unwrap().len()
    });
    std::fs::remove_dir_all(&dir).unwrap();

    // Room for all three but one byte, so one must go when the third is written.
    let budget = sizes.iter().sum::<u64>() - 1;
    let first_digest = engine_with_budget(&dir, budget)
        .load(&first)
        .unwrap()
        .digest();
    let second_digest = engine_with_budget(&dir, budget)
        .load(&second)
        .unwrap()
        .digest();
    let older_engines = dir.join(format!("{}-0000000000000000.cwasm", "ab".repeat(32)));
    std::fs::write(&older_engines, b"compiled by another engine").unwrap();
    let leftover = dir.join(format!("{}-0000000000000000.tmp1", "cd".repeat(32)));
    std::fs::write(&leftover, b"half written").unwrap();
    for (file, hours) in [(&older_engines, 1), (&leftover, 2)] {
        set_age(file, std::time::Duration::from_secs(hours * 3600));
    }
    let cached_file_of = |digest: &str| {
        cached_files(&dir)
            .into_iter()
            .find(|file| file.to_string_lossy().contains(digest))
    };
    set_age(
        &cached_file_of(&first_digest.to_string()).unwrap(),
        std::time::Duration::from_secs(60),
    );
    set_age(
        &cached_file_of(&second_digest.to_string()).unwrap(),
        std::time::Duration::from_secs(30),
    );
    // Used again: the first check is now the most recently used of the two.
    engine_with_budget(&dir, budget).load(&first).unwrap();
    let third_digest = engine_with_budget(&dir, budget)
        .load(&third)
        .unwrap()
        .digest();

    let mut left: Vec<_> = cached_files(&dir)
        .iter()
        .map(|file| file.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    left.sort();
    let mut expected: Vec<_> = [first_digest, third_digest]
        .iter()
        .map(|digest| cached_file_of(&digest.to_string()).unwrap())
        .map(|file| file.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    expected.sort();
    assert_eq!(
        left, expected,
        "the other engine's file, the leftover and the least recently used check went"
    );

    let tiny = engine_with_budget(&dir, 1000);
    assert!(
        tiny.load(&second).is_ok(),
        "a check beyond the budget still loads"
    );
    assert_eq!(cached_files(&dir).len(), 2, "but is not kept");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn a_check_compiled_again_reuses_the_functions_compiled_before() {
    let dir = std::env::temp_dir().join(format!("preflight-functions-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let bytes = check_bytes("required-metadata");
    engine(&dir).load(&bytes).unwrap();
    let compiled = functions_len(&dir);
    assert!(compiled > 1000, "compiling kept its functions");

    // Without its precompiled file, the next engine compiles the check again: from the kept functions.
    for file in cached_files(&dir) {
        std::fs::remove_file(file).unwrap();
    }
    let again = engine(&dir);
    let check = again.load(&bytes).unwrap();
    // (Cranelift's keys of a few functions, trampolines among them, differ from one compile to the next:
    // about a tenth is compiled again.)
    let recompiled = functions_len(&dir) - compiled;
    assert!(
        recompiled < compiled / 4,
        "most functions were found, not compiled and kept again: {recompiled} bytes added to {compiled}"
    );
    let request = labelled_request();
    let verdict = again
        .evaluate(&check, &request, &Limits::default())
        .await
        .outcome
        .unwrap();
    assert!(verdict.proceed, "{verdict:?}");

    // Another check built with the same SDK shares part of its code with the first.
    let other = check_bytes("dependency-ready");
    engine(&dir).load(&other).unwrap();
    let added = functions_len(&dir) - compiled;
    std::fs::remove_dir_all(&dir).unwrap();
    engine(&dir).load(&other).unwrap();
    let alone = functions_len(&dir);
    assert!(
        added < alone,
        "compiled beside the first it kept {added} bytes, alone {alone}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn kept_copies_carry_no_native_unwind_tables() {
    // The system's unwinder is never asked to walk a check's frames, and musl's registers and removes every
    // function's entry one by one: the image's binary spent 0.3-0.5 s of CPU on a Python check's (engine.rs).
    let dir = std::env::temp_dir().join(format!("preflight-unwind-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    engine(&dir)
        .load(&check_bytes("required-metadata"))
        .unwrap();
    let kept = cached_files(&dir);
    assert_eq!(kept.len(), 1, "{kept:?}");
    let bytes = std::fs::read(&kept[0]).unwrap();
    let file = object::File::parse(bytes.as_slice()).unwrap();
    let sections: Vec<&str> = file
        .sections()
        .filter_map(|section| section.name().ok())
        .collect();
    assert!(sections.contains(&".text"), "{sections:?}");
    assert!(!sections.contains(&".eh_frame"), "{sections:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}
