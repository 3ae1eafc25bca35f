//! A minimal kube-rs operator that puts the preflight gate at the top of its own reconcile: library mode.
//!
//! It reconciles `App.apps.example.com` objects (`deploy/examples/crd.yaml`) and only when the check lets
//! them through; otherwise it returns the gate's action (requeue after the check's delay, wait for a change,
//! or back off). Run it against any cluster with the CRD applied:
//!
//! ```sh
//! cargo run -p preflight-operator --example gated_operator -- CHECK.wasm '{"available": ["postgres-main"]}'
//! ```

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use preflight_operator::engine::{Engine, EngineConfig};
use preflight_operator::{CheckSet, CheckSource, Gate, GatedKind, LoadedCheck, controller_action};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

struct Context {
    client: Client,
    gate: Gate,
    kind: GatedKind,
    resource: ApiResource,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let check = args
        .next()
        .ok_or("usage: gated_operator CHECK.wasm [CONFIG_JSON]")?;
    let config = args.next().unwrap_or_else(|| "{}".into());

    // Load the check once, off the reconcile path.
    let engine = Arc::new(Engine::new(EngineConfig::default())?);
    let kind = GatedKind::parse("App.apps.example.com").ok_or("invalid kind")?;
    let mut source = CheckSource::new("local/check", kind.clone(), std::fs::read(&check)?);
    source.settings.config = config;
    let checks = Arc::new(CheckSet::new());
    checks.install(LoadedCheck::load(&engine, source).map_err(|rejection| rejection.problem)?);

    let client = Client::try_default().await?;
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("apps.example.com", "v1", "App"));
    let context = Arc::new(Context {
        client: client.clone(),
        gate: Gate::new(engine, checks),
        kind,
        resource: resource.clone(),
    });
    Controller::new_with(
        Api::<DynamicObject>::all_with(client, &resource),
        watcher::Config::default(),
        resource,
    )
    .run(
        reconcile,
        |_, _, _| Action::requeue(Duration::from_secs(5)),
        context,
    )
    .for_each(|_| async {})
    .await;
    Ok(())
}

async fn reconcile(app: Arc<DynamicObject>, context: Arc<Context>) -> Result<Action, kube::Error> {
    // 1. The gate: not now? Return its action.
    let object = serde_json::to_value(app.as_ref()).map_err(kube::Error::SerdeError)?;
    let gated = context.gate.evaluate(&context.kind, object).await;
    if !gated.proceed() {
        println!(
            "{}: not now: {} ({})",
            app.name_any(),
            gated.summary.reason,
            gated.summary.message
        );
        return Ok(controller_action(gated.decision.action));
    }

    // 2. Your reconcile.
    let api: Api<DynamicObject> = Api::namespaced_with(
        context.client.clone(),
        &app.namespace().unwrap_or_default(),
        &context.resource,
    );
    let status = json!({"status": {"phase": "Reconciled"}});
    api.patch_status(
        &app.name_any(),
        &PatchParams::default(),
        &Patch::Merge(status),
    )
    .await?;
    println!("{}: reconciled", app.name_any());
    Ok(controller_action(gated.decision.action))
}
