//! A replica's share of a kind's objects in a shard ring: every change of the ring's members re-checks the
//! kind's objects (those now this replica's are gated, those now another's are skipped), and the share is
//! counted (`preflight_shard_objects`, `preflight_shard_moves_total`).

use crate::context::Shard;
use crate::metrics::{KindLabels, Metrics, MoveLabels};
use futures::{Stream, stream};
use kube::ResourceExt;
use kube::api::DynamicObject;
use kube::runtime::reflector::Store;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

/// How often the share is counted again between ring changes (objects come and go).
const RECOUNT: Duration = Duration::from_secs(5);

/// Ticks whenever the ring's members change.
pub(crate) fn ring_changes(shard: Option<Shard>) -> impl Stream<Item = ()> + Send + 'static {
    stream::unfold(shard, |shard| async move {
        let mut shard = shard?;
        shard.ring.changed().await.ok()?;
        Some(((), Some(shard)))
    })
}

/// Counts this replica's share of the objects in `objects`, on every ring change and every
/// [`RECOUNT`], until the task is aborted.
pub(crate) async fn count_share(
    mut shard: Shard,
    objects: Store<DynamicObject>,
    metrics: Arc<Metrics>,
    kind: String,
) {
    let labels = KindLabels { kind: kind.clone() };
    let moved = |direction: &str| {
        metrics
            .shard_moves
            .get_or_create(&MoveLabels {
                kind: kind.clone(),
                direction: direction.to_owned(),
            })
            .clone()
    };
    let (moved_in, moved_out) = (moved("in"), moved("out"));
    let mut owned: HashSet<String> = HashSet::new();
    loop {
        let ring_changed = tokio::select! {
            changed = shard.ring.changed() => {
                if changed.is_err() {
                    return;
                }
                true
            }
            _ = tokio::time::sleep(RECOUNT) => false,
        };
        let now: HashSet<String> = objects
            .state()
            .iter()
            .filter_map(|object| object.uid())
            .filter(|uid| shard.owns(uid))
            .collect();
        if ring_changed {
            moved_in.inc_by(now.difference(&owned).count() as u64);
            moved_out.inc_by(owned.difference(&now).count() as u64);
        }
        metrics
            .shard_objects
            .get_or_create(&labels)
            .set(i64::try_from(now.len()).unwrap_or(i64::MAX));
        owned = now;
    }
}
