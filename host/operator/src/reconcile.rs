//! One object's reconcile: run the gate, record its outcome (condition, Events, outputs), set or withdraw the
//! kind's pause switch, and return the controller action the decision maps to.

use crate::condition::ConditionType;
use crate::context::KindContext;
use crate::events::{EventType, Notice};
use crate::gate::next_evaluation;
use crate::metrics::{KindLabels, ReconcileErrorLabels};
use crate::outputs;
use crate::pause::{self, PauseSync};
use crate::status_writer::{ConditionUpdate, Recorded};
use crate::vocabulary::CheckMode;
use kube::api::DynamicObject;
use kube::runtime::controller::Action as ControllerAction;
use kube::{Resource, ResourceExt};
use preflight_engine::action;
use std::sync::Arc;
use std::time::Duration;
use tracing::{info, warn};

/// How soon an object is retried after its outcome could not be written (an API error).
const RETRY_AFTER_API_ERROR: Duration = Duration::from_secs(5);

/// The reconcile error: the outcome could not be read or written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReconcileError {
    #[error("cannot record the outcome: {0}")]
    Write(#[from] kube::Error),
    #[error("cannot serialise the object: {0}")]
    Serialize(#[from] serde_json::Error),
    #[error("cannot set or withdraw the pause switch: {0}")]
    Pause(kube::Error),
    #[error("cannot record the checks' outputs: {0}")]
    Outputs(kube::Error),
}

impl ReconcileError {
    /// The `cause` label it is counted under (one of `RECONCILE_ERROR_CAUSES`).
    fn cause(&self) -> &'static str {
        match self {
            Self::Write(_) => "status-write",
            Self::Serialize(_) => "serialize",
            Self::Pause(_) => "pause",
            Self::Outputs(_) => "outputs-write",
        }
    }
}

/// The gate as a reconcile: evaluate, record, and return the action the decision maps to. Its span names
/// the object (`object` is its name: `name` is the span's own), so that the lines its checks log say which
/// object they were about.
#[tracing::instrument(skip_all, fields(kind = %context.kind, namespace = object.namespace().unwrap_or_default(), object = %object.name_any()))]
pub(crate) async fn reconcile(
    object: Arc<DynamicObject>,
    context: Arc<KindContext>,
) -> Result<ControllerAction, ReconcileError> {
    let uid = object.uid().unwrap_or_default();
    if let Some(shard) = &context.shared.shard
        && !shard.owns(&uid)
    {
        // Another replica of the ring gates it (this one did until the ring changed, perhaps).
        context.held.set(&uid, CheckMode::Enforce, false);
        context.held.set(&uid, CheckMode::Monitor, false);
        return Ok(ControllerAction::await_change());
    }
    let json = serde_json::to_value(object.as_ref())?;
    let result = context.shared.gate.evaluate(&context.kind, json).await;
    let metrics = &context.shared.metrics;
    metrics.record_runs(&context.label, &result.runs, CheckMode::Enforce);
    context
        .held
        .set(&uid, CheckMode::Enforce, !result.summary.proceed);
    let monitor = result.monitor.as_ref();
    if let Some(monitor) = monitor {
        metrics.record_runs(&context.label, &monitor.runs, CheckMode::Monitor);
    }
    context.held.set(
        &uid,
        CheckMode::Monitor,
        monitor.is_some_and(|monitor| !monitor.summary.proceed),
    );
    let updates = [
        ConditionUpdate {
            condition_type: ConditionType::Preflight,
            summary: Some(&result.summary),
            warning: is_failure(result.decision.action),
        },
        ConditionUpdate {
            condition_type: ConditionType::Monitor,
            summary: monitor.map(|monitor| &monitor.summary),
            warning: monitor.is_some_and(|monitor| is_failure(monitor.decision.action)),
        },
    ];
    let recorded = context
        .shared
        .writer
        .record_all(&context.resource, context.placement, &object, &updates)
        .await?;
    let mut writes = u64::from(recorded == Recorded::Written);
    for (placement, outputs) in result.outputs().unwrap_or_default() {
        let written = outputs::record(&context.api(&object), &object, &placement, &outputs)
            .await
            .map_err(ReconcileError::Outputs)?;
        writes += u64::from(written);
    }
    if writes > 0 {
        context
            .shared
            .metrics
            .status_writes
            .get_or_create(&KindLabels {
                kind: context.label.clone(),
            })
            .inc_by(writes);
    }
    sync_pause(&context, &object, result.summary.proceed).await?;
    tracing::debug!(
        action = result.decision.action.as_str(),
        reason = %result.summary.reason,
        written = recorded == Recorded::Written,
        "gated"
    );
    Ok(next_evaluation(
        result.decision.action,
        monitor.map(|monitor| monitor.decision.action),
    ))
}

/// Whether a decision is a failure (its Events are Warnings).
fn is_failure(action: action::Action) -> bool {
    matches!(action, action::Action::Backoff(_) | action::Action::Stop)
}

/// Sets or withdraws the kind's pause switch on `object` after its verdict (withdraws what the operator
/// still holds when its checks name no switch any more).
async fn sync_pause(
    context: &KindContext,
    object: &DynamicObject,
    proceed: bool,
) -> Result<(), ReconcileError> {
    let switch = context
        .pause
        .get(context.shared.gate.checks(), &context.kind);
    if switch.is_none() && !pause::holds_anything(object) {
        return Ok(());
    }
    let api = context.api(object);
    // Named only when something is logged: most reconciles change nothing.
    let named = || {
        switch
            .as_ref()
            .map_or_else(|| "none".to_owned(), ToString::to_string)
    };
    match pause::sync(
        &api,
        &context.resource,
        object,
        switch.as_ref(),
        proceed,
        &context.pause_conflicts,
    )
    .await
    .map_err(ReconcileError::Pause)?
    {
        PauseSync::Unchanged => {}
        PauseSync::Set => info!(switch = %named(), "paused its controller"),
        PauseSync::Withdrawn => info!(switch = %named(), "withdrew the pause"),
        PauseSync::OwnedElsewhere(conflict) => {
            let named = named();
            let note = format!(
                "the pause switch {named} is set to another value by another field manager; \
                 preflight leaves it alone and says so once, until its owners or its value change \
                 ({conflict})"
            );
            let notice = Notice {
                event_type: EventType::Warning,
                reason: "PauseOwnedElsewhere",
                note: &note,
                action: "Pause",
            };
            let reference = object.object_ref(&context.resource);
            context.shared.events.publish(&reference, &notice).await;
        }
    }
    Ok(())
}

/// Counts a reconcile that could not record its outcome and retries it after [`RETRY_AFTER_API_ERROR`].
pub(crate) fn error_policy(
    object: Arc<DynamicObject>,
    error: &ReconcileError,
    context: Arc<KindContext>,
) -> ControllerAction {
    warn!(kind = %context.kind, object = %object.name_any(), %error, "reconcile failed");
    context
        .shared
        .metrics
        .reconcile_errors
        .get_or_create(&ReconcileErrorLabels {
            kind: context.label.clone(),
            cause: error.cause().to_owned(),
        })
        .inc();
    ControllerAction::requeue(RETRY_AFTER_API_ERROR)
}

/// The reconcile against a mock API server (as kube-rs's controller-rs tests its reconcile): which requests
/// one evaluation makes, in which order, with what in them. A request the test does not answer blocks the
/// reconcile, so a reconcile that returns made no request but those answered.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::check_set::{CheckSet, KindSwitch, LoadedCheck};
    use crate::condition::{Placement, find};
    use crate::context::Shared;
    use crate::events::EventPublisher;
    use crate::gate::Gate;
    use crate::kind::GatedKind;
    use crate::metrics::Metrics;
    use crate::status_writer::StatusWriter;
    use crate::vocabulary::CheckSource;
    use http::{Method, Request, Response, StatusCode};
    use kube::Client;
    use kube::api::{ApiResource, GroupVersionKind};
    use kube::client::Body;
    use preflight_engine::{Engine, EngineConfig};
    use serde_json::{Value, json};
    use tower_test::mock;

    type Handle = mock::Handle<Request<Body>, Response<Body>>;

    fn resource() -> ApiResource {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("example.com", "v1", "App"),
            "apps",
        )
    }

    /// Object `shop`, with `labels` and the conditions `conditions` in its status.
    fn object(labels: Value, conditions: Value) -> Arc<DynamicObject> {
        let mut object = DynamicObject::new("shop", &resource()).within("ns");
        object.metadata.uid = Some("u1".into());
        object.metadata.generation = Some(1);
        object.metadata.resource_version = Some("7".into());
        object.metadata.labels = serde_json::from_value(labels).unwrap();
        object.data = json!({"spec": {}, "status": {"conditions": conditions}});
        Arc::new(object)
    }

    /// A kind context over the mock API with the `required-metadata` check asking for a `team` label, in
    /// `mode`.
    fn context(client: Client, mode: CheckMode) -> Arc<KindContext> {
        let engine = Arc::new(
            Engine::new(EngineConfig {
                max_concurrent_evaluations: 2,
                ..EngineConfig::default()
            })
            .unwrap(),
        );
        let kind = GatedKind::parse("App.example.com").unwrap();
        let mut source = CheckSource::new(
            "ns/meta",
            kind.clone(),
            preflight_test_support::check_bytes("required-metadata"),
        );
        source.settings.config = r#"{"labels": ["team"]}"#.into();
        source.settings.mode = mode;
        let checks = Arc::new(CheckSet::new());
        checks.install(LoadedCheck::load(&engine, source).unwrap());
        let events = EventPublisher::new(client.clone(), "preflight", None);
        let metrics = Arc::new(Metrics::default());
        let shared = Arc::new(Shared {
            client: client.clone(),
            gate: Arc::new(Gate::new(engine, checks)),
            writer: StatusWriter::new(client, events.clone()),
            events,
            metrics: metrics.clone(),
            kind_concurrency: 1,
            stop_grace: Duration::from_secs(1),
            hold_at_admission: false,
            installation: "ns".into(),
            record_namespace: None,
            watch_selector: None,
            shard: None,
            checks_synced: tokio::sync::watch::channel(true).1,
        });
        Arc::new(KindContext {
            shared,
            label: kind.to_string(),
            kind,
            resource: resource(),
            placement: Placement::Status,
            pause: KindSwitch::default(),
            pause_conflicts: Arc::default(),
            held: Arc::new(metrics.held_objects("App.example.com")),
        })
    }

    /// The next request, which must be `method` on `path`: its body, and where to answer it.
    async fn next(
        handle: &mut Handle,
        method: Method,
        path: &str,
    ) -> (Value, mock::SendResponse<Response<Body>>) {
        let (request, send) = handle.next_request().await.expect("a request");
        assert_eq!(
            (request.method(), request.uri().path()),
            (&method, path),
            "the next request"
        );
        let body = http_body_util::BodyExt::collect(request.into_body())
            .await
            .unwrap()
            .to_bytes();
        (serde_json::from_slice(&body).unwrap_or(Value::Null), send)
    }

    fn respond(send: mock::SendResponse<Response<Body>>, answer: &Value) {
        send.send_response(
            Response::builder()
                .status(StatusCode::OK)
                .body(Body::from(serde_json::to_vec(answer).unwrap()))
                .unwrap(),
        );
    }

    /// Answers the next request, an Event, and returns it.
    async fn answer_event(handle: &mut Handle) -> Value {
        let (event, send) = next(handle, Method::POST, EVENTS).await;
        respond(send, &json!({}));
        event
    }

    /// Answers the next request, a status PATCH, as the API server does: with `stored` carrying the patched
    /// status. Returns the patch.
    async fn answer_status_patch(handle: &mut Handle, mut stored: Value) -> Value {
        let (patch, send) = next(handle, Method::PATCH, STATUS).await;
        stored["status"] = patch["status"].clone();
        respond(send, &stored);
        patch
    }

    const EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/ns/events";
    const STATUS: &str = "/apis/example.com/v1/namespaces/ns/apps/shop/status";

    #[tokio::test]
    async fn a_held_object_gets_an_event_then_its_condition_and_waits_for_a_change() {
        let (service, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
        let context = context(Client::new(service, "default"), CheckMode::Enforce);
        let shop = object(json!({}), json!([]));
        let stored = serde_json::to_value(shop.as_ref()).unwrap();
        let server = tokio::spawn(async move {
            let event = answer_event(&mut handle).await;
            let patch = answer_status_patch(&mut handle, stored).await;
            (event, patch)
        });
        let action = reconcile(shop, context.clone()).await;
        let (event, patch) = server.await.unwrap();
        assert_eq!(action.unwrap(), ControllerAction::await_change());
        assert_eq!(event["reason"], "RequiredMetadataMissing");
        assert_eq!(patch["metadata"]["resourceVersion"], "7", "guarded");
        let written = find(
            patch.pointer("/status/conditions"),
            ConditionType::Preflight,
        )
        .unwrap();
        assert_eq!(
            (written.status.as_str(), written.reason.as_str()),
            ("False", "RequiredMetadataMissing")
        );
        assert!(
            context
                .shared
                .metrics
                .render()
                .contains("preflight_objects_held{kind=\"App.example.com\",mode=\"enforce\"} 1")
        );
    }

    #[tokio::test]
    async fn an_object_that_already_says_the_verdict_costs_no_request() {
        let (service, _handle) = mock::pair::<Request<Body>, Response<Body>>();
        let context = context(Client::new(service, "default"), CheckMode::Enforce);
        let condition = json!({"type": "Preflight", "status": "True",
            "reason": "RequiredMetadataPresent", "message": "meta: all required labels and annotations are set",
            "observedGeneration": 1, "lastTransitionTime": "2026-12-04T07:00:00Z"});
        let shop = object(json!({"team": "payments"}), json!([condition]));
        // Nobody answers: a request would block the reconcile until the timeout.
        let action =
            tokio::time::timeout(Duration::from_secs(10), reconcile(shop, context.clone()))
                .await
                .expect("no request made")
                .unwrap();
        assert_eq!(action, ControllerAction::await_change());
        assert!(context.shared.metrics.render().contains(
            "preflight_evaluations_total{kind=\"App.example.com\",check=\"ns/meta\",mode=\"enforce\",outcome=\"proceed\"} 1"
        ));
    }

    #[tokio::test]
    async fn a_monitored_check_records_beside_a_true_preflight_in_one_write() {
        let (service, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
        let context = context(Client::new(service, "default"), CheckMode::Monitor);
        let shop = object(json!({}), json!([]));
        let stored = serde_json::to_value(shop.as_ref()).unwrap();
        let server = tokio::spawn(async move {
            let first = answer_event(&mut handle).await;
            let second = answer_event(&mut handle).await;
            let patch = answer_status_patch(&mut handle, stored).await;
            (first, second, patch)
        });
        reconcile(shop, context.clone()).await.unwrap();
        let (first, second, patch) = server.await.unwrap();
        assert_eq!(
            (&first["action"], &first["reason"]),
            (&json!("Preflight"), &json!("NoChecks"))
        );
        assert_eq!(
            (&second["action"], &second["reason"]),
            (&json!("Monitor"), &json!("RequiredMetadataMissing"))
        );
        let conditions = patch.pointer("/status/conditions");
        assert!(
            find(conditions, ConditionType::Preflight)
                .unwrap()
                .is_true()
        );
        assert!(!find(conditions, ConditionType::Monitor).unwrap().is_true());
        let metrics = context.shared.metrics.render();
        for sample in [
            "preflight_objects_held{kind=\"App.example.com\",mode=\"enforce\"} 0",
            "preflight_objects_held{kind=\"App.example.com\",mode=\"monitor\"} 1",
            "preflight_evaluations_total{kind=\"App.example.com\",check=\"ns/meta\",mode=\"monitor\",outcome=\"not-proceed\"} 1",
        ] {
            assert!(metrics.contains(sample), "{sample} in:\n{metrics}");
        }
    }
}
