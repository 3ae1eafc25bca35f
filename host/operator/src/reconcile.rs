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
    let json = serde_json::to_value(object.as_ref())?;
    let result = context.shared.gate.evaluate(&context.kind, json).await;
    let metrics = &context.shared.metrics;
    metrics.record_runs(&context.label, &result.runs, CheckMode::Enforce);
    let uid = object.uid().unwrap_or_default();
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
