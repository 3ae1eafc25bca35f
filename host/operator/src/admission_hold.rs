//! Hold at admission: for each gated kind with a pause switch, a MutatingAdmissionPolicy (and its binding)
//! that sets the switch in the request that creates an object, or that changes its data, so that the kind's
//! controller never sees it unpaused before a check said yes. A switch set after creation loses that race: a
//! Deployment's ReplicaSet is written milliseconds after the Deployment.
//!
//! What the policy does, in the API server, for CREATE and UPDATE of the kind's resource (not its `status`
//! or `scale` subresources):
//! - it matches only when the switch does not already say pause (a pause someone set is left as it is);
//! - on UPDATE, only when something outside `metadata`, `status` and the switch itself changed: a change of
//!   the object's data (a template, an image) gives it a new generation, for which no check has said
//!   proceed yet; an annotation or label edit changes nothing the controller acts on, and is not held;
//! - it sets the switch and [`HELD_AT_ADMISSION_ANNOTATION`] (the mark), which tells the operator that the
//!   pause is preflight's: the operator takes the switch over as its own field manager and withdraws both
//!   when the checks proceed, at once when they proceed from the start.
//!
//! An admission policy cannot name a field manager: what it sets belongs to no one (a field the API server
//! defaults, such as a Job's `spec.suspend`, to the creator). The mark is what makes release certain. A
//! pause a person sets without the mark is never the operator's to release; one set while the mark is there
//! cannot be told from preflight's (set it by server-side apply under your own field manager to keep it).
//!
//! `failurePolicy: Ignore`: should the policy fail to evaluate, the request is admitted unpaused and the
//! operator sets the switch right after creation (the race above), rather than every create of the kind
//! being refused. The policies are labelled `app.kubernetes.io/managed-by: preflight`, installed by
//! server-side apply under [`FIELD_MANAGER`](crate::FIELD_MANAGER), replaced when the switch changes and
//! deleted when the kind's last check goes (or hold at admission is turned off); they stay while the
//! operator is down, so that nothing rolls out unchecked meanwhile.

use crate::api_answer::api_answer;
use crate::field_managers::FIELD_MANAGER;
use crate::pause::{HELD_AT_ADMISSION_ANNOTATION, PauseSwitch, SwitchTarget};
use crate::vocabulary::ObjectSelector;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use tracing::info;

/// The label every policy and binding the operator installs carries (and the value), to find them again.
const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "preflight");

/// The label naming the installation (the namespace of its check ConfigMaps) that owns a policy: an
/// operator removes only its own installation's leftovers.
const INSTALLATION_LABEL: &str = "preflight.dev/checks-namespace";

/// The API group and version of admission policies (GA and served by default since Kubernetes 1.36).
const POLICY_API: (&str, &str) = ("admissionregistration.k8s.io", "v1");

/// Top-level fields an UPDATE may change without being held: they are not the object's data.
const NOT_DATA: [&str; 4] = ["metadata", "status", "apiVersion", "kind"];

/// CEL's reserved words, which cannot name a field in an apply configuration.
const RESERVED: [&str; 21] = [
    "as",
    "break",
    "const",
    "continue",
    "else",
    "false",
    "for",
    "function",
    "if",
    "import",
    "in",
    "let",
    "loop",
    "namespace",
    "null",
    "package",
    "return",
    "true",
    "var",
    "void",
    "while",
];

/// The admission policy and binding that hold one kind's objects, ready to apply.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HoldPolicy {
    /// The name of both the policy and its binding: `preflight-hold.<plural>.<group>` (`core` for `""`).
    pub name: String,
    /// The MutatingAdmissionPolicy.
    pub policy: Value,
    /// The MutatingAdmissionPolicyBinding.
    pub binding: Value,
}

/// The name of the policy that holds `resource`.
fn policy_name(resource: &ApiResource) -> String {
    let group = if resource.group.is_empty() {
        "core"
    } else {
        &resource.group
    };
    format!("preflight-hold.{}.{group}", resource.plural)
}

/// Whether `name` can be written as a CEL field name.
fn is_identifier(name: &str) -> bool {
    let mut characters = name.chars();
    characters
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && characters.all(|next| next.is_ascii_alphanumeric() || next == '_')
        && !RESERVED.contains(&name)
}

/// A CEL string literal.
fn string_literal(text: &str) -> String {
    // JSON's string escapes are a subset of CEL's.
    Value::String(text.to_owned()).to_string()
}

/// A CEL literal of a switch's paused value (a boolean, number or string).
fn literal(value: &Value) -> Result<String, String> {
    match value {
        Value::Bool(_) | Value::Number(_) => Ok(value.to_string()),
        Value::String(text) => Ok(string_literal(text)),
        _ => Err(format!(
            "a switch value of {value} cannot be set by an admission policy"
        )),
    }
}

/// CEL: whether `object`'s switch already says pause.
fn already_paused(switch: &PauseSwitch) -> Result<String, String> {
    Ok(match &switch.target {
        SwitchTarget::Annotation { key, value } => format!(
            "object.metadata.?annotations[?{}] == optional.of({})",
            string_literal(key),
            string_literal(value)
        ),
        SwitchTarget::Field { path, value } => format!(
            "object.?{} == optional.of({})",
            path.join(".?"),
            literal(value)?
        ),
    })
}

/// CEL: whether the map `new` differs from `old` anywhere but under `skip` (one path, top level first),
/// ignoring the keys in `ignored` at this level.
fn changed_except(new: &str, old: &str, ignored: &[&str], skip: &[String]) -> String {
    let mut excluded: Vec<String> = ignored.iter().map(|key| string_literal(key)).collect();
    if let Some(first) = skip.first() {
        excluded.push(string_literal(first));
    }
    let excluded = excluded.join(", ");
    let mut alternatives = vec![
        format!("{new}.exists(k, !(k in [{excluded}]) && (!(k in {old}) || {new}[k] != {old}[k]))"),
        format!("{old}.exists(k, !(k in [{excluded}]) && !(k in {new}))"),
    ];
    // The switch itself may come and go; the containers on its path may not.
    if let Some((first, rest)) = skip.split_first()
        && !rest.is_empty()
    {
        let key = string_literal(first);
        alternatives.push(format!("(({key} in {new}) != ({key} in {old}))"));
        let inner = changed_except(
            &format!("{new}[{key}]"),
            &format!("{old}[{key}]"),
            &[],
            rest,
        );
        alternatives.push(format!("({key} in {new} && ({inner}))"));
    }
    alternatives.join(" || ")
}

/// CEL: the request creates the object, or changes its data (anything but metadata, status and the switch).
fn created_or_changed(switch: &PauseSwitch) -> String {
    let skip: &[String] = match &switch.target {
        SwitchTarget::Annotation { .. } => &[],
        SwitchTarget::Field { path, .. } => path,
    };
    format!(
        "request.operation == 'CREATE' || {}",
        changed_except("object", "oldObject", &NOT_DATA, skip)
    )
}

/// CEL: the apply configuration that sets the switch and the mark.
fn mutation(switch: &PauseSwitch) -> Result<String, String> {
    let mark = format!(
        "{}: {}",
        string_literal(HELD_AT_ADMISSION_ANNOTATION),
        string_literal(&switch.to_string())
    );
    Ok(match &switch.target {
        SwitchTarget::Annotation { key, value } => format!(
            "Object{{metadata: Object.metadata{{annotations: {{{}: {}, {mark}}}}}}}",
            string_literal(key),
            string_literal(value)
        ),
        SwitchTarget::Field { path, value } => {
            if let Some(bad) = path.iter().find(|step| !is_identifier(step)) {
                return Err(format!(
                    "`{bad}` in the switch's path cannot be named in an admission policy"
                ));
            }
            let (last, containers) = path.split_last().ok_or("the switch has no path")?;
            let mut fields = format!("{last}: {}", literal(value)?);
            for depth in (1..=containers.len()).rev() {
                fields = format!(
                    "{}: Object.{}{{{fields}}}",
                    path[depth - 1],
                    path[..depth].join(".")
                );
            }
            format!("Object{{metadata: Object.metadata{{annotations: {{{mark}}}}}, {fields}}}")
        }
    })
}

/// The policy and binding that hold `resource`'s objects with `switch`, or why that switch cannot be set at
/// admission.
pub(crate) fn hold_policy(
    resource: &ApiResource,
    switch: &PauseSwitch,
    selector: Option<&ObjectSelector>,
    installation: &str,
) -> Result<HoldPolicy, String> {
    let name = policy_name(resource);
    let labels = json!({ MANAGED_BY.0: MANAGED_BY.1, INSTALLATION_LABEL: installation });
    let api_version = format!("{}/{}", POLICY_API.0, POLICY_API.1);
    let policy = json!({
        "apiVersion": api_version,
        "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "failurePolicy": "Ignore",
            "reinvocationPolicy": "IfNeeded",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [resource.group],
                "apiVersions": ["*"],
                "operations": ["CREATE", "UPDATE"],
                "resources": [resource.plural],
            }]},
            "matchConditions": [
                {"name": "not-paused-already", "expression": format!("!({})", already_paused(switch)?)},
                {"name": "created-or-data-changed", "expression": created_or_changed(switch)},
            ],
            "mutations": [{
                "patchType": "ApplyConfiguration",
                "applyConfiguration": {"expression": mutation(switch)?},
            }],
        },
    });
    let mut binding = json!({
        "apiVersion": api_version,
        "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": labels},
        "spec": {"policyName": name},
    });
    // Objects outside every enforced check's selector are never held, not even for a moment.
    if let Some(selector) = selector {
        binding["spec"]["matchResources"] = json!({"objectSelector": selector.to_label_selector()});
    }
    Ok(HoldPolicy {
        name,
        policy,
        binding,
    })
}

/// The policies the operator has installed, kept in step with the gated kinds' switches.
pub(crate) struct AdmissionHolds {
    policies: Api<DynamicObject>,
    bindings: Api<DynamicObject>,
    /// The installation's label value ([`INSTALLATION_LABEL`]).
    installation: String,
    /// What is installed, by name; `None` until the leftovers of an earlier run were listed.
    installed: Option<BTreeMap<String, HoldPolicy>>,
}

impl AdmissionHolds {
    /// Installs nothing yet. `installation` names this operator's installation: the namespace of its check
    /// ConfigMaps, or `all-namespaces`.
    pub fn new(client: &Client, installation: String) -> Self {
        let resource = |kind: &str, plural: &str| {
            ApiResource::from_gvk_with_plural(
                &kube::api::GroupVersionKind::gvk(POLICY_API.0, POLICY_API.1, kind),
                plural,
            )
        };
        let policy = resource("MutatingAdmissionPolicy", "mutatingadmissionpolicies");
        let binding = resource(
            "MutatingAdmissionPolicyBinding",
            "mutatingadmissionpolicybindings",
        );
        Self {
            policies: Api::all_with(client.clone(), &policy),
            bindings: Api::all_with(client.clone(), &binding),
            installation,
            installed: None,
        }
    }

    /// Makes the installed policies exactly `wanted`: applies what is new or changed and deletes the rest
    /// (on the first call, also what an earlier run left behind). Returns the problems, by policy name; what
    /// failed is tried again at the next call.
    pub async fn sync(&mut self, wanted: Vec<HoldPolicy>) -> Vec<(String, String)> {
        let mut problems = Vec::new();
        let installed = match self.installed.take() {
            Some(installed) => installed,
            None => match self.leftovers().await {
                Ok(leftovers) => leftovers,
                // Hold at admission is off and the operator may not read policies: it installed none.
                Err(kube::Error::Api(status)) if status.code == 403 && wanted.is_empty() => {
                    tracing::debug!(%status, "cannot list admission policies; none to remove");
                    BTreeMap::new()
                }
                Err(error) => {
                    problems.push((
                        "admission policies".to_owned(),
                        format!("cannot list them: {}", api_answer(&error)),
                    ));
                    return problems;
                }
            },
        };
        let mut kept = BTreeMap::new();
        let wanted: BTreeMap<String, HoldPolicy> = wanted
            .into_iter()
            .map(|hold| (hold.name.clone(), hold))
            .collect();
        for (name, old) in installed {
            if wanted.contains_key(&name) {
                kept.insert(name, old);
            } else if let Err(error) = self.delete(&name).await {
                problems.push((
                    name.clone(),
                    format!("cannot delete it: {}", api_answer(&error)),
                ));
                kept.insert(name, old);
            } else {
                info!(policy = %name, "admission hold removed");
            }
        }
        for (name, hold) in wanted {
            if kept.get(&name) == Some(&hold) {
                continue;
            }
            kept.remove(&name);
            match self.apply(&hold).await {
                Ok(()) => {
                    info!(policy = %name, "admission hold installed");
                    kept.insert(name, hold);
                }
                Err(error) => {
                    problems.push((name, format!("cannot install it: {}", api_answer(&error))));
                }
            }
        }
        self.installed = Some(kept);
        problems
    }

    /// The policies an earlier run installed (their content unknown: each is applied again if wanted).
    async fn leftovers(&self) -> Result<BTreeMap<String, HoldPolicy>, kube::Error> {
        let selector = ListParams::default().labels(&format!(
            "{}={},{INSTALLATION_LABEL}={}",
            MANAGED_BY.0, MANAGED_BY.1, self.installation
        ));
        let mut names: Vec<String> = self
            .policies
            .list_metadata(&selector)
            .await?
            .items
            .iter()
            .chain(self.bindings.list_metadata(&selector).await?.items.iter())
            .map(ResourceExt::name_any)
            .collect();
        names.sort_unstable();
        names.dedup();
        Ok(names
            .into_iter()
            .map(|name| {
                let unknown = HoldPolicy {
                    name: name.clone(),
                    policy: Value::Null,
                    binding: Value::Null,
                };
                (name, unknown)
            })
            .collect())
    }

    /// Applies a policy, then its binding (a binding to a missing policy would hold nothing and warn).
    async fn apply(&self, hold: &HoldPolicy) -> Result<(), kube::Error> {
        let params = PatchParams::apply(FIELD_MANAGER).force();
        self.policies
            .patch(&hold.name, &params, &Patch::Apply(&hold.policy))
            .await?;
        self.bindings
            .patch(&hold.name, &params, &Patch::Apply(&hold.binding))
            .await?;
        Ok(())
    }

    /// Deletes a binding, then its policy; either being gone already is fine.
    async fn delete(&self, name: &str) -> Result<(), kube::Error> {
        for api in [&self.bindings, &self.policies] {
            match api.delete(name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{Method, Request, Response, StatusCode};
    use kube::client::Body;
    use tower_test::mock;

    fn deployments() -> ApiResource {
        ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("apps", "v1", "Deployment"),
            "deployments",
        )
    }

    fn expression(hold: &HoldPolicy, pointer: &str) -> String {
        hold.policy
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("no {pointer} in {}", hold.policy))
            .to_owned()
    }

    #[test]
    fn each_switch_gets_the_cel_that_sets_it() {
        let cases = [
            (
                "field:spec.paused=true,force",
                "!(object.?spec.?paused == optional.of(true))",
                r#"Object{metadata: Object.metadata{annotations: {"preflight.dev/held-at-admission": "field:spec.paused=true,force"}}, spec: Object.spec{paused: true}}"#,
            ),
            (
                "field:spec.template.suspend=yes",
                r#"!(object.?spec.?template.?suspend == optional.of("yes"))"#,
                r#"Object{metadata: Object.metadata{annotations: {"preflight.dev/held-at-admission": "field:spec.template.suspend=yes"}}, spec: Object.spec{template: Object.spec.template{suspend: "yes"}}}"#,
            ),
            (
                "annotation:example.com/paused=true",
                r#"!(object.metadata.?annotations[?"example.com/paused"] == optional.of("true"))"#,
                r#"Object{metadata: Object.metadata{annotations: {"example.com/paused": "true", "preflight.dev/held-at-admission": "annotation:example.com/paused=true"}}}"#,
            ),
        ];
        for (switch, not_paused, mutation) in cases {
            let switch = PauseSwitch::parse(switch).expect("valid switch");
            let hold = hold_policy(&deployments(), &switch, None, "preflight-system")
                .expect("can be held");
            assert_eq!(hold.name, "preflight-hold.deployments.apps");
            assert_eq!(
                expression(&hold, "/spec/matchConditions/0/expression"),
                not_paused,
                "{switch}"
            );
            assert_eq!(
                expression(&hold, "/spec/mutations/0/applyConfiguration/expression"),
                mutation,
                "{switch}"
            );
            assert_eq!(hold.binding["spec"]["policyName"], json!(hold.name));
            assert_eq!(
                hold.binding["metadata"]["labels"][INSTALLATION_LABEL],
                "preflight-system"
            );
        }
    }

    #[test]
    fn an_update_is_held_when_it_changes_data_other_than_the_switch() {
        let spec_paused = PauseSwitch::parse("field:spec.paused=true").expect("valid");
        assert_eq!(
            created_or_changed(&spec_paused),
            "request.operation == 'CREATE' || \
             object.exists(k, !(k in [\"metadata\", \"status\", \"apiVersion\", \"kind\", \"spec\"]) && (!(k in oldObject) || object[k] != oldObject[k])) || \
             oldObject.exists(k, !(k in [\"metadata\", \"status\", \"apiVersion\", \"kind\", \"spec\"]) && !(k in object)) || \
             ((\"spec\" in object) != (\"spec\" in oldObject)) || \
             (\"spec\" in object && (object[\"spec\"].exists(k, !(k in [\"paused\"]) && (!(k in oldObject[\"spec\"]) || object[\"spec\"][k] != oldObject[\"spec\"][k])) || \
             oldObject[\"spec\"].exists(k, !(k in [\"paused\"]) && !(k in object[\"spec\"]))))"
        );
        let annotation = PauseSwitch::parse("annotation:a/b=c").expect("valid");
        assert_eq!(
            created_or_changed(&annotation),
            "request.operation == 'CREATE' || \
             object.exists(k, !(k in [\"metadata\", \"status\", \"apiVersion\", \"kind\"]) && (!(k in oldObject) || object[k] != oldObject[k])) || \
             oldObject.exists(k, !(k in [\"metadata\", \"status\", \"apiVersion\", \"kind\"]) && !(k in object))"
        );
    }

    #[test]
    fn a_switch_an_admission_policy_cannot_write_is_refused_with_its_reason() {
        for (switch, reason) in [
            ("field:spec.my-flag=true", "`my-flag`"),
            ("field:spec.in=true", "`in`"),
            ("field:spec.paused=null", "null"),
        ] {
            let switch = PauseSwitch::parse(switch).expect("valid switch");
            let problem = hold_policy(&deployments(), &switch, None, "preflight-system")
                .expect_err("cannot be held");
            assert!(problem.contains(reason), "{switch}: {problem}");
        }
    }

    #[test]
    fn a_staged_kind_binds_the_policy_to_its_selector_only() {
        let switch = PauseSwitch::parse("field:spec.paused=true").unwrap();
        let everything = hold_policy(&deployments(), &switch, None, "ops").unwrap();
        assert!(everything.binding["spec"].get("matchResources").is_none());
        let staging = ObjectSelector::parse(
            "matchLabels: {env: staging}\nmatchExpressions: [{key: tier, operator: Exists}]",
        )
        .unwrap();
        let staged = hold_policy(&deployments(), &switch, Some(&staging), "ops").unwrap();
        assert_eq!(
            staged.binding["spec"]["matchResources"]["objectSelector"],
            json!({
                "matchLabels": {"env": "staging"},
                "matchExpressions": [{"key": "tier", "operator": "Exists"}],
            })
        );
    }

    #[test]
    fn the_core_group_is_named_core() {
        let pods = ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("", "v1", "Pod"),
            "pods",
        );
        assert_eq!(policy_name(&pods), "preflight-hold.pods.core");
    }

    type Handle = mock::Handle<Request<Body>, Response<Body>>;

    fn respond(status: StatusCode, body: Value) -> Response<Body> {
        Response::builder()
            .status(status)
            .body(Body::from(serde_json::to_vec(&body).unwrap()))
            .unwrap()
    }

    fn forbidden() -> Response<Body> {
        respond(
            StatusCode::FORBIDDEN,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden",
                "message": "mutatingadmissionpolicies is forbidden", "code": 403}),
        )
    }

    fn empty_list() -> Response<Body> {
        respond(
            StatusCode::OK,
            json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList",
                "metadata": {}, "items": []}),
        )
    }

    /// Answers the next request, which must be `method` on a path starting with `path`; returns its query.
    async fn answer(
        handle: &mut Handle,
        method: Method,
        path: &str,
        response: Response<Body>,
    ) -> String {
        let (request, send) = handle.next_request().await.expect("a request");
        assert_eq!(request.method(), method, "{}", request.uri());
        assert!(request.uri().path().starts_with(path), "{}", request.uri());
        send.send_response(response);
        request.uri().query().unwrap_or_default().to_owned()
    }

    const POLICIES: &str = "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies";
    const BINDINGS: &str = "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings";

    #[tokio::test]
    async fn turned_off_without_the_rbac_it_asks_once_and_never_again() {
        let (service, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
        let mut holds = AdmissionHolds::new(&Client::new(service, "default"), "ops".into());
        let server = tokio::spawn(async move {
            answer(&mut handle, Method::GET, POLICIES, forbidden()).await;
            handle
        });
        assert!(holds.sync(Vec::new()).await.is_empty(), "not a problem");
        let _handle = server.await.unwrap();
        // A request now would never be answered: the sync would not finish.
        let again = tokio::time::timeout(
            std::time::Duration::from_millis(200),
            holds.sync(Vec::new()),
        );
        assert_eq!(
            again.await.ok(),
            Some(Vec::new()),
            "the second sync sends nothing"
        );
    }

    #[tokio::test]
    async fn installs_once_then_removes_what_is_no_longer_wanted() {
        let (service, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
        let mut holds = AdmissionHolds::new(&Client::new(service, "default"), "ops".into());
        let switch = PauseSwitch::parse("field:spec.paused=true").unwrap();
        let hold = hold_policy(&deployments(), &switch, None, "ops").unwrap();
        let name = "preflight-hold.deployments.apps";
        let server = tokio::spawn(async move {
            let query = answer(&mut handle, Method::GET, POLICIES, empty_list()).await;
            assert!(
                query.contains("preflight.dev%2Fchecks-namespace%3Dops"),
                "only this installation's leftovers: {query}"
            );
            answer(&mut handle, Method::GET, BINDINGS, empty_list()).await;
            for api in [POLICIES, BINDINGS] {
                let query = answer(
                    &mut handle,
                    Method::PATCH,
                    &format!("{api}/{name}"),
                    empty_list(),
                )
                .await;
                assert!(
                    query.contains("fieldManager=preflight") && query.contains("force=true"),
                    "{query}"
                );
            }
            for api in [BINDINGS, POLICIES] {
                answer(
                    &mut handle,
                    Method::DELETE,
                    &format!("{api}/{name}"),
                    empty_list(),
                )
                .await;
            }
        });
        assert!(holds.sync(vec![hold.clone()]).await.is_empty());
        assert!(
            holds.sync(vec![hold]).await.is_empty(),
            "unchanged: nothing sent"
        );
        assert!(holds.sync(Vec::new()).await.is_empty());
        server.await.unwrap();
    }
}
