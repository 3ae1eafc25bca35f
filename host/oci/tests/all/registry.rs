//! Push, pull and fetch against the CNCF distribution registry over plain HTTP and over TLS with a
//! private CA; moved tags, wrong digests, and a stopped registry.

use preflight_oci::{
    ArtifactCache, CheckReference, Credentials, OciError, Origin, Registry, RegistryOptions, fetch,
    sha256_digest,
};
use preflight_test_support::{TestRegistry, Transport};

const MAX: u64 = 1 << 20;

fn client(registry: &TestRegistry, transport: Transport) -> Registry {
    Registry::new(&match transport {
        Transport::PlainHttp => RegistryOptions {
            plain_http: vec![registry.host()],
            ..RegistryOptions::default()
        },
        Transport::PrivateCa => RegistryOptions {
            ca_certificates: vec![registry.ca_pem().as_bytes().to_vec()],
            ..RegistryOptions::default()
        },
    })
}

fn reference(registry: &TestRegistry, path: &str) -> CheckReference {
    CheckReference::parse(&format!("oci://{}/{path}", registry.host())).unwrap()
}

#[tokio::test]
async fn a_pushed_check_pulls_back_by_tag_and_by_digest_over_http_and_private_tls() {
    for transport in [Transport::PlainHttp, Transport::PrivateCa] {
        let registry = TestRegistry::start(transport);
        let client = client(&registry, transport);
        let component = format!("\0asm component over {transport:?}").into_bytes();
        let tagged = reference(&registry, "checks/ready:1.0");
        let pushed = client
            .push(&tagged, &component, &Credentials::Anonymous)
            .await
            .unwrap();
        assert_eq!(pushed.component_digest, sha256_digest(&component));

        let by_tag = client
            .pull(&tagged, &Credentials::Anonymous, MAX)
            .await
            .unwrap();
        assert_eq!(by_tag.component, component, "{transport:?}");
        assert_eq!(by_tag.manifest_digest, pushed.manifest_digest);
        let by_digest = client
            .pull(
                &tagged.pinned(&pushed.manifest_digest),
                &Credentials::Anonymous,
                MAX,
            )
            .await
            .unwrap();
        assert_eq!(by_digest.component, component);

        let too_large = client
            .pull(&tagged, &Credentials::Anonymous, 4)
            .await
            .unwrap_err();
        assert!(
            matches!(too_large, OciError::NotACheck { .. }),
            "{too_large}"
        );
    }
}

#[tokio::test]
async fn a_private_ca_is_trusted_only_when_given() {
    let registry = TestRegistry::start(Transport::PrivateCa);
    let untrusting = Registry::new(&RegistryOptions::default());
    let error = untrusting
        .push(
            &reference(&registry, "ready:1"),
            b"\0asm",
            &Credentials::Anonymous,
        )
        .await
        .unwrap_err();
    assert!(matches!(error, OciError::Registry { .. }), "{error}");
    let chain = std::iter::successors(Some(&error as &dyn std::error::Error), |e| e.source())
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(": ");
    assert!(chain.to_lowercase().contains("certificate"), "{chain}");
}

#[tokio::test]
async fn a_digest_pins_the_bytes_when_the_tag_moves_and_a_wrong_digest_is_refused() {
    let registry = TestRegistry::start(Transport::PlainHttp);
    let client = client(&registry, Transport::PlainHttp);
    let tagged = reference(&registry, "ready:stable");
    let first = client
        .push(&tagged, b"\0asm first", &Credentials::Anonymous)
        .await
        .unwrap();
    client
        .push(&tagged, b"\0asm second", &Credentials::Anonymous)
        .await
        .unwrap();
    let pinned = tagged.pinned(&first.manifest_digest);
    let pulled = client
        .pull(&pinned, &Credentials::Anonymous, MAX)
        .await
        .unwrap();
    assert_eq!(pulled.component, b"\0asm first");
    let moved = client
        .pull(&tagged, &Credentials::Anonymous, MAX)
        .await
        .unwrap();
    assert_eq!(moved.component, b"\0asm second");

    let wrong = tagged.pinned(&sha256_digest(b"no such manifest"));
    let error = client
        .pull(&wrong, &Credentials::Anonymous, MAX)
        .await
        .unwrap_err();
    assert!(matches!(error, OciError::Registry { .. }), "{error}");
    assert!(error.to_string().contains(&wrong.to_string()), "{error}");
}

#[tokio::test]
async fn the_cache_serves_a_pinned_digest_without_asking_and_a_tag_when_the_registry_is_down() {
    let mut registry = TestRegistry::start(Transport::PlainHttp);
    let client = client(&registry, Transport::PlainHttp);
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = ArtifactCache::new(cache_dir.path());
    let tagged = reference(&registry, "ready:1");
    client
        .push(&tagged, b"\0asm cached", &Credentials::Anonymous)
        .await
        .unwrap();
    let fetched = fetch(&client, Some(&cache), &tagged, &Credentials::Anonymous, MAX)
        .await
        .unwrap();
    assert!(
        matches!(fetched.origin, Origin::Registry),
        "{:?}",
        fetched.origin
    );
    let pinned = fetched.reference.clone();

    registry.stop();
    let again = fetch(&client, Some(&cache), &pinned, &Credentials::Anonymous, MAX)
        .await
        .unwrap();
    assert!(matches!(again.origin, Origin::Cache), "{:?}", again.origin);
    assert_eq!(again.pulled.component, b"\0asm cached");
    let stale = fetch(&client, Some(&cache), &tagged, &Credentials::Anonymous, MAX)
        .await
        .unwrap();
    assert!(
        matches!(
            stale.origin,
            Origin::CacheAfterRegistryFailure(OciError::Registry { .. })
        ),
        "{:?}",
        stale.origin
    );
    assert_eq!(stale.reference, pinned);
    let unknown = reference(&registry, "other:1");
    let error = fetch(
        &client,
        Some(&cache),
        &unknown,
        &Credentials::Anonymous,
        MAX,
    )
    .await
    .unwrap_err();
    assert!(matches!(error, OciError::Registry { .. }), "{error}");
}

#[tokio::test]
async fn each_request_uses_its_own_credentials_on_a_registry_behind_a_login() {
    let registry = TestRegistry::start_with_login(Transport::PrivateCa, "ci", "token-1");
    let client = client(&registry, Transport::PrivateCa);
    let login = Credentials::DockerConfigJson(registry.docker_config_json().into_bytes());
    let tagged = reference(&registry, "checks/private:1");
    let component = b"\0asm behind a login".to_vec();
    let anonymous = client.push(&tagged, &component, &Credentials::Anonymous);
    assert!(
        matches!(anonymous.await, Err(OciError::Registry { .. })),
        "an anonymous push is refused"
    );
    // The same client, now with the login: what the first request was given does not stick.
    client.push(&tagged, &component, &login).await.unwrap();
    let pulled = client.pull(&tagged, &login, MAX).await.unwrap();
    assert_eq!(pulled.component, component);
    let anonymous = client.pull(&tagged, &Credentials::Anonymous, MAX).await;
    assert!(
        matches!(anonymous, Err(OciError::Registry { .. })),
        "nor does the login stick to a later anonymous request"
    );
}
