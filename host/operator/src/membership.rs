//! Membership of a shard ring, with Kubernetes as the coordinator (the design of the controller-sharding
//! work: a Lease per member, labelled with the ring's name). Each replica holds a Lease of its own,
//! `preflight-ring-<ring>-<identity>`, renewed by kube-lease-manager; it watches the ring's Leases (filtered
//! by label on the server) and publishes the ring of live members whenever it changes. A member is live
//! while its Lease names a holder and keeps changing: a Lease that this replica has not seen renewed for a
//! lease duration (measured on this replica's clock, as Kubernetes leader election does, so that clock skew
//! between nodes does not matter) is dead, and its objects go to the others. A replica that does not see
//! its own Lease renewed (cut off from the API server) leaves the ring the same way, and gates nothing
//! until it sees it renewed again. A Lease dead for
//! [`FORGOTTEN_AFTER`] lease durations (a replica that will not come back under that name) is deleted.

use crate::Error;
use crate::leader::{LeaderElection, lease_manager};
use crate::metrics::Metrics;
use crate::ring::Ring;
use crate::watch_failures;
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Client, ResourceExt};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::info;

/// The label naming the ring a membership Lease belongs to.
pub const RING_LABEL: &str = "preflight.dev/ring";
/// Lease durations after which a dead member's Lease is deleted.
const FORGOTTEN_AFTER: u32 = 20;

/// Which ring to join, and as whom.
#[derive(Debug, Clone)]
pub struct ShardRing {
    /// The ring's name: the replicas of one Deployment or StatefulSet share it.
    pub name: String,
    /// The namespace of the membership Leases.
    pub namespace: String,
    /// This replica's identity (the pod name).
    pub identity: String,
    /// How long a member stays in the ring without renewing its Lease: the longest an object waits for
    /// another replica after its replica died.
    pub lease_duration: Duration,
}

/// This replica's view of its ring.
pub struct Membership {
    /// The ring of live members; `None` until this replica holds its Lease and has listed the ring's.
    pub ring: watch::Receiver<Option<Ring>>,
    /// Follows the ring's Leases; aborting it stops renewing this replica's Lease and releases it.
    pub task: JoinHandle<()>,
}

/// Joins `ring`: takes this replica's Lease and starts following the ring's members (counted in
/// `metrics`).
pub async fn join(
    client: Client,
    ring: &ShardRing,
    metrics: Arc<Metrics>,
) -> Result<Membership, Error> {
    let lease_name = format!("preflight-ring-{}-{}", ring.name, ring.identity);
    let election = LeaderElection {
        namespace: ring.namespace.clone(),
        lease_name: lease_name.clone(),
        identity: ring.identity.clone(),
        lease_duration: ring.lease_duration,
    };
    let failed =
        |error: String| Error::LeaderElection(format!("joining ring {}: {error}", ring.name));
    let manager = lease_manager(client.clone(), &election)
        .await
        .map_err(|error| failed(error.to_string()))?;
    let leases: Api<Lease> = Api::namespaced(client, &ring.namespace);
    let label = serde_json::json!({"metadata": {"labels": {RING_LABEL: ring.name}}});
    leases
        .patch(&lease_name, &PatchParams::default(), &Patch::Merge(label))
        .await
        .map_err(|error| failed(error.to_string()))?;
    // Renewing ends by itself, releasing the Lease, once `held` is dropped: when following stops.
    let (held, _renewing) = manager.watch().await;
    let (sender, receiver) = watch::channel(None);
    let follower = Follower {
        leases,
        ring_name: ring.name.clone(),
        identity: ring.identity.clone(),
        lease_duration: ring.lease_duration.max(Duration::from_secs(2)),
        metrics,
    };
    let task = tokio::spawn(follower.follow(held, sender));
    Ok(Membership {
        ring: receiver,
        task,
    })
}

/// Follows the ring's Leases and publishes its live members.
struct Follower {
    leases: Api<Lease>,
    ring_name: String,
    identity: String,
    lease_duration: Duration,
    metrics: Arc<Metrics>,
}

/// When each Lease was last seen to change, and as which version.
type Observed = HashMap<String, (String, Instant)>;

impl Follower {
    async fn follow(self, held: watch::Receiver<bool>, ring: watch::Sender<Option<Ring>>) {
        let config = watcher::Config::default().labels(&format!("{RING_LABEL}={}", self.ring_name));
        let (reader, writer) = reflector::store();
        let mut events = watcher(self.leases.clone(), config)
            .default_backoff()
            .reflect(writer)
            .boxed();
        let mut observed = Observed::new();
        let mut listed = false;
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                event = events.next() => match event {
                    Some(Ok(watcher::Event::InitDone)) => listed = true,
                    Some(Err(failure)) => {
                        let watching = format!("the Leases of ring {}", self.ring_name);
                        watch_failures::report(&failure, &watching);
                    }
                    _ => {}
                },
                _ = tick.tick() => {}
            }
            if !*held.borrow() {
                // This replica's Lease is lost (it could not renew it in time): the others take its
                // objects over, so it gates none until it holds the Lease again.
                self.leave(&ring, "its Lease is not held");
                continue;
            }
            if !listed {
                continue;
            }
            let now = Instant::now();
            let leases = reader.state();
            let mut members = Vec::new();
            for lease in &leases {
                let version = lease.resource_version().unwrap_or_default();
                let name = lease.name_any();
                let seen = observed
                    .entry(name.clone())
                    .or_insert((version.clone(), now));
                if seen.0 != version {
                    *seen = (version, now);
                }
                let silent = now.duration_since(seen.1);
                let holder = lease
                    .spec
                    .as_ref()
                    .and_then(|spec| spec.holder_identity.clone());
                match holder {
                    Some(holder) if silent < self.lease_duration => members.push(holder),
                    _ if silent > self.lease_duration * FORGOTTEN_AFTER => self.forget(&name).await,
                    _ => {}
                }
            }
            observed.retain(|name, _| leases.iter().any(|lease| lease.name_any() == *name));
            if !members.contains(&self.identity) {
                // This replica's own renewals have not been seen for a lease duration (it is cut off
                // from the API server, or renewing fails): the others count it out, so it gates nothing
                // until they are seen again.
                self.leave(&ring, "its own Lease is not seen renewed");
                continue;
            }
            let next = Ring::new(members);
            if ring.borrow().as_ref() != Some(&next) {
                info!(ring = %self.ring_name, members = ?next.members(), "shard ring changed");
                let count = i64::try_from(next.members().len()).unwrap_or(i64::MAX);
                self.metrics.shard_ring_members.set(count);
                ring.send_replace(Some(next));
            }
        }
    }

    /// Stops gating until this replica is a member again, saying `why` once.
    fn leave(&self, ring: &watch::Sender<Option<Ring>>, why: &str) {
        if ring.borrow().is_some() {
            info!(ring = %self.ring_name, why, "left the shard ring");
            ring.send_replace(None);
            self.metrics.shard_ring_members.set(0);
        }
    }

    /// Deletes the Lease of a member gone for good.
    async fn forget(&self, name: &str) {
        match self.leases.delete(name, &DeleteParams::default()).await {
            Ok(_) => info!(
                lease = name,
                "deleted the Lease of a shard ring member gone for good"
            ),
            Err(error) => tracing::debug!(%error, lease = name, "deleting a dead member's Lease"),
        }
    }
}
