//! Contract 0.2 capabilities, with real components built from source and a real HTTP server on loopback
//! standing in for the external system: what is granted works; everything else is refused before any
//! connection or read, reported with its destination, and nothing of it reaches the check's result.
//! Tests send traffic to 127.0.0.1 only.

use preflight_engine::{
    ClusterLookup, Engine, EngineConfig, FailureKind, Grants, HttpGrant, HttpPolicy,
    InjectedHeader, Limits, LookupFuture, ObjectKind, Request, Target, UrlPattern,
};
use preflight_test_support::{LoopbackServer, Reply, check_bytes};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

fn request(object_name: &str, spec: &str, config: &str) -> Request {
    Request {
        object: format!(
            r#"{{"apiVersion":"example.com/v1","kind":"App","metadata":{{"name":"{object_name}","namespace":"default"}},"spec":{spec}}}"#
        ),
        config: config.into(),
        target: Target {
            group: "example.com".into(),
            version: "v1".into(),
            kind: "App".into(),
            namespace: Some("default".into()),
            name: object_name.into(),
        },
        now: SystemTime::now(),
    }
}

fn fetch(urls: &[String]) -> Request {
    let urls = serde_json::to_string(urls).unwrap();
    request("x", "{}", &format!(r#"{{"mode":"fetch","urls":{urls}}}"#))
}

fn grant(policy: HttpPolicy) -> Grants {
    Grants {
        http: Some(Arc::new(HttpGrant::new(policy).unwrap())),
        ..Grants::default()
    }
}

fn allowing(server: &LoopbackServer) -> HttpPolicy {
    HttpPolicy::allowing(vec![UrlPattern::parse(&server.url()).unwrap()])
}

fn limits() -> Limits {
    Limits {
        timeout: Duration::from_secs(5),
        ..Limits::default()
    }
}

/// The external system: `/dependencies/db` exists with key `K-42` (cacheable for a minute); anything else
/// is missing (also cacheable).
fn external_system() -> LoopbackServer {
    LoopbackServer::start(|path| match path {
        "/dependencies/db" => {
            Reply::new(200, r#"{"key":"K-42"}"#).header("cache-control", "max-age=60")
        }
        _ => Reply::new(404, "no such dependency").header("cache-control", "max-age=60"),
    })
}

#[tokio::test]
async fn the_external_dependency_check_proceeds_with_its_key_or_requeues_and_the_cache_spares_requests()
 {
    let server = external_system();
    let engine = Engine::new(EngineConfig::default()).unwrap();
    let check = engine.load(&check_bytes("external-dependency")).unwrap();
    assert!(check.validates_config());
    let grants = grant(allowing(&server));
    let config = format!(
        r#"{{"endpoint":"{}/dependencies/","retryAfterSeconds":600,"jitterPercent":10}}"#,
        server.url()
    );

    let present = engine
        .evaluate_with(
            &check,
            &request("a", r#"{"dependency":"db"}"#, &config),
            &limits(),
            &grants,
        )
        .await;
    let verdict = present.outcome.expect("the dependency exists");
    assert!(verdict.proceed);
    assert_eq!(verdict.outputs["dependencyKey"], "K-42");
    assert!(present.refusals.is_empty(), "{:?}", present.refusals);

    let mut delays = Vec::new();
    for i in 0..50 {
        let waiting = engine
            .evaluate_with(
                &check,
                &request(&format!("w{i}"), r#"{"dependency":"queue"}"#, &config),
                &limits(),
                &grants,
            )
            .await;
        let verdict = waiting.outcome.expect("a missing dependency is a verdict");
        assert!(!verdict.proceed);
        assert_eq!(verdict.reason, "DependencyMissing");
        delays.push(verdict.requeue_after.unwrap());
    }
    assert!(
        delays
            .iter()
            .all(|d| *d >= Duration::from_secs(600) && *d < Duration::from_secs(660))
    );
    assert_eq!(
        server.request_count(),
        2,
        "one request per URL while the answers are fresh: {:?}",
        server.requests()
    );
}

#[tokio::test]
async fn concurrent_evaluations_asking_for_the_same_url_send_one_request() {
    let server = LoopbackServer::start(|_| {
        Reply::new(404, "")
            .header("cache-control", "max-age=60")
            .after(Duration::from_millis(200))
    });
    let engine = Arc::new(Engine::new(EngineConfig::default()).unwrap());
    let check = engine.load(&check_bytes("external-dependency")).unwrap();
    let grants = grant(allowing(&server));
    let config = format!(r#"{{"endpoint":"{}/d/"}}"#, server.url());
    let evaluations = (0..64).map(|i| {
        let (engine, check, grants, config) = (
            engine.clone(),
            check.clone(),
            grants.clone(),
            config.clone(),
        );
        tokio::spawn(async move {
            let request = request(&format!("o{i}"), r#"{"dependency":"queue"}"#, &config);
            engine
                .evaluate_with(&check, &request, &limits(), &grants)
                .await
        })
    });
    for evaluation in evaluations {
        let evaluation = evaluation.await.unwrap();
        assert!(!evaluation.outcome.unwrap().proceed);
    }
    assert_eq!(server.request_count(), 1, "64 evaluations, one request");
}

#[tokio::test]
async fn credentials_are_added_by_the_host_and_never_reach_the_check() {
    let server = LoopbackServer::start(|_| Reply::new(200, "ok"));
    let mut policy = allowing(&server);
    policy.headers.push(InjectedHeader {
        name: http::header::AUTHORIZATION,
        value: http::HeaderValue::from_static("Bearer s3cret"),
        only_to: vec![UrlPattern::parse(&server.url()).unwrap()],
    });
    let engine = Engine::new(EngineConfig::default()).unwrap();
    let check = engine.load(&check_bytes("misbehave")).unwrap();
    let evaluation = engine
        .evaluate_with(
            &check,
            &fetch(&[format!("{}/x", server.url())]),
            &limits(),
            &grant(policy),
        )
        .await;
    let verdict = evaluation.outcome.unwrap();
    assert_eq!(verdict.message, "200 ok");
    assert_eq!(
        server.requests()[0].headers["authorization"],
        "Bearer s3cret"
    );
    assert!(!format!("{verdict:?}{:?}", evaluation.logs).contains("s3cret"));
}

/// Runs the `fetch` mode on `urls` and returns the check's message and the host's refusals.
async fn refused(policy: HttpPolicy, urls: &[String]) -> (String, Vec<String>) {
    let engine = Engine::new(EngineConfig::default()).unwrap();
    let check = engine.load(&check_bytes("misbehave")).unwrap();
    let evaluation = engine
        .evaluate_with(&check, &fetch(urls), &limits(), &grant(policy))
        .await;
    (evaluation.outcome.unwrap().message, evaluation.refusals)
}

#[tokio::test]
async fn refusals_happen_before_any_connection_and_name_the_destination() {
    let server = external_system();
    let other = LoopbackServer::start(|_| Reply::new(200, "secret data"));

    // Nothing granted.
    let engine = Engine::new(EngineConfig::default()).unwrap();
    let check = engine.load(&check_bytes("misbehave")).unwrap();
    let ungranted = engine
        .evaluate(&check, &fetch(&[server.url() + "/"]), &limits())
        .await;
    assert!(
        ungranted
            .outcome
            .unwrap()
            .message
            .contains("HttpRequestDenied")
    );
    assert!(
        ungranted.refusals[0].contains("not granted"),
        "{:?}",
        ungranted.refusals
    );

    // An undeclared host, and an undeclared port on loopback.
    let (message, refusals) = refused(
        allowing(&server),
        &[
            format!("http://localhost:{}/", server.port()),
            format!("{}/", other.url()),
        ],
    )
    .await;
    assert_eq!(message.matches("HttpRequestDenied").count(), 2, "{message}");
    assert!(
        refusals[0].contains(&format!(
            "http://localhost:{}/ is not in the check's allow-list",
            server.port()
        )),
        "{refusals:?}"
    );
    assert!(
        refusals[1].contains(&format!(
            "http://127.0.0.1:{}/ is not in the check's allow-list",
            other.port()
        )),
        "{refusals:?}"
    );

    // A redirect to an undeclared target: the first hop is allowed, the second is refused.
    server.set_route({
        let target = format!("{}/leak", other.url());
        move |_| Reply::new(302, "").header("location", &target)
    });
    let (message, refusals) =
        refused(allowing(&server), &[format!("{}/start", server.url())]).await;
    assert!(
        message.contains("HttpRequestDenied") && !message.contains("secret data"),
        "{message}"
    );
    assert!(
        refusals[0].contains(&format!("127.0.0.1:{}/leak", other.port())),
        "{refusals:?}"
    );
    assert_eq!(
        other.request_count(),
        0,
        "no refused request reached its destination"
    );

    // An oversized response (declared length over the cap): refused, its body unread.
    server.set_route(|_| Reply::new(200, vec![b'x'; 4096]));
    let mut small = allowing(&server);
    small.max_response_bytes = 1024;
    let (message, refusals) = refused(small, &[format!("{}/big", server.url())]).await;
    assert!(
        message.contains("HttpResponseBodySize") && !message.contains("xxxx"),
        "{message}"
    );
    assert!(
        refusals[0].contains("the response is 4096 bytes; the limit is 1024"),
        "{refusals:?}"
    );

    // Too many requests in one evaluation.
    server.set_route(|_| Reply::new(200, "fine"));
    let mut few = allowing(&server);
    few.max_requests_per_evaluation = 2;
    let urls: Vec<String> = (0..3).map(|i| format!("{}/r{i}", server.url())).collect();
    let (message, refusals) = refused(few, &urls).await;
    assert_eq!(message.matches("200 fine").count(), 2, "{message}");
    assert!(
        refusals[0].contains("more than 2 requests in one evaluation"),
        "{refusals:?}"
    );
}

#[tokio::test]
async fn a_server_slower_than_the_request_timeout_is_cut_off_inside_the_evaluation_deadline() {
    let server = LoopbackServer::start(|_| Reply::new(200, "late").after(Duration::from_secs(30)));
    let engine = Engine::new(EngineConfig::default()).unwrap();
    let check = engine.load(&check_bytes("misbehave")).unwrap();
    let mut policy = allowing(&server);
    policy.request_timeout = Duration::from_millis(300);
    let started = Instant::now();
    let evaluation = engine
        .evaluate_with(
            &check,
            &fetch(&[format!("{}/slow", server.url())]),
            &limits(),
            &grant(policy),
        )
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let message = evaluation.outcome.unwrap().message;
    assert!(message.contains("HttpResponseTimeout"), "{message}");
    assert!(
        evaluation.refusals[0].contains("no complete answer within 300ms"),
        "{:?}",
        evaluation.refusals
    );

    // A request timeout longer than the evaluation's (the default 2 s against the default 1 s evaluation):
    // the request is cut off a tenth of the evaluation before its deadline, so the check gets an error it
    // can handle instead of the evaluation ending as a timeout.
    let started = Instant::now();
    let evaluation = engine
        .evaluate_with(
            &check,
            &fetch(&[format!("{}/slow", server.url())]),
            &Limits::default(),
            &grant(allowing(&server)),
        )
        .await;
    let elapsed = started.elapsed();
    let message = evaluation
        .outcome
        .expect("the check answered: its request failed in time")
        .message;
    assert!(message.contains("HttpResponseTimeout"), "{message}");
    let cut_off_ms: u64 = evaluation.refusals[0]
        .split("no complete answer within ")
        .nth(1)
        .and_then(|rest| rest.strip_suffix("ms"))
        .and_then(|ms| ms.parse().ok())
        .unwrap_or_else(|| panic!("{:?}", evaluation.refusals));
    assert!(
        (800..=900).contains(&cut_off_ms),
        "cut off a tenth before the 1 s deadline: {cut_off_ms} ms"
    );
    assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
}

/// What the host sends is what it checked: the normalised path (dot segments cannot step out of an allowed
/// prefix), `Host` from the checked destination (a URL with userinfo is refused), credentials only to the
/// origin named for them; and a header the host sets cannot be set by the check, which is listed.
#[tokio::test]
async fn what_is_sent_is_what_was_checked() {
    let server = LoopbackServer::start(|_| Reply::new(200, "ok"));
    let other = LoopbackServer::start(|_| Reply::new(200, "other"));
    let mut policy = HttpPolicy::allowing(vec![
        UrlPattern::parse(&format!("{}/api", server.url())).unwrap(),
        UrlPattern::parse(&other.url()).unwrap(),
    ]);
    policy.headers.push(InjectedHeader {
        name: http::header::AUTHORIZATION,
        value: http::HeaderValue::from_static("Bearer s3cret"),
        only_to: vec![UrlPattern::parse(&server.url()).unwrap()],
    });
    let (message, refusals) = refused(
        policy.clone(),
        &[
            format!("{}/api/../admin", server.url()),
            format!("{}/api/./../admin", server.url()),
            format!("{}/api/%2e%2e/admin", server.url()),
            format!("{}/api/%2E%2E/admin", server.url()),
            format!("http://evil.internal@127.0.0.1:{}/api/x", server.port()),
            format!("{}/api/./v1/../x", server.url()),
            format!("{}/y", other.url()),
        ],
    )
    .await;
    assert_eq!(message.matches("HttpRequestDenied").count(), 4, "{message}");
    assert!(
        refusals[0].contains(&format!("127.0.0.1:{}/admin is not in", server.port())),
        "{refusals:?}"
    );
    assert!(
        refusals[4].contains("a user name or password in the URL is refused"),
        "{refusals:?}"
    );
    let received = server.requests();
    assert_eq!(
        received.len(),
        1,
        "only the normalised allowed path: {received:?}"
    );
    assert_eq!(received[0].line, "GET /api/x");
    assert_eq!(
        received[0].headers["host"],
        format!("127.0.0.1:{}", server.port())
    );
    assert_eq!(received[0].headers["authorization"], "Bearer s3cret");
    let elsewhere = other.requests();
    assert_eq!(elsewhere.len(), 1);
    assert!(
        !elsewhere[0].headers.contains_key("authorization"),
        "credentials stay with their origin: {elsewhere:?}"
    );

    // A check setting the credentials header or Host gets an error, and the refusal is listed.
    for header in ["Authorization", "Host"] {
        let engine = Engine::new(EngineConfig::default()).unwrap();
        let check = engine.load(&check_bytes("misbehave")).unwrap();
        let urls = serde_json::to_string(&[format!("{}/api/x", server.url())]).unwrap();
        let config = format!(r#"{{"mode":"fetch","urls":{urls},"headers":[["{header}","evil"]]}}"#);
        let evaluation = engine
            .evaluate_with(
                &check,
                &request("x", "{}", &config),
                &limits(),
                &grant(policy.clone()),
            )
            .await;
        let message = evaluation.outcome.unwrap().message;
        assert!(message.contains("error"), "{header}: {message}");
        assert!(
            evaluation
                .refusals
                .iter()
                .any(|refusal| refusal.contains(&format!(
                    "HTTP header {}: the check may not set it",
                    header.to_lowercase()
                ))),
            "{header}: {:?}",
            evaluation.refusals
        );
    }
    assert_eq!(
        server.request_count(),
        1,
        "no request with a forbidden header left"
    );
}

/// A name that resolves into a private network (here `localhost`, loopback) is refused unless the
/// allow-list names the address literally or the grant allows private networks.
#[tokio::test]
async fn a_name_resolving_to_a_private_network_is_refused_unless_allowed() {
    let server = LoopbackServer::start(|_| Reply::new(200, "internal"));
    let by_name = format!("http://localhost:{}", server.port());
    let policy = HttpPolicy::allowing(vec![UrlPattern::parse(&by_name).unwrap()]);
    let (message, refusals) = refused(policy.clone(), &[format!("{by_name}/x")]).await;
    assert!(message.contains("DestinationIpProhibited"), "{message}");
    assert!(
        refusals[0].contains("is a loopback address")
            && refusals[0].contains("allowPrivateNetworks"),
        "{refusals:?}"
    );
    assert_eq!(server.request_count(), 0);
    let mut private = policy;
    private.private_networks = HttpPolicy::all_private_networks();
    let (message, _) = refused(private, &[format!("{by_name}/x")]).await;
    assert_eq!(message, "200 internal");
}

/// A lookup service that knows one ConfigMap and refuses Secrets, as the operator's would.
struct OneConfigMap;

impl ClusterLookup for OneConfigMap {
    fn get<'a>(
        &'a self,
        target: &'a Target,
        kind: ObjectKind,
        namespace: Option<String>,
        name: String,
    ) -> LookupFuture<'a, Option<String>> {
        Box::pin(async move {
            if kind.kind == "Secret" {
                return Err(format!("Secret {name} is not granted to this check"));
            }
            let namespace = namespace
                .or_else(|| target.namespace.clone())
                .unwrap_or_default();
            Ok((namespace == "default" && name == "db")
                .then(|| r#"{"data":{"host":"db"}}"#.to_owned()))
        })
    }

    fn list<'a>(
        &'a self,
        _target: &'a Target,
        _kind: ObjectKind,
        _namespace: Option<String>,
        _selector: String,
    ) -> LookupFuture<'a, Vec<String>> {
        Box::pin(async { Ok(Vec::new()) })
    }
}

#[tokio::test]
async fn lookups_reach_the_embedders_service_only_when_granted_and_within_budget() {
    let engine = Engine::new(EngineConfig::default()).unwrap();
    let check = engine.load(&check_bytes("misbehave")).unwrap();
    let lookup = |kind: &str, name: &str| {
        request(
            "x",
            "{}",
            &format!(r#"{{"mode":"lookup","lookup":["v1","{kind}","","{name}"]}}"#),
        )
    };
    let ungranted = engine
        .evaluate(&check, &lookup("ConfigMap", "db"), &limits())
        .await;
    let failure = ungranted.outcome.unwrap_err();
    assert!(
        failure.message.contains("lookups are not granted"),
        "{failure}"
    );
    assert!(
        ungranted.refusals[0].contains("get v1/ConfigMap db"),
        "{:?}",
        ungranted.refusals
    );

    let grants = Grants {
        cluster: Some(Arc::new(OneConfigMap)),
        ..Grants::default()
    };
    let found = engine
        .evaluate_with(&check, &lookup("ConfigMap", "db"), &limits(), &grants)
        .await;
    assert!(found.outcome.unwrap().message.contains("\"host\""));
    let secret = engine
        .evaluate_with(&check, &lookup("Secret", "token"), &limits(), &grants)
        .await;
    assert!(
        secret
            .outcome
            .unwrap_err()
            .message
            .contains("Secret token is not granted")
    );
    assert!(
        secret.refusals[0].contains("get v1/Secret token"),
        "{:?}",
        secret.refusals
    );

    let none_left = Grants {
        lookups_per_evaluation: 1,
        ..grants
    };
    let within = engine
        .evaluate_with(&check, &lookup("ConfigMap", "db"), &limits(), &none_left)
        .await;
    assert!(within.outcome.is_ok(), "one lookup fits a budget of one");
}

#[tokio::test]
async fn a_configuration_is_validated_once_by_the_checks_own_rules() {
    let engine = Engine::new(EngineConfig::default()).unwrap();
    let check = engine.load(&check_bytes("external-dependency")).unwrap();
    assert_eq!(
        engine
            .validate_config(&check, r#"{"endpoint":"http://127.0.0.1:1/d/"}"#, &limits())
            .await,
        Ok(())
    );
    let rejected = engine
        .validate_config(&check, r#"{"endpoint":"ftp://x/"}"#, &limits())
        .await
        .unwrap_err();
    assert_eq!(rejected.kind, FailureKind::InvalidConfig);
    assert!(
        rejected
            .message
            .contains("must be an http:// or https:// URL"),
        "{rejected}"
    );
    let undecodable = engine
        .validate_config(&check, r#"{"retryAfterSeconds":"soon"}"#, &limits())
        .await
        .unwrap_err();
    assert!(
        undecodable
            .message
            .starts_with("invalid check configuration"),
        "{undecodable}"
    );

    // A 0.1 check has no validate-config: every configuration is accepted at load.
    let frozen = engine.load(&check_bytes("frozen-contract-v0-1")).unwrap();
    assert!(!frozen.validates_config());
    assert_eq!(
        engine
            .validate_config(&frozen, "not even JSON", &limits())
            .await,
        Ok(())
    );
}

#[tokio::test]
async fn a_check_built_against_the_frozen_0_1_contract_runs_beside_0_2_checks() {
    let engine = Engine::new(EngineConfig::default()).unwrap();
    let frozen = engine.load(&check_bytes("frozen-contract-v0-1")).unwrap();
    assert_eq!(frozen.info().world, "preflight:check/preflight-check@0.1.0");
    let current = engine.load(&check_bytes("dependency-ready")).unwrap();
    assert_eq!(
        current.info().world,
        "preflight:check/preflight-check@0.2.0"
    );

    let object = |name| {
        request(
            name,
            r#"{"dependency":"db","dependsOn":["db"]}"#,
            r#"{"available":["db"]}"#,
        )
    };
    let old = engine
        .evaluate(&frozen, &object("a"), &limits())
        .await
        .outcome
        .unwrap();
    let new = engine
        .evaluate(&current, &object("a"), &limits())
        .await
        .outcome
        .unwrap();
    assert!(old.proceed && new.proceed);
    assert_eq!(
        (old.reason.as_str(), old.message.as_str()),
        ("Available", "a needs db")
    );
    assert!(old.outputs.is_empty());
    let missing = engine
        .evaluate(
            &frozen,
            &request("b", r#"{"dependency":"queue"}"#, r#"{"available":["db"]}"#),
            &limits(),
        )
        .await
        .outcome
        .unwrap();
    assert_eq!(missing.requeue_after, Some(Duration::from_secs(30)));
}

/// A TLS server on 127.0.0.1 for `localhost`, with a certificate from a private CA made for the test:
/// returns its port and the CA's PEM. Answers every request with `200 secure`.
async fn private_tls_server() -> (u16, String) {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let server_key = KeyPair::generate().unwrap();
    let server_cert = CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&server_key, &ca)
        .unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![server_cert.der().clone()],
        rustls_pki_types::PrivateKeyDer::try_from(server_key.serialize_der()).unwrap(),
    )
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut head = [0u8; 1024];
                let _ = tls.read(&mut head).await;
                let _ = tls
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-length: 6\r\nconnection: close\r\n\r\nsecure",
                    )
                    .await;
                let _ = tls.shutdown().await;
            });
        }
    });
    (port, ca.pem())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_trusts_a_private_ca_only_when_its_bundle_is_granted() {
    let (port, ca_pem) = private_tls_server().await;
    let url = format!("https://localhost:{port}/x");
    let pattern = UrlPattern::parse(&format!("https://localhost:{port}")).unwrap();
    // The certificate names `localhost`, a name for loopback: the grant opens private networks.
    let mut untrusting = HttpPolicy::allowing(vec![pattern.clone()]);
    untrusting.private_networks = HttpPolicy::all_private_networks();

    let (message, refusals) = refused(untrusting.clone(), std::slice::from_ref(&url)).await;
    assert!(message.contains("TlsCertificateError"), "{message}");
    assert!(refusals[0].contains("TLS with localhost"), "{refusals:?}");

    let mut trusting = untrusting;
    trusting.extra_roots_pem = Some(ca_pem.into_bytes());
    let (message, refusals) = refused(trusting, &[url]).await;
    assert_eq!(message, "200 secure", "{refusals:?}");

    let mut garbage = HttpPolicy::allowing(Vec::new());
    garbage.extra_roots_pem = Some(b"not a certificate".to_vec());
    let error = HttpGrant::new(garbage).unwrap_err().to_string();
    assert!(error.contains("CA bundle"), "{error}");
}
