//! Signed checks, against the real control plane, a real registry and signatures made by the real cosign
//! CLI: a check is refused before it is compiled, with an Event naming the key and the digest, unless it
//! carries a signature by the key its ConfigMap names in `verify` (a Secret holding `cosign.pub`) or by one
//! of the operator's `--verify-key` keys, for its own bytes; the last good version keeps serving meanwhile.

use crate::oci::{object_depending_on_postgres, put_source, rejected};
use crate::operator_support::*;
use preflight_oci::{CheckReference, Credentials, Registry, RegistryOptions, VerificationKey};
use preflight_test_support::{CosignKeys, TestRegistry, Transport};
use serde_json::json;

/// Applies Secret `check-keys` holding `keys`' public key, as `cosign generate-key-pair k8s://…` does.
async fn put_key_secret(s: &Scenario, keys: &CosignKeys) {
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "check-keys", "namespace": s.namespace},
        "stringData": {"cosign.pub": keys.public_pem()},
    });
    apply(&s.client, secret).await;
}

/// The configuration of the dependency-ready check: postgres available or not, and a retry delay that
/// makes each version's ConfigMap differ.
fn postgres(available: bool, retry_seconds: u32) -> String {
    let available = if available { vec!["postgres"] } else { vec![] };
    json!({"available": available, "retryAfterSeconds": retry_seconds}).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_from_a_registry_runs_only_with_a_cosign_signature_by_the_named_key_for_its_bytes()
{
    let s = Scenario::new("signed-oci", "Parcel", "dependency-ready").await;
    let registry = TestRegistry::start(Transport::PlainHttp);
    let client = Registry::new(&RegistryOptions {
        plain_http: vec![registry.host()],
        ..RegistryOptions::default()
    });
    let host = registry.host();
    let push = |tag: &str, bytes: Vec<u8>| {
        let reference = CheckReference::parse(&format!("oci://{host}/deps:{tag}")).unwrap();
        let client = &client;
        async move {
            let pushed = client
                .push(&reference, &bytes, &Credentials::Anonymous)
                .await
                .unwrap();
            reference.pinned(&pushed.manifest_digest)
        }
    };
    let signed = push("1", s.wasm.clone()).await;
    let unsigned = push("2", another_version(&s.wasm)).await;
    let (ours, theirs) = (CosignKeys::generate(), CosignKeys::generate());
    let bare = |reference: &CheckReference| reference.to_string().replace("oci://", "");
    registry.cosign_sign(&ours, &bare(&signed));
    let mut config = operator_config(&s.namespace);
    config.registry.plain_http = vec![host.clone()];
    object_depending_on_postgres(&s, "o1").await;
    let operator = start_operator(&s.client, config).await;
    let key = format!("key Secret {}/check-keys (cosign.pub)", s.namespace);

    // The key Secret does not exist yet: named, and tried again by itself once it does.
    let source = |reference: &CheckReference, available, retry| {
        json!({
            "source": reference.to_string(),
            "verify": "secret/check-keys",
            "config": postgres(available, retry),
        })
    };
    put_source(&s, source(&signed, false, 60)).await;
    rejected(
        &s,
        &format!("key Secret {}/check-keys does not exist", s.namespace),
    )
    .await;
    put_key_secret(&s, &ours).await;
    s.wait("o1", "False", "DependencyMissing").await;

    // Unsigned bytes are refused, naming the key and the digest; the signed version keeps serving (the
    // refused one would let o1 proceed).
    put_source(&s, source(&unsigned, true, 61)).await;
    let note = rejected(&s, "carries no cosign signature").await;
    assert!(note.contains(&key), "{note}");
    assert!(note.contains(unsigned.digest().unwrap()), "{note}");
    assert!(
        note.contains("the last good version keeps serving"),
        "{note}"
    );

    // Signed, but by another key.
    registry.cosign_sign(&theirs, &bare(&unsigned));
    put_source(&s, source(&unsigned, true, 62)).await;
    let note = rejected(&s, "none of the 1 signature(s)").await;
    assert!(
        note.contains(&key) && note.contains(unsigned.digest().unwrap()),
        "{note}"
    );

    // Bytes changed after signing: our signature of the signed bytes copied beside other bytes.
    let changed = push("3", another_version(&another_version(&s.wasm))).await;
    registry.copy_cosign_signature(
        &format!("{host}/deps"),
        signed.digest().unwrap(),
        changed.digest().unwrap(),
    );
    put_source(&s, source(&changed, true, 63)).await;
    let note = rejected(&s, "the bytes changed after signing").await;
    assert!(
        note.contains(&format!("is for {}", signed.digest().unwrap())),
        "{note}"
    );
    let failures = metric(
        &operator,
        "preflight_check_load_failures_total",
        &[("check", &s.check("deps")), ("cause", "signature")],
    )
    .await;
    assert!(failures >= 4.0, "{failures} signature failures counted");
    assert_eq!(
        condition(&s.client, &s.kind, &s.namespace, "o1")
            .await
            .map(|condition| condition.reason),
        Some("DependencyMissing".to_owned()),
        "no refused version ever ran"
    );

    // Signed by the key: it loads.
    registry.cosign_sign(&ours, &bare(&unsigned));
    put_source(&s, source(&unsigned, true, 64)).await;
    s.wait("o1", "True", "DependenciesAvailable").await;
    operator.stop().await;
    s.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_in_a_config_map_runs_only_with_a_sign_blob_signature_and_the_operator_key_binds_all()
 {
    let s = Scenario::new("signed-cm", "Crate", "dependency-ready").await;
    let (ours, operators) = (CosignKeys::generate(), CosignKeys::generate());
    let work = tempfile::tempdir().unwrap();
    let wasm = work.path().join("check.wasm");
    std::fs::write(&wasm, &s.wasm).unwrap();
    let by_ours = ours.sign_blob(&wasm);
    let by_operator = operators.sign_blob(&wasm);
    put_key_secret(&s, &ours).await;
    let operator_key =
        VerificationKey::from_pem("key operator.pub", operators.public_pem().as_bytes()).unwrap();
    let mut config = operator_config(&s.namespace);
    config.verify_keys = vec![operator_key];
    s.create("o1", &[]).await;
    let operator = start_operator(&s.client, config).await;
    let spec_available = postgres(true, 60);

    // Signed by the ConfigMap's key only: the operator's key refuses it.
    let both = format!("{by_ours}\n{by_operator}");
    s.put(
        "deps",
        &[
            ("verify", "secret/check-keys"),
            ("signature", &by_ours),
            ("config", &spec_available),
        ],
    )
    .await;
    let note = rejected(&s, "verifies with key operator.pub").await;
    assert!(note.contains("no good version exists"), "{note}");

    // Signed by both: it loads (an object with no dependencies proceeds).
    s.put(
        "deps",
        &[
            ("verify", "secret/check-keys"),
            ("signature", &both),
            ("config", &spec_available),
        ],
    )
    .await;
    s.wait("o1", "True", "DependenciesAvailable").await;

    // Other bytes under the same signatures: refused before compiling, the signed version serves.
    put_check(
        &s.client,
        &s.namespace,
        "deps",
        &s.kind.gates(),
        &another_version(&s.wasm),
        &[
            ("verify", "secret/check-keys"),
            ("signature", &both),
            ("config", &spec_available),
        ],
    )
    .await;
    let changed = preflight_oci::sha256_digest(&another_version(&s.wasm)).replace(':', " ");
    let note = rejected(&s, &changed).await;
    assert!(note.contains("the bytes changed after signing"), "{note}");
    assert!(
        note.contains("the last good version keeps serving"),
        "{note}"
    );

    // No signature at all.
    s.put("deps", &[("config", &spec_available)]).await;
    let note = rejected(&s, "carries no signature").await;
    assert!(note.contains("key operator.pub"), "{note}");
    operator.stop().await;
    s.remove().await;
}
