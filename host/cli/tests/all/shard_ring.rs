//! Automatic sharding with real `preflight operator` processes against the real kube-apiserver: three
//! replicas of one shard ring share 3,000 objects, each gated by exactly one of them (counted from each
//! replica's evaluation metrics) in shares within ±15 % of a third, with no writes once converged; a fourth
//! replica joining moves at most about 30 % of the objects; a replica killed with SIGKILL has its objects
//! gated again by the others within the lease duration plus 5 s; a replica cut off from the API server
//! stops gating, the others take over, and when it returns it does not overwrite their newer conditions.

use crate::operator_support::*;
use futures::{StreamExt, stream};
use preflight_kube_harness::{eventually, kubeconfig};
use preflight_test_support::LoopbackProxy;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const OBJECTS: usize = 3000;
const LEASE: Duration = Duration::from_secs(6);

/// A replica: the operator process and where it serves /metrics.
struct Replica {
    child: Child,
    address: SocketAddr,
}

impl Replica {
    fn start(namespace: &str, name: &str) -> Self {
        Self::start_with(namespace, name, kubeconfig())
    }

    /// A replica that reaches the API server with `config`.
    fn start_with(namespace: &str, name: &str, config: &Path) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        drop(listener);
        let child = Command::new(env!("CARGO_BIN_EXE_preflight"))
            .args(["operator", "--namespace", namespace, "--pod-name", name])
            .args(["--shard-ring", "gates", "--lease-duration", "6s"])
            .args(["--listen", &address.to_string()])
            .env("KUBECONFIG", config)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .spawn()
            .expect("the preflight binary starts");
        Self { child, address }
    }

    async fn metric(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        metric_at(self.address, name, labels).await
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A scenario whose kind is gated by the required-metadata check `meta` (asking for a `team` label), with
/// the check's and the kind's names as metrics label them.
async fn scenario(name: &str, kind: &str) -> (Scenario, String, String) {
    let s = Scenario::new(name, kind, "required-metadata").await;
    s.put("meta", &[("config", r#"{"labels": ["team"]}"#)])
        .await;
    let (check, kind) = (s.check("meta"), s.kind.gates());
    (s, check, kind)
}

/// Waits until every replica sees `members` live members.
async fn ring_of(replicas: &[&Replica], members: usize) {
    eventually(
        &format!("every replica to see {members} ring members"),
        Duration::from_secs(60),
        || async {
            for replica in replicas {
                let listening = tokio::net::TcpStream::connect(replica.address)
                    .await
                    .is_ok();
                let seen = match listening {
                    true => replica.metric("preflight_shard_ring_members", &[]).await,
                    false => 0.0,
                };
                if seen != members as f64 {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    return None;
                }
            }
            Some(())
        },
    )
    .await;
}

/// Creates `count` objects named `PREFIX0000`… and waits until `replicas` evaluated as many times.
async fn create_and_gate(
    s: &Scenario,
    prefix: &str,
    count: usize,
    replicas: &[&Replica],
    evaluated: &[(&str, &str)],
) {
    stream::iter(0..count)
        .for_each_concurrent(16, |i| async move {
            s.create(&format!("{prefix}{i:04}"), &[]).await;
        })
        .await;
    eventually(
        "every object to be gated",
        Duration::from_secs(300),
        || async {
            let sum = total(replicas, "preflight_evaluations_total", evaluated).await;
            tokio::time::sleep(Duration::from_millis(200)).await;
            (sum >= count as f64).then_some(())
        },
    )
    .await;
}

/// Waits, at most the lease duration plus 5 s, until `replicas` evaluated `orphans` more times than
/// `before`: the objects of a replica gone were gated by them. Returns the seconds it took.
async fn taken_over(
    replicas: &[&Replica],
    evaluated: &[(&str, &str)],
    before: f64,
    orphans: f64,
) -> f64 {
    let started = Instant::now();
    eventually(
        "the others to gate the objects of a replica gone",
        LEASE + Duration::from_secs(5),
        || async {
            let after = total(replicas, "preflight_evaluations_total", evaluated).await;
            tokio::time::sleep(Duration::from_millis(100)).await;
            (after - before >= orphans).then_some(())
        },
    )
    .await;
    started.elapsed().as_secs_f64()
}

/// Each replica's resident memory (VmRSS), in KiB.
fn resident_kib(replicas: &[&Replica]) -> Vec<u64> {
    replicas
        .iter()
        .map(|replica| {
            let status = std::fs::read_to_string(format!("/proc/{}/status", replica.child.id()))
                .unwrap_or_default();
            status
                .lines()
                .find_map(|line| line.strip_prefix("VmRSS:"))
                .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
                .unwrap_or_default()
        })
        .collect()
}

/// The replicas' sum of `metric` with `labels`.
async fn total(replicas: &[&Replica], metric: &str, labels: &[(&str, &str)]) -> f64 {
    let mut sum = 0.0;
    for replica in replicas {
        sum += replica.metric(metric, labels).await;
    }
    sum
}

/// Waits until the replicas' shares (counted every few seconds) add up to every object.
async fn settled(replicas: &[&Replica], owned: &[(&str, &str)]) {
    settled_on(replicas, owned, OBJECTS).await;
}

/// Waits until the replicas' shares add up to `objects`.
async fn settled_on(replicas: &[&Replica], owned: &[(&str, &str)], objects: usize) {
    eventually(
        "the shares to add up to every object",
        Duration::from_secs(30),
        || async {
            let sum = total(replicas, "preflight_shard_objects", owned).await;
            tokio::time::sleep(Duration::from_millis(200)).await;
            (sum == objects as f64).then_some(())
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ring_of_replicas_shares_objects_and_takes_over_a_killed_ones() {
    let (s, check, kind) = scenario("ring", "Ledger").await;
    let evaluated = [("check", check.as_str())];
    let owned = [("kind", kind.as_str())];
    let replicas: Vec<Replica> = (0..3)
        .map(|i| Replica::start(&s.namespace, &format!("ring-{i}")))
        .collect();
    let three: Vec<&Replica> = replicas.iter().collect();
    ring_of(&three, 3).await;
    let idle = resident_kib(&three);

    create_and_gate(&s, "o", OBJECTS, &three, &evaluated).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut shares = Vec::new();
    for replica in &three {
        shares.push(
            replica
                .metric("preflight_evaluations_total", &evaluated)
                .await,
        );
    }
    println!("evaluations per replica: {shares:?}");
    let busy = resident_kib(&three);
    println!(
        "resident memory per replica (KiB), with no objects: {idle:?}, watching all {OBJECTS}: {busy:?}"
    );
    assert_eq!(
        shares.iter().sum::<f64>(),
        OBJECTS as f64,
        "each object gated by exactly one replica"
    );
    for share in &shares {
        let third = OBJECTS as f64 / 3.0;
        assert!(
            (share - third).abs() <= 0.15 * third,
            "{share} of {OBJECTS}: {shares:?}"
        );
    }
    settled(&three, &owned).await;

    // Converged: no writes at all.
    let writes = total(&three, "preflight_status_writes_total", &owned).await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        total(&three, "preflight_status_writes_total", &owned).await,
        writes
    );

    // A fourth replica joins: only the objects it now wins move to it.
    let fourth = Replica::start(&s.namespace, "ring-3");
    let four: Vec<&Replica> = replicas.iter().chain([&fourth]).collect();
    ring_of(&four, 4).await;
    settled(&four, &owned).await;
    let moved = total(
        &three,
        "preflight_shard_moves_total",
        &[("direction", "out")],
    )
    .await;
    let among_old = total(
        &three,
        "preflight_shard_moves_total",
        &[("direction", "in")],
    )
    .await;
    let to_fourth = fourth.metric("preflight_shard_objects", &owned).await;
    println!("a fourth replica joined: {moved} objects moved, {to_fourth} to it");
    assert_eq!(
        moved, to_fourth,
        "what the others gave up is what the new replica owns"
    );
    assert_eq!(among_old, 0.0, "no object moved between the old replicas");
    assert!(moved <= 0.30 * OBJECTS as f64, "{moved} of {OBJECTS} moved");

    // SIGKILL one: its objects are gated by the others within the lease duration plus 5 s.
    let mut replicas = replicas;
    let mut killed = replicas.remove(1);
    let orphans = killed.metric("preflight_shard_objects", &owned).await;
    let survivors: Vec<&Replica> = replicas.iter().chain([&fourth]).collect();
    let before = total(&survivors, "preflight_evaluations_total", &evaluated).await;
    killed.child.kill().unwrap();
    killed.child.wait().unwrap();
    let took = taken_over(&survivors, &evaluated, before, orphans).await;
    println!("{orphans} objects of a killed replica gated again after {took:.1} s");
    settled(&survivors, &owned).await;
    drop(survivors);
    drop(fourth);
    drop(replicas);
    s.remove().await;
}

/// The admin kubeconfig, reaching the API server through `proxy` instead.
fn kubeconfig_through(proxy: &LoopbackProxy, dir: &Path) -> PathBuf {
    let admin = std::fs::read_to_string(kubeconfig()).unwrap();
    let server = admin
        .lines()
        .find_map(|line| line.trim().strip_prefix("server: "))
        .expect("the kubeconfig names its server")
        .to_owned();
    let through = admin.replace(&server, &format!("https://{}", proxy.address()));
    let path = dir.join("through-proxy.kubeconfig");
    std::fs::write(&path, through).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_cut_off_from_the_api_server_stops_gating_and_returns_without_overwriting() {
    const SMALL: usize = 300;
    let (s, check, kind) = scenario("partition", "Journal").await;
    let evaluated = [("check", check.as_str())];
    let owned = [("kind", kind.as_str())];
    let server = std::fs::read_to_string(kubeconfig()).unwrap();
    let server = server
        .lines()
        .find_map(|line| line.trim().strip_prefix("server: https://"))
        .unwrap()
        .parse()
        .unwrap();
    let proxy = LoopbackProxy::start(server);
    let dir = tempfile::tempdir().unwrap();
    let cut_off = Replica::start_with(
        &s.namespace,
        "cut-0",
        &kubeconfig_through(&proxy, dir.path()),
    );
    let others = [
        Replica::start(&s.namespace, "kept-1"),
        Replica::start(&s.namespace, "kept-2"),
    ];
    let all = [&cut_off, &others[0], &others[1]];
    let kept = [&others[0], &others[1]];
    ring_of(&all, 3).await;
    create_and_gate(&s, "j", SMALL, &all, &evaluated).await;
    let share = cut_off
        .metric("preflight_evaluations_total", &evaluated)
        .await;
    assert!(share > 0.0, "the replica to cut off gates a share");

    // Cut off: it leaves the ring once it no longer sees its own Lease renewed, and the others gate its
    // objects within the lease duration plus 5 s.
    let before = total(&kept, "preflight_evaluations_total", &evaluated).await;
    proxy.cut();
    let took = taken_over(&kept, &evaluated, before, share).await;
    println!("a cut-off replica's objects gated by the others after {took:.1} s");
    eventually(
        "the cut-off replica to leave the ring",
        LEASE + Duration::from_secs(5),
        || async {
            let members = cut_off.metric("preflight_shard_ring_members", &[]).await;
            tokio::time::sleep(Duration::from_millis(100)).await;
            (members == 0.0).then_some(())
        },
    )
    .await;

    // Meanwhile every object gets the label the check asks for: the others gate all of them True.
    let api = s.kind.api(&s.client, &s.namespace);
    stream::iter(0..SMALL)
        .for_each_concurrent(16, |i| {
            let s = &s;
            async move {
                s.label(&format!("j{i:04}"), "team", "ledger").await;
            }
        })
        .await;
    let all_proceed = || async {
        let objects = api.list(&Default::default()).await.ok()?.items;
        let proceeding = objects
            .iter()
            .filter(|object| {
                preflight_operator::condition_of(object)
                    .is_some_and(|condition| condition.status == "True")
            })
            .count();
        tokio::time::sleep(Duration::from_millis(200)).await;
        (proceeding == SMALL).then_some(())
    };
    eventually(
        "the others to let every object proceed",
        Duration::from_secs(60),
        all_proceed,
    )
    .await;

    // Back: it rejoins and gates its share again, from the objects as they are now.
    let writes_before = total(&all, "preflight_status_writes_total", &owned).await;
    proxy.restore();
    ring_of(&all, 3).await;
    settled_on(&all, &owned, SMALL).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    eventually(
        "every object to still proceed",
        Duration::from_secs(5),
        all_proceed,
    )
    .await;
    assert_eq!(
        total(&all, "preflight_status_writes_total", &owned).await,
        writes_before,
        "the returning replica found every condition already right: no write"
    );
    drop(others);
    drop(cut_off);
    s.remove().await;
}
