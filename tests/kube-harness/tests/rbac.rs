//! RBAC is on: an impersonated ServiceAccount without rights is refused; with a Role bound it succeeds.

use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, ListParams, PostParams};
use preflight_kube_harness::{admin_client, client_as_service_account, eventually, test_namespace};
use serde_json::json;
use std::time::Duration;

fn forbidden(result: Result<impl std::fmt::Debug, kube::Error>) -> bool {
    matches!(result, Err(kube::Error::Api(ref status)) if status.code == 403)
}

#[tokio::test]
async fn a_service_account_is_refused_until_a_role_is_bound_and_only_for_what_the_role_grants() {
    let admin = admin_client().await;
    let namespace = test_namespace(&admin, "rbac").await;
    Api::<ServiceAccount>::namespaced(admin.clone(), &namespace)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "operator"}})).unwrap(),
        )
        .await
        .unwrap();

    let operator = client_as_service_account(&namespace, "operator").await;
    let config_maps: Api<ConfigMap> = Api::namespaced(operator.clone(), &namespace);
    assert!(
        forbidden(config_maps.list(&ListParams::default()).await),
        "no rights yet"
    );

    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": "read-config-maps"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]
    }))
    .unwrap();
    Api::<Role>::namespaced(admin.clone(), &namespace)
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "operator-reads-config-maps"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read-config-maps"},
        "subjects": [{"kind": "ServiceAccount", "name": "operator", "namespace": namespace}]
    }))
    .unwrap();
    Api::<RoleBinding>::namespaced(admin.clone(), &namespace)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();

    eventually(
        "the RoleBinding to take effect",
        Duration::from_secs(20),
        || async { config_maps.list(&ListParams::default()).await.ok() },
    )
    .await;
    let secrets: Api<Secret> = Api::namespaced(operator, &namespace);
    assert!(
        forbidden(secrets.list(&ListParams::default()).await),
        "the Role grants ConfigMaps, not Secrets"
    );
}
