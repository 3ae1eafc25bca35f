//! Prometheus metrics of the operator: what users alert on (evaluations by outcome, latency, reconcile
//! errors, check load failures, loaded checks, status writes).

use crate::summary::CheckRun;
use crate::vocabulary::CheckMode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::{Family, MetricConstructor};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Labels of per-check series.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CheckLabels {
    /// The gated kind (`Kind.group`).
    pub kind: String,
    /// The check (`namespace/name`).
    pub check: String,
    /// The check's mode: `enforce` or `monitor`.
    pub mode: String,
}

/// Labels of evaluation counts.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    /// The gated kind.
    pub kind: String,
    /// The check.
    pub check: String,
    /// The check's mode: `enforce` or `monitor`.
    pub mode: String,
    /// `proceed`, `not-proceed`, `ignored`, `suspended`, or a failure kind (`check`, `timeout`, `memory`, `trap`, ...).
    pub outcome: String,
}

/// Labels of the held-objects gauge.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HeldLabels {
    /// The gated kind.
    pub kind: String,
    /// `enforce`: objects the gate holds; `monitor`: objects the monitored checks would hold.
    pub mode: String,
}

/// Labels of check load failures.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LoadFailureLabels {
    /// The gated kind (empty when the ConfigMap names none).
    pub kind: String,
    /// The check.
    pub check: String,
    /// What was wrong: a [`crate::RejectionCause`] label (`config-map`, `compile`, `imports`, ...).
    pub cause: String,
}

/// Labels of per-kind series.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    /// The gated kind.
    pub kind: String,
}

/// Labels of reconcile errors.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReconcileErrorLabels {
    /// The gated kind.
    pub kind: String,
    /// What failed: one of [`RECONCILE_ERROR_CAUSES`].
    pub cause: String,
}

/// Every cause a reconcile error is counted under: the outcome could not be written (`status-write`), the
/// object could not be read as JSON (`serialize`), or its pause switch could not be applied (`pause`).
pub const RECONCILE_ERROR_CAUSES: [&str; 4] =
    ["status-write", "serialize", "pause", "outputs-write"];

/// Histogram buckets from 10 µs to ~10 s: evaluations range from microseconds to a check's timeout.
#[derive(Clone)]
pub struct LatencyBuckets;

impl MetricConstructor<Histogram> for LatencyBuckets {
    fn new_metric(&self) -> Histogram {
        Histogram::new(exponential_buckets(10e-6, 4.0, 11))
    }
}

/// Every metric the operator exports, registered in one registry.
pub struct Metrics {
    registry: Registry,
    /// Evaluations by kind, check and outcome.
    pub evaluations: Family<OutcomeLabels, Counter>,
    /// Evaluation wall time by kind and check.
    pub evaluation_seconds: Family<CheckLabels, Histogram, LatencyBuckets>,
    /// Reconciles that failed, by cause.
    pub reconcile_errors: Family<ReconcileErrorLabels, Counter>,
    /// Check versions that could not be loaded, by cause (malformed ConfigMap, invalid component, refused
    /// configuration, ...).
    pub check_load_failures: Family<LoadFailureLabels, Counter>,
    /// Good checks loaded per kind.
    pub checks_loaded: Family<KindLabels, Gauge>,
    /// Writes of the Preflight condition (status or annotation).
    pub status_writes: Family<KindLabels, Counter>,
    /// Objects whose latest verdict does not proceed, per kind and mode.
    pub objects_held: Family<HeldLabels, Gauge>,
    /// With a shard ring: its live members, as this replica sees them (0 until known).
    pub shard_ring_members: Gauge,
    /// With a shard ring: objects of the kind this replica gates (its share).
    pub shard_objects: Family<KindLabels, Gauge>,
    /// With a shard ring: objects that moved to (`direction="in"`) or away from (`"out"`) this replica when
    /// the ring's members changed.
    pub shard_moves: Family<MoveLabels, Counter>,
}

/// Labels of shard moves.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MoveLabels {
    /// The gated kind.
    pub kind: String,
    /// `in`: now this replica's; `out`: now another's.
    pub direction: String,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("preflight");
        let evaluations = Family::default();
        let evaluation_seconds = Family::new_with_constructor(LatencyBuckets);
        let reconcile_errors = Family::default();
        let check_load_failures = Family::default();
        let checks_loaded = Family::default();
        let status_writes = Family::default();
        let objects_held = Family::default();
        let shard_ring_members = Gauge::default();
        let shard_objects = Family::default();
        let shard_moves = Family::default();
        registry.register(
            "shard_ring_members",
            "Live members of the shard ring, as this replica sees them",
            shard_ring_members.clone(),
        );
        registry.register(
            "shard_objects",
            "Objects of the kind this replica gates, with a shard ring",
            shard_objects.clone(),
        );
        registry.register(
            "shard_moves",
            "Objects that moved to or away from this replica when the shard ring changed",
            shard_moves.clone(),
        );
        registry.register(
            "evaluations",
            "Check evaluations by outcome",
            evaluations.clone(),
        );
        registry.register(
            "evaluation_duration_seconds",
            "Wall time of one check evaluation",
            evaluation_seconds.clone(),
        );
        registry.register(
            "reconcile_errors",
            "Reconciles that failed",
            reconcile_errors.clone(),
        );
        registry.register(
            "check_load_failures",
            "Check versions that could not be loaded",
            check_load_failures.clone(),
        );
        registry.register(
            "checks_loaded",
            "Good checks loaded per kind",
            checks_loaded.clone(),
        );
        registry.register(
            "status_writes",
            "Writes of the Preflight condition",
            status_writes.clone(),
        );
        registry.register(
            "objects_held",
            "Objects whose latest verdict does not proceed (mode=monitor: would not)",
            objects_held.clone(),
        );
        Self {
            registry,
            evaluations,
            evaluation_seconds,
            reconcile_errors,
            check_load_failures,
            checks_loaded,
            status_writes,
            objects_held,
            shard_ring_members,
            shard_objects,
            shard_moves,
        }
    }
}

impl Metrics {
    /// Creates the zero-valued series of a gated kind, so that dashboards and alerts see them (a rate of
    /// reconcile errors, say) before the first event.
    pub fn register_kind(&self, kind: &str) {
        let labels = KindLabels {
            kind: kind.to_owned(),
        };
        for cause in RECONCILE_ERROR_CAUSES {
            drop(self.reconcile_errors.get_or_create(&ReconcileErrorLabels {
                kind: kind.to_owned(),
                cause: cause.to_owned(),
            }));
        }
        drop(self.status_writes.get_or_create(&labels));
        drop(self.checks_loaded.get_or_create(&labels));
    }

    /// The held-objects gauges of a kind, one per mode.
    pub(crate) fn held_objects(&self, kind: &str) -> HeldObjects {
        let gauge = |mode: CheckMode| {
            self.objects_held
                .get_or_create(&HeldLabels {
                    kind: kind.to_owned(),
                    mode: mode.as_str().to_owned(),
                })
                .clone()
        };
        HeldObjects {
            gauges: [gauge(CheckMode::Enforce), gauge(CheckMode::Monitor)],
            held: Mutex::default(),
        }
    }

    /// Counts the runs of one gate evaluation, by the mode of their checks.
    pub fn record_runs(&self, kind: &str, runs: &[CheckRun], mode: CheckMode) {
        for run in runs {
            let outcome = match (&run.outcome, &run.ignored) {
                _ if run.suspended => "suspended",
                (_, Some(_)) => "ignored",
                (Ok(verdict), None) if verdict.proceed => "proceed",
                (Ok(_), None) => "not-proceed",
                (Err(failure), None) => failure.kind.as_str(),
            };
            self.evaluations
                .get_or_create(&OutcomeLabels {
                    kind: kind.to_owned(),
                    check: run.name.clone(),
                    mode: mode.as_str().to_owned(),
                    outcome: outcome.to_owned(),
                })
                .inc();
            if !run.duration.is_zero() {
                self.evaluation_seconds
                    .get_or_create(&CheckLabels {
                        kind: kind.to_owned(),
                        check: run.name.clone(),
                        mode: mode.as_str().to_owned(),
                    })
                    .observe(run.duration.as_secs_f64());
            }
        }
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

/// Which objects of one kind are held, per mode, behind the `preflight_objects_held` gauges: set from
/// each verdict, forgotten when the object is deleted, zeroed when the kind's controller stops.
#[derive(Debug)]
pub(crate) struct HeldObjects {
    gauges: [Gauge; 2],
    held: Mutex<HashMap<String, [bool; 2]>>,
}

impl HeldObjects {
    /// Records whether object `uid` is held under `mode` (for `monitor`: would be held).
    pub fn set(&self, uid: &str, mode: CheckMode, held: bool) {
        let slot = slot(mode);
        let mut objects = self.lock();
        let was = objects.get(uid).is_some_and(|entry| entry[slot]);
        if was == held {
            return;
        }
        if held {
            objects.entry(uid.to_owned()).or_default()[slot] = true;
            self.gauges[slot].inc();
        } else {
            if let Some(entry) = objects.get_mut(uid) {
                entry[slot] = false;
                if *entry == [false; 2] {
                    objects.remove(uid);
                }
            }
            self.gauges[slot].dec();
        }
    }

    /// Forgets a deleted object.
    pub fn forget(&self, uid: &str) {
        if let Some(entry) = self.lock().remove(uid) {
            for (gauge, held) in self.gauges.iter().zip(entry) {
                if held {
                    gauge.dec();
                }
            }
        }
    }

    /// Forgets every object: the kind is no longer gated.
    pub fn clear(&self) {
        self.lock().clear();
        for gauge in &self.gauges {
            gauge.set(0);
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, [bool; 2]>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn slot(mode: CheckMode) -> usize {
    match mode {
        CheckMode::Enforce => 0,
        CheckMode::Monitor => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registered_kind_has_every_per_kind_series_at_zero() {
        let metrics = Metrics::default();
        metrics.register_kind("App.example.com");
        let text = metrics.render();
        for cause in RECONCILE_ERROR_CAUSES {
            let sample = format!(
                "preflight_reconcile_errors_total{{kind=\"App.example.com\",cause=\"{cause}\"}} 0"
            );
            assert!(text.contains(&sample), "{sample} missing in:\n{text}");
        }
        for family in ["preflight_status_writes_total", "preflight_checks_loaded"] {
            assert!(
                text.contains(&format!("{family}{{kind=\"App.example.com\"}} 0")),
                "{family} missing in:\n{text}"
            );
        }
    }

    #[test]
    fn the_held_gauges_follow_each_objects_latest_verdict() {
        let metrics = Metrics::default();
        let held = metrics.held_objects("App.example.com");
        let sample = |mode: &str, count: u32| {
            format!("preflight_objects_held{{kind=\"App.example.com\",mode=\"{mode}\"}} {count}")
        };
        held.set("a", CheckMode::Enforce, true);
        held.set("a", CheckMode::Enforce, true);
        held.set("b", CheckMode::Enforce, true);
        held.set("b", CheckMode::Monitor, true);
        held.set("c", CheckMode::Monitor, false);
        let text = metrics.render();
        assert!(text.contains(&sample("enforce", 2)), "{text}");
        assert!(text.contains(&sample("monitor", 1)), "{text}");
        held.set("a", CheckMode::Enforce, false);
        held.forget("b");
        held.forget("never-seen");
        let text = metrics.render();
        assert!(text.contains(&sample("enforce", 0)), "{text}");
        assert!(text.contains(&sample("monitor", 0)), "{text}");
        held.set("d", CheckMode::Monitor, true);
        held.clear();
        assert!(metrics.render().contains(&sample("monitor", 0)));
    }
}
