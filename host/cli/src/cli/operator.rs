//! `preflight operator`: gate Kubernetes objects with the checks found in ConfigMaps, until SIGTERM.

use super::{OperatorArgs, Problem};
use preflight_engine::{EngineConfig, Limits};
use preflight_operator::{CheckSelection, LeaderElection, Operator, OperatorConfig, ShardRing};

/// Starts the operator and runs it until SIGTERM or SIGINT, then shuts down gracefully.
pub async fn operator(args: OperatorArgs) -> Result<u8, Problem> {
    if args.default_memory_limit > args.max_memory {
        let size = |bytes: usize| bytesize::ByteSize(bytes as u64);
        return Err(Problem::Input(format!(
            "--default-memory-limit {} is above --max-memory {}: every check without a memoryLimit would be refused",
            size(args.default_memory_limit),
            size(args.max_memory)
        )));
    }
    if args.default_timeout.is_zero() {
        return Err(Problem::Input(
            "--default-timeout 0s: every check without a timeout would time out at once".to_owned(),
        ));
    }
    let client = kube::Client::try_default().await.map_err(|error| {
        Problem::Input(format!("cannot configure the Kubernetes client: {error}"))
    })?;
    let config = OperatorConfig {
        checks: CheckSelection {
            namespace: (!args.all_namespaces).then(|| args.namespace.clone()),
            label_selector: args.check_selector,
        },
        listen: args.listen,
        shard_ring: args.shard_ring.clone().map(|name| ShardRing {
            name,
            namespace: args.namespace.clone(),
            identity: args.pod_name.clone(),
            lease_duration: args.lease_duration,
        }),
        leader_election: (args.leader_election && args.shard_ring.is_none()).then(|| {
            LeaderElection {
                namespace: args.namespace.clone(),
                lease_name: args.lease_name,
                identity: args.pod_name.clone(),
                lease_duration: args.lease_duration,
            }
        }),
        default_limits: Limits {
            timeout: args.default_timeout,
            memory_bytes: args.default_memory_limit,
            ..Limits::default()
        },
        kept_components: args.cache_dir.as_ref().map(|dir| dir.join("components")),
        registry: args.registries.options()?,
        verify_keys: super::oci::verification_keys(&args.registries.verify_key)?,
        oci_cache: args.cache_dir.as_ref().map(|dir| dir.join("oci")),
        engine: EngineConfig {
            max_concurrent_evaluations: args.max_concurrent_evaluations,
            max_memory_bytes: args.max_memory,
            cache_dir: args.cache_dir,
            cache_max_bytes: args.cache_max_size as u64,
            ..EngineConfig::default()
        },
        kind_retry: args.kind_retry,
        controller_name: "preflight".into(),
        instance: Some(args.pod_name),
        shutdown_grace: args.shutdown_grace,
        hold_at_admission: args.hold_at_admission,
        watch_selector: args.watch_selector,
    };
    let operator = Operator::start(client, config)
        .await
        .map_err(Problem::Operator)?;
    tracing::info!(address = %operator.address, "serving /healthz, /readyz, /metrics");
    shutdown_signal().await;
    tracing::info!("shutting down");
    operator.stop().await;
    Ok(super::EXIT_PROCEED)
}

/// Resolves on SIGTERM (Kubernetes stopping the pod) or SIGINT (Ctrl-C).
async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut terminate) => {
            tokio::select! {
                _ = terminate.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(error) => {
            tracing::warn!(%error, "cannot listen for SIGTERM; stopping on Ctrl-C only");
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
