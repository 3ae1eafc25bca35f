//! Loading: the same bytes compile once, whether loaded one after another or by several threads at once.

use preflight_engine::{Engine, EngineConfig};
use preflight_test_support::check_bytes;
use std::sync::Arc;

#[test]
fn the_same_bytes_loaded_at_once_by_several_threads_compile_once() {
    let engine = Engine::new(EngineConfig::default()).unwrap();
    let bytes = check_bytes("required-metadata");
    let checks: Vec<_> = std::thread::scope(|scope| {
        let loads: Vec<_> = (0..4)
            .map(|_| scope.spawn(|| engine.load(&bytes).unwrap()))
            .collect();
        loads.into_iter().map(|load| load.join().unwrap()).collect()
    });
    for check in &checks[1..] {
        assert!(Arc::ptr_eq(&checks[0], check), "one compiled check, shared");
    }
    assert!(Arc::ptr_eq(&checks[0], &engine.load(&bytes).unwrap()));
}
