//! Cosign signatures made by the real cosign CLI, verified against a real registry over TLS with a private
//! CA: a signed check verifies with its key and only with it, an unsigned one and one carrying a signature
//! copied from other bytes are refused naming the key and the digest, and a check verified once verifies
//! again from the cache while its registry is down.

use preflight_oci::{
    ArtifactCache, CheckReference, Credentials, OciError, Registry, RegistryOptions,
    SignaturePolicy, VerificationKey, verify_signatures,
};
use preflight_test_support::{CosignKeys, TestRegistry, Transport};

fn policy(name: &str, keys: &CosignKeys) -> SignaturePolicy {
    let mut policy = SignaturePolicy::default();
    let key = VerificationKey::from_pem(name, keys.public_pem().as_bytes()).unwrap();
    policy.require_one_of(vec![key]);
    policy
}

/// Verifies `reference` under `policy`, which must succeed.
async fn verified(
    client: &Registry,
    cache: Option<&ArtifactCache>,
    reference: &CheckReference,
    policy: &SignaturePolicy,
    because: &str,
) {
    verify_signatures(client, cache, reference, &Credentials::Anonymous, policy)
        .await
        .expect(because);
}

async fn refusal(
    client: &Registry,
    cache: Option<&ArtifactCache>,
    reference: &CheckReference,
    policy: &SignaturePolicy,
) -> String {
    let error = verify_signatures(client, cache, reference, &Credentials::Anonymous, policy)
        .await
        .unwrap_err();
    assert!(matches!(error, OciError::Unsigned { .. }), "{error}");
    error.describe()
}

#[tokio::test]
async fn a_check_runs_only_with_a_cosign_signature_by_the_key_for_its_own_bytes() {
    let mut registry = TestRegistry::start(Transport::PrivateCa);
    let client = Registry::new(&RegistryOptions {
        ca_certificates: vec![registry.ca_pem().as_bytes().to_vec()],
        ..RegistryOptions::default()
    });
    let (ours, theirs) = (CosignKeys::generate(), CosignKeys::generate());
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = ArtifactCache::new(cache_dir.path());
    let push = |tag: &'static str, bytes: &'static [u8]| {
        let reference =
            CheckReference::parse(&format!("oci://{}/checks/ready:{tag}", registry.host()))
                .unwrap();
        let client = &client;
        async move {
            let pushed = client
                .push(&reference, bytes, &Credentials::Anonymous)
                .await
                .unwrap();
            reference.pinned(&pushed.manifest_digest)
        }
    };
    let signed = push("1", b"\0asm signed check").await;
    let unsigned = push("2", b"\0asm unsigned check").await;
    let bare = |reference: &CheckReference| reference.to_string().replace("oci://", "");
    registry.cosign_sign(&ours, &bare(&signed));
    let by_ours = policy("key ours.pub", &ours);
    let by_theirs = policy("key theirs.pub", &theirs);

    verified(
        &client,
        Some(&cache),
        &signed,
        &by_ours,
        "signed by our key",
    )
    .await;
    let other_key = refusal(&client, None, &signed, &by_theirs).await;
    assert!(
        other_key.contains("none of the 1 signature(s)") && other_key.contains("key theirs.pub"),
        "{other_key}"
    );
    let digest = signed.digest().unwrap();
    assert!(other_key.contains(digest), "names the digest: {other_key}");
    let none = refusal(&client, Some(&cache), &unsigned, &by_ours).await;
    assert!(
        none.contains("carries no cosign signature") && none.contains("key ours.pub"),
        "{none}"
    );

    // Someone with push rights moves the signature of the signed bytes onto the unsigned ones: it still
    // verifies with the key, but names the bytes it was made for. The cache held "no signature" for them:
    // the registry is asked again.
    registry.copy_cosign_signature(
        &format!("{}/checks/ready", registry.host()),
        signed.digest().unwrap(),
        unsigned.digest().unwrap(),
    );
    let copied = refusal(&client, Some(&cache), &unsigned, &by_ours).await;
    assert!(
        copied.contains(&format!("is for {digest}"))
            && copied.contains(unsigned.digest().unwrap())
            && copied.contains("the bytes changed after signing"),
        "{copied}"
    );

    registry.stop();
    verified(
        &client,
        Some(&cache),
        &signed,
        &by_ours,
        "the kept signatures verify with the registry down",
    )
    .await;
    let error = verify_signatures(&client, None, &signed, &Credentials::Anonymous, &by_ours)
        .await
        .unwrap_err();
    assert!(matches!(error, OciError::Registry { .. }), "{error}");
}
