//! Throughput measurement, shared by `preflight bench` and the engine benchmark so both count the same way.

use crate::{Check, Engine, Grants, Limits, Request};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Runs `total` evaluations of `check` on `request` under `grants` with `in_flight` tasks pulling from a
/// shared counter, on the current tokio runtime, and returns the wall time they took.
pub async fn evaluations_in_flight(
    engine: &Arc<Engine>,
    check: &Arc<Check>,
    request: &Arc<Request>,
    limits: Limits,
    grants: &Grants,
    total: u32,
    in_flight: u32,
) -> Duration {
    let remaining = Arc::new(AtomicU32::new(total));
    let started = Instant::now();
    let tasks: Vec<_> = (0..in_flight)
        .map(|_| {
            let (engine, check, request, remaining, grants) = (
                Arc::clone(engine),
                Arc::clone(check),
                Arc::clone(request),
                Arc::clone(&remaining),
                grants.clone(),
            );
            tokio::spawn(async move {
                while remaining
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                        left.checked_sub(1)
                    })
                    .is_ok()
                {
                    let evaluation = engine.evaluate_with(&check, &request, &limits, &grants);
                    std::hint::black_box(evaluation.await);
                }
            })
        })
        .collect();
    for task in tasks {
        let _ = task.await;
    }
    started.elapsed()
}
