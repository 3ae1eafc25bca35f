//! Throughput measurement, shared by `preflight bench` and the engine benchmark so both count the same way.

use crate::{Check, Engine, Failure, Grants, Limits, Request};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// What [`evaluations_in_flight`] measured: the wall time, and the evaluations that failed (a rate made of
/// failures measures nothing: callers must not report one when `failed` is not 0).
#[derive(Debug)]
pub struct InFlight {
    /// Wall time of all the evaluations.
    pub elapsed: Duration,
    /// How many of them failed (timed out, trapped, ran out of memory, ...).
    pub failed: u32,
    /// The first failure, to say what went wrong.
    pub first_failure: Option<Failure>,
}

/// Runs `total` evaluations of `check` on `request` under `grants` with `in_flight` tasks pulling from a
/// shared counter, on the current tokio runtime; returns the wall time they took and the failures.
pub async fn evaluations_in_flight(
    engine: &Arc<Engine>,
    check: &Arc<Check>,
    request: &Arc<Request>,
    limits: Limits,
    grants: &Grants,
    total: u32,
    in_flight: u32,
) -> InFlight {
    let remaining = Arc::new(AtomicU32::new(total));
    let failed = Arc::new(AtomicU32::new(0));
    let first_failure = Arc::new(Mutex::new(None));
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
            let (failed, first_failure) = (Arc::clone(&failed), Arc::clone(&first_failure));
            tokio::spawn(async move {
                while remaining
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                        left.checked_sub(1)
                    })
                    .is_ok()
                {
                    let evaluation = engine.evaluate_with(&check, &request, &limits, &grants);
                    if let Err(failure) = std::hint::black_box(evaluation.await).outcome {
                        failed.fetch_add(1, Ordering::Relaxed);
                        first_failure
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .get_or_insert(failure);
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        let _ = task.await;
    }
    let elapsed = started.elapsed();
    let first_failure = first_failure
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    InFlight {
        elapsed,
        failed: failed.load(Ordering::Relaxed),
        first_failure,
    }
}
