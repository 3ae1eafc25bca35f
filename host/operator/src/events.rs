//! Events (events.k8s.io/v1) where `kubectl describe` shows them: one Event per distinct note on an object,
//! so that later news with an earlier reason is never hidden in an older Event's series.
//!
//! kube's `Recorder` folds every Event with the same type, reason and action on an object into one series
//! that keeps the first note; a check that waits first for one dependency and then for another would show
//! only the first. Here an Event's name is derived from what it says (object, type, reason, action, note):
//! a new note makes a new Event, the same note again counts in that Event's series. The name also makes
//! publishing idempotent, which is what makes Events at-least-once across a crash: the operator publishes a
//! transition's Event before it writes the condition, and after a crash between the two, the restarted
//! operator publishes the same Event again, which only counts it again instead of creating a second one.

use crate::field_managers::{patch_params, post_params};
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, Patch};
use serde_json::json;
use sha2::{Digest as _, Sha256};

/// Longest Event note the API server accepts.
const MAX_NOTE_BYTES: usize = 1024;
/// Longest Event reason the API server accepts (a condition reason may be longer).
const MAX_REASON_BYTES: usize = 128;
/// Longest object name that leaves room for the note's digest in an Event name (253 bytes).
const MAX_NAME_PREFIX_BYTES: usize = 253 - 17;

/// Normal or Warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventType {
    /// Waiting or proceeding: how things should be.
    Normal,
    /// A failure someone should look at.
    Warning,
}

impl EventType {
    fn as_str(self) -> &'static str {
        match self {
            Self::Normal => "Normal",
            Self::Warning => "Warning",
        }
    }
}

/// What an Event says.
#[derive(Debug, Clone)]
pub(crate) struct Notice<'a> {
    /// Normal or Warning.
    pub event_type: EventType,
    /// UpperCamelCase reason; clipped to the API server's limit.
    pub reason: &'a str,
    /// What happened, for people; clipped to the API server's limit.
    pub note: &'a str,
    /// What the operator was doing (`Preflight`, `LoadCheck`).
    pub action: &'a str,
}

/// Publishes Events as one controller instance.
#[derive(Clone)]
pub(crate) struct EventPublisher {
    client: Client,
    controller: String,
    instance: String,
}

impl EventPublisher {
    /// A publisher reporting as `controller`, instance `instance` (the pod name; the controller when none).
    pub fn new(client: Client, controller: &str, instance: Option<String>) -> Self {
        Self {
            client,
            controller: controller.to_owned(),
            instance: instance.unwrap_or_else(|| controller.to_owned()),
        }
    }

    /// Publishes `notice` about `regarding`: creates its Event, or counts it again in the Event's series
    /// when the same notice was published before. An Event that cannot be published is logged, never an
    /// error of the caller: the condition, not the Event, is the record.
    pub async fn publish(&self, regarding: &ObjectReference, notice: &Notice<'_>) {
        if let Err(error) = self.try_publish(regarding, notice).await {
            tracing::warn!(
                %error,
                kind = regarding.kind.as_deref().unwrap_or_default(),
                object = regarding.name.as_deref().unwrap_or_default(),
                reason = notice.reason,
                "cannot publish an Event"
            );
        }
    }

    async fn try_publish(
        &self,
        regarding: &ObjectReference,
        notice: &Notice<'_>,
    ) -> Result<(), kube::Error> {
        let namespace = regarding.namespace.as_deref().unwrap_or("default");
        let events: Api<Event> = Api::namespaced(self.client.clone(), namespace);
        let reason = clip(notice.reason, MAX_REASON_BYTES);
        let note = clip(notice.note, MAX_NOTE_BYTES);
        let name = event_name(regarding, notice.event_type, &reason, notice.action, &note);
        let now = MicroTime(Timestamp::now());
        let event = Event {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace.to_owned()),
                ..ObjectMeta::default()
            },
            action: Some(notice.action.to_owned()),
            event_time: Some(now.clone()),
            note: Some(note),
            reason: Some(reason),
            regarding: Some(regarding.clone()),
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(self.instance.clone()),
            type_: Some(notice.event_type.as_str().to_owned()),
            ..Event::default()
        };
        match events.create(&post_params(), &event).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 409 => {
                let existing = events.get(&name).await?;
                let count = existing.series.map_or(2, |series| series.count + 1);
                let series = json!({"series": {"count": count, "lastObservedTime": now}});
                events
                    .patch(&name, &patch_params(), &Patch::Merge(series))
                    .await
                    .map(drop)
            }
            Err(error) => Err(error),
        }
    }

    /// Publishes a Warning Event on a check's ConfigMap (`namespace/name`): where the author of a broken
    /// check looks (`kubectl describe configmap`). Each distinct problem is its own Event. The Event names
    /// the ConfigMap's uid, read here: `kubectl describe` selects Events by the object's uid, and shows none
    /// that lack it (`kubectl events --for` would).
    pub async fn warn_on_config_map(&self, check: &str, reason: &str, note: &str) {
        let (namespace, name) = check.split_once('/').unwrap_or(("", check));
        let config_maps: Api<ConfigMap> = Api::namespaced(self.client.clone(), namespace);
        let uid = match config_maps.get_metadata_opt(name).await {
            Ok(found) => found.and_then(|config_map| config_map.metadata.uid),
            Err(error) => {
                tracing::debug!(%error, check, "reading the ConfigMap's uid for its Event");
                None
            }
        };
        let reference = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("ConfigMap".into()),
            namespace: Some(namespace.to_owned()),
            name: Some(name.to_owned()),
            uid,
            ..ObjectReference::default()
        };
        let notice = Notice {
            event_type: EventType::Warning,
            reason,
            note,
            action: "LoadCheck",
        };
        self.publish(&reference, &notice).await;
    }
}

/// `<object name>.<16 hex digits>`: the digits are a digest of the object's identity and of everything the
/// Event says, so the same notice always has the same name and a different one never does.
fn event_name(
    regarding: &ObjectReference,
    event_type: EventType,
    reason: &str,
    action: &str,
    note: &str,
) -> String {
    let mut digest = Sha256::new();
    let fields = [
        regarding.uid.as_deref().unwrap_or_default(),
        regarding.api_version.as_deref().unwrap_or_default(),
        regarding.kind.as_deref().unwrap_or_default(),
        regarding.namespace.as_deref().unwrap_or_default(),
        regarding.name.as_deref().unwrap_or_default(),
        event_type.as_str(),
        reason,
        action,
        note,
    ];
    for field in fields {
        digest.update(field.as_bytes());
        digest.update([0]);
    }
    let object = clip(
        regarding.name.as_deref().unwrap_or("object"),
        MAX_NAME_PREFIX_BYTES,
    );
    format!("{object}.{}", hex::encode(&digest.finalize()[..8]))
}

/// `text` cut to at most `max` bytes, on a character boundary.
fn clip(text: &str, max: usize) -> String {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(name: &str) -> ObjectReference {
        ObjectReference {
            api_version: Some("example.com/v1".into()),
            kind: Some("App".into()),
            namespace: Some("shop".into()),
            name: Some(name.into()),
            uid: Some("4b6c".into()),
            ..ObjectReference::default()
        }
    }

    #[test]
    fn a_notice_keeps_its_name_and_another_note_gets_another() {
        let name = |object: &str, note: &str| {
            event_name(
                &reference(object),
                EventType::Normal,
                "DependencyMissing",
                "Preflight",
                note,
            )
        };
        let first = name("web", "waiting for redis");
        assert_eq!(first, name("web", "waiting for redis"));
        assert!(
            first.starts_with("web.") && first.len() == "web.".len() + 16,
            "{first}"
        );
        assert_ne!(first, name("web", "waiting for postgres"));
        assert_ne!(first, name("api", "waiting for redis"));
        let warning = event_name(
            &reference("web"),
            EventType::Warning,
            "DependencyMissing",
            "Preflight",
            "waiting for redis",
        );
        assert_ne!(first, warning);
        assert!(name(&"n".repeat(253), "x").len() <= 253);
    }

    #[test]
    fn clips_on_a_character_boundary() {
        assert_eq!(clip("short", 128), "short");
        assert_eq!(clip("ééé", 5), "éé");
        assert_eq!(clip(&"x".repeat(2000), 1024).len(), 1024);
    }
}
