//! The on-disk precompiled cache: written on first load, used by the next engine, and never trusted blindly.

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

fn cached_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect()
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

    let request = Request {
        object: r#"{"metadata":{"name":"a","labels":{"team":"x"}},"spec":{}}"#.into(),
        config: r#"{"labels":["team"]}"#.into(),
        target: Target::default(),
        now: SystemTime::now(),
    };
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
