//! The kinds this installation gates, recorded in a ConfigMap of its own (`preflight-gated-kinds`, data
//! `kinds`), so that a kind whose last check went while no operator ran (deleted by a GitOps prune during an
//! upgrade, say) still has its objects released: the next operator to lead reads which kinds the earlier
//! one gated, and releases those no check gates any more, as it does for a check deleted while it runs. A
//! kind is recorded before its controller starts and forgotten only once its objects are released, so a
//! crash in between forgets nothing.

use crate::field_managers::FIELD_MANAGER;
use crate::kind::GatedKind;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use std::collections::BTreeSet;
use tracing::warn;

/// The record's name, in the namespace of the check ConfigMaps (or, with checks in every namespace, of the
/// Lease). It carries no `preflight.dev/gates` label: it is no check.
pub const RECORD_NAME: &str = "preflight-gated-kinds";
/// The data key holding the kinds, one `Kind.group` per line.
const KINDS_KEY: &str = "kinds";

/// The record of one installation, as this operator last wrote it.
pub(crate) struct GatedRecord {
    api: Option<Api<ConfigMap>>,
    /// Whether the earlier run's record was read: until then nothing is written, so that nothing an
    /// earlier run recorded is overwritten unread.
    read: bool,
    written: Option<BTreeSet<GatedKind>>,
    failing: Option<String>,
}

impl GatedRecord {
    /// The record in `namespace`; `None` keeps no record (an earlier run's kinds are then released only
    /// while an operator runs).
    pub fn new(client: &Client, namespace: Option<&str>) -> Self {
        Self {
            api: namespace.map(|namespace| Api::namespaced(client.clone(), namespace)),
            read: false,
            written: None,
            failing: None,
        }
    }

    /// The kinds an earlier run recorded (none when there is no record yet), once: `None` after they were
    /// read, and while the record cannot be read (each call tries again).
    pub async fn earlier(&mut self) -> Option<BTreeSet<GatedKind>> {
        if self.read {
            return None;
        }
        let Some(api) = &self.api else {
            self.read = true;
            return Some(BTreeSet::new());
        };
        match api.get_opt(RECORD_NAME).await {
            Ok(record) => {
                self.read = true;
                let text = record
                    .and_then(|record| record.data?.remove(KINDS_KEY))
                    .unwrap_or_default();
                Some(parse(&text))
            }
            Err(error) => {
                self.failed(format!("cannot read it (tried again): {error}"));
                None
            }
        }
    }

    /// Whether the earlier run's record was read ([`Self::earlier`]).
    pub fn is_read(&self) -> bool {
        self.read
    }

    /// Records `kinds` (by server-side apply), unless they are what this operator last wrote, or the
    /// earlier run's record is still unread.
    pub async fn keep(&mut self, kinds: BTreeSet<GatedKind>) {
        let Some(api) = self.api.as_ref().filter(|_| self.read) else {
            return;
        };
        if self.written.as_ref() == Some(&kinds) {
            return;
        }
        let record = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": RECORD_NAME},
            "data": {KINDS_KEY: format(&kinds)},
        });
        let params = PatchParams::apply(FIELD_MANAGER).force();
        match api.patch(RECORD_NAME, &params, &Patch::Apply(record)).await {
            Ok(_) => {
                self.written = Some(kinds);
                self.failing = None;
            }
            Err(error) => self.failed(format!("cannot write it: {error}")),
        }
    }

    /// Says once per distinct problem that the record cannot be kept.
    fn failed(&mut self, problem: String) {
        if self.failing.as_ref() != Some(&problem) {
            warn!(
                record = RECORD_NAME,
                %problem,
                "the record of gated kinds: objects of a kind whose last check is deleted while no \
                 operator runs stay held"
            );
            self.failing = Some(problem);
        }
    }
}

/// The record's text: one `Kind.group` per line, sorted.
fn format(kinds: &BTreeSet<GatedKind>) -> String {
    kinds.iter().map(|kind| format!("{kind}\n")).collect()
}

/// The kinds in a record's text; a line that names no kind (edited by hand) is skipped.
fn parse(text: &str) -> BTreeSet<GatedKind> {
    text.lines().filter_map(GatedKind::parse).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_reads_back_what_it_wrote_and_skips_what_names_no_kind() {
        let kinds: BTreeSet<GatedKind> = ["Deployment.apps", "ConfigMap", "App.apps.example.com"]
            .into_iter()
            .filter_map(GatedKind::parse)
            .collect();
        assert_eq!(kinds.len(), 3);
        let text = format(&kinds);
        assert_eq!(text, "ConfigMap\nDeployment.apps\nApp.apps.example.com\n");
        assert_eq!(parse(&text), kinds);
        assert_eq!(parse(&format!("{text}\n  \n.\n")), kinds);
        assert!(parse("").is_empty());
    }
}
