//! Static sharding, as Flux shards its controllers: two operators, each watching only the objects its
//! `--watch-selector` matches (filtered by the API server), share a kind's objects: every object is gated by
//! exactly the operator of its shard, and objects no shard selects are gated by none.

use crate::operator_support::*;
use k8s_openapi::api::events::v1::Event as KubeEvent;
use kube::api::{Api, ListParams};
use std::collections::{BTreeMap, BTreeSet};

const PER_SHARD: usize = 12;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_operators_with_watch_selectors_each_gate_exactly_their_shard() {
    let s = Scenario::new("shards", "Tenant", "required-metadata").await;
    s.put("meta", &[("config", r#"{"labels": ["team"]}"#)])
        .await;
    let shard_of = |i: usize| ["a", "b"][i % 2];
    for i in 0..2 * PER_SHARD {
        s.create(&format!("o{i:02}"), &[("preflight.dev/shard", shard_of(i))])
            .await;
    }
    s.create("unsharded", &[]).await;
    let shard_operator = |shard: &str| {
        let mut config = operator_config(&s.namespace);
        config.watch_selector = Some(format!("preflight.dev/shard={shard}"));
        config.instance = Some(format!("shard-{shard}"));
        start_operator(&s.client, config)
    };
    let (a, b) = (shard_operator("a").await, shard_operator("b").await);
    for i in 0..2 * PER_SHARD {
        s.wait(&format!("o{i:02}"), "False", "RequiredMetadataMissing")
            .await;
    }

    // Who gated what: the Events each replica published about the objects, by reporting instance.
    let events: Api<KubeEvent> = Api::namespaced(s.client.clone(), &s.namespace);
    let mut gated_by: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for event in events.list(&ListParams::default()).await.unwrap().items {
        if let (Some(object), Some(instance)) = (regarding(&event), &event.reporting_instance) {
            gated_by
                .entry(object.to_owned())
                .or_default()
                .insert(instance.clone());
        }
    }
    for i in 0..2 * PER_SHARD {
        let name = format!("o{i:02}");
        let expected = BTreeSet::from([format!("shard-{}", shard_of(i))]);
        assert_eq!(gated_by.get(&name), Some(&expected), "{name}: {gated_by:?}");
    }
    assert_eq!(gated_by.get("unsharded"), None, "no shard selects it");
    assert_eq!(
        condition(&s.client, &s.kind, &s.namespace, "unsharded").await,
        None,
        "no shard gates it"
    );
    for (operator, shard) in [(&a, "a"), (&b, "b")] {
        let evaluations = evaluations(operator, &s.check("meta")).await;
        assert!(
            (PER_SHARD as u64..2 * PER_SHARD as u64).contains(&evaluations),
            "shard {shard} evaluated {evaluations} times for {PER_SHARD} objects"
        );
    }
    a.stop().await;
    b.stop().await;
    s.remove().await;
}
