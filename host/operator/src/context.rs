//! What a kind's controller and each of its reconciles share: the operator-wide parts (client, gate, writer,
//! Events, metrics) and the kind's own (its resource, condition placement and pause switch).

use crate::check_set::KindSwitch;
use crate::condition::Placement;
use crate::events::EventPublisher;
use crate::gate::Gate;
use crate::kind::GatedKind;
use crate::metrics::{HeldObjects, Metrics};
use crate::pause::ReportedConflicts;
use crate::status_writer::StatusWriter;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::{Client, ResourceExt};
use std::sync::Arc;
use std::time::Duration;

/// What every kind's controller shares.
pub struct Shared {
    /// The API client.
    pub client: Client,
    /// The gate.
    pub gate: Arc<Gate>,
    /// Condition and Event writer.
    pub writer: StatusWriter,
    /// Events on check ConfigMaps (a kind the server does not serve).
    pub events: EventPublisher,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Reconciles one kind may run at once: less than the engine's evaluation slots, so that a kind whose
    /// checks hog their whole time budget (endless loops) always leaves slots to the other kinds.
    pub kind_concurrency: u16,
    /// How long a stopping controller may take to finish its running reconciles.
    pub stop_grace: Duration,
    /// Whether kinds with a pause switch are held at admission ([`crate::admission_hold`]).
    pub hold_at_admission: bool,
    /// This installation, as the admission policies it installs are labelled: the namespace of its check
    /// ConfigMaps, or `all-namespaces`.
    pub installation: String,
    /// Where the record of the kinds this installation gates is kept ([`crate::gated_record`]): the
    /// namespace of its check ConfigMaps, or of its Lease; `None` keeps none.
    pub record_namespace: Option<String>,
    /// The label selector that limits which objects of the gated kinds this replica watches and gates
    /// (static sharding); `None` watches them all.
    pub watch_selector: Option<String>,
    /// With a shard ring: this replica's share of the objects (automatic sharding); `None` gates them all.
    pub shard: Option<Shard>,
    /// Turns true once the check ConfigMaps have been listed and loaded: before that no kind looks wanted,
    /// so nothing is started or removed.
    pub checks_synced: tokio::sync::watch::Receiver<bool>,
}

/// This replica's place in its shard ring.
#[derive(Clone)]
pub struct Shard {
    /// This replica's identity, as the ring names its members.
    pub identity: String,
    /// The ring's live members, as they change; `None` while unknown.
    pub ring: tokio::sync::watch::Receiver<Option<crate::ring::Ring>>,
}

impl Shard {
    /// Whether this replica gates the object with `uid` now.
    pub fn owns(&self, uid: &str) -> bool {
        self.ring
            .borrow()
            .as_ref()
            .is_some_and(|ring| ring.owner(uid) == Some(self.identity.as_str()))
    }
}

/// The context of one kind's controller.
pub(crate) struct KindContext {
    /// What every kind shares.
    pub shared: Arc<Shared>,
    /// The kind.
    pub kind: GatedKind,
    /// The kind as a metrics label.
    pub label: String,
    /// How the server serves it.
    pub resource: ApiResource,
    /// Where its condition goes.
    pub placement: Placement,
    /// The pause switch its checks name.
    pub pause: KindSwitch,
    /// The pause conflicts already reported on its objects.
    pub pause_conflicts: Arc<ReportedConflicts>,
    /// Which of its objects are held, per mode (the `preflight_objects_held` gauges).
    pub held: Arc<HeldObjects>,
}

impl KindContext {
    /// The API of `object`'s kind, in its namespace.
    pub fn api(&self, object: &DynamicObject) -> Api<DynamicObject> {
        match object.namespace() {
            Some(namespace) => {
                Api::namespaced_with(self.shared.client.clone(), &namespace, &self.resource)
            }
            None => Api::all_with(self.shared.client.clone(), &self.resource),
        }
    }
}
