//! Leader election on a Lease (crate `kube-lease-manager`): only the leader runs controllers and writes,
//! every replica keeps its checks compiled so that a takeover starts gating at once.

use crate::Error;
use crate::field_managers::FIELD_MANAGER;
use kube::Client;
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Which Lease to hold and as whom.
#[derive(Debug, Clone)]
pub struct LeaderElection {
    /// Namespace of the Lease.
    pub namespace: String,
    /// Name of the Lease.
    pub lease_name: String,
    /// This replica's identity (the pod name).
    pub identity: String,
    /// How long a lease stays valid without renewal: the longest takeover after a leader dies.
    pub lease_duration: Duration,
}

/// Leadership as it changes, and the task renewing the Lease. Dropping the receiver releases the Lease.
pub struct Leadership {
    /// `true` while this replica leads.
    pub is_leader: watch::Receiver<bool>,
    /// Renews the Lease; ends after the receiver is dropped, releasing the Lease.
    pub task: JoinHandle<()>,
}

/// Starts competing for the Lease.
pub async fn elect(client: Client, election: &LeaderElection) -> Result<Leadership, Error> {
    let manager = lease_manager(client, election)
        .await
        .map_err(|error| Error::LeaderElection(error.to_string()))?;
    let (is_leader, task) = manager.watch().await;
    let task = tokio::spawn(async move {
        match task.await {
            Ok(Ok(_)) => tracing::info!("lease released"),
            Ok(Err(error)) => tracing::warn!(%error, "leader election ended"),
            Err(error) => tracing::warn!(%error, "leader election task failed"),
        }
    });
    Ok(Leadership { is_leader, task })
}

/// A manager of the Lease `election` names, created if missing, renewed a third of its duration before it
/// lapses (at least 2 s long): for leader election, and for a shard ring member's own Lease.
pub(crate) async fn lease_manager(
    client: Client,
    election: &LeaderElection,
) -> kube_lease_manager::Result<LeaseManager> {
    let seconds = election.lease_duration.as_secs().max(2);
    LeaseManagerBuilder::new(client, &election.lease_name)
        .with_namespace(&election.namespace)
        .with_identity(&election.identity)
        .with_duration(seconds)
        .with_grace((seconds / 3).max(1))
        .with_field_manager(FIELD_MANAGER)
        .build()
        .await
}

/// Leadership while this replica is a member of its shard ring (every member gates its own share):
/// `follower` is the [`Membership`](crate::membership::Membership)'s task, stopped (releasing this
/// replica's Lease) when leadership is given up.
pub fn while_member(
    mut ring: watch::Receiver<Option<crate::ring::Ring>>,
    follower: JoinHandle<()>,
) -> Leadership {
    let (sender, is_leader) = watch::channel(false);
    let task = tokio::spawn(async move {
        loop {
            sender.send_replace(ring.borrow_and_update().is_some());
            tokio::select! {
                changed = ring.changed() => if changed.is_err() { break },
                _ = sender.closed() => break,
            }
        }
        follower.abort();
    });
    Leadership { is_leader, task }
}

/// Leadership that is always held: for a single replica without election.
pub fn always() -> Leadership {
    let (sender, is_leader) = watch::channel(true);
    let task = tokio::spawn(async move { sender.closed().await });
    Leadership { is_leader, task }
}
