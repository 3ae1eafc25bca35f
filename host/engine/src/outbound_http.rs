//! A check's outbound HTTP (`wasi:http/outgoing-handler`), enforced in the host before any connection:
//! the allow-list, the addresses that stay forbidden, a request count, a per-request time and size budget,
//! credentials the check never sees, and the per-check response cache.
//!
//! The host dials the address it checked (no second name resolution between check and connect), speaks
//! HTTP/1.1 over TCP or TLS (rustls with the system's roots plus an optional private CA), and hands the
//! check a response read whole, at most `max_response_bytes`. What it sends is what it checked: the path
//! normalised (no dot segments), `Host` built from the checked host and port (an authority with userinfo
//! is refused), credentials only to their origins. Redirects are the check's own business: a client that
//! follows one sends a new request, which passes the same checks (and carries credentials only if its
//! origin is theirs).

use crate::Error;
use crate::http_cache::{ResponseCache, StoredResponse};
use crate::http_policy::{HttpPolicy, default_port, normalize_path};
use bytes::BytesMut;
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};
use wasmtime_wasi_http::{
    DEFAULT_FORBIDDEN_HEADERS, Error as HttpError, ForbiddenHeaderFilter, RequestOptions, WasiBody,
    WasiHttpHooks,
};

/// Outbound HTTP granted to a check: its policy, its TLS roots and its response cache. Build one per check
/// configuration and share it (`Arc`) across evaluations, so that the cache serves them all.
pub struct HttpGrant {
    policy: HttpPolicy,
    tls: Arc<rustls::ClientConfig>,
    cache: ResponseCache,
}

impl HttpGrant {
    /// Prepares `policy`: loads the TLS roots (the system's, plus `extra_roots_pem`). Fails on a PEM bundle
    /// that holds no usable certificate.
    pub fn new(policy: HttpPolicy) -> Result<Self, Error> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add_parsable_certificates(system_roots().iter().cloned());
        if let Some(pem) = &policy.extra_roots_pem {
            let extra: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
                .collect::<Result<_, _>>()
                .map_err(|error| {
                    Error::Grant(format!("the CA bundle is not valid PEM: {error}"))
                })?;
            let (added, _) = roots.add_parsable_certificates(extra);
            if added == 0 {
                return Err(Error::Grant(
                    "the CA bundle holds no usable certificate".to_owned(),
                ));
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|error| Error::Grant(format!("TLS setup: {error}")))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Self {
            cache: ResponseCache::new(policy.cache_entries),
            policy,
            tls: Arc::new(tls),
        })
    }

    /// The policy this grant enforces.
    pub fn policy(&self) -> &HttpPolicy {
        &self.policy
    }
}

impl std::fmt::Debug for HttpGrant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpGrant")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

/// The system's trusted roots, read once per process.
fn system_roots() -> &'static [CertificateDer<'static>] {
    static ROOTS: OnceLock<Vec<CertificateDer<'static>>> = OnceLock::new();
    ROOTS.get_or_init(|| rustls_native_certs::load_native_certs().certs)
}

/// The `wasi:http` hooks of one evaluation: what is granted, how many requests were sent, and what was
/// refused (each naming its destination, reported with the evaluation).
pub(crate) struct OutboundHttp {
    grant: Option<Arc<HttpGrant>>,
    sent: Arc<AtomicU32>,
    refusals: Arc<Mutex<Vec<String>>>,
    /// When a request must have its answer, so that the check still has time to handle a failure: the
    /// evaluation's deadline less a tenth of its timeout. Set when the evaluation is armed.
    answer_by: Option<Instant>,
}

impl OutboundHttp {
    pub fn new(grant: Option<Arc<HttpGrant>>, refusals: Arc<Mutex<Vec<String>>>) -> Self {
        Self {
            grant,
            sent: Arc::new(AtomicU32::new(0)),
            refusals,
            answer_by: None,
        }
    }

    /// Requests of this evaluation must be answered by `answer_by`.
    pub fn answer_by(&mut self, answer_by: Instant) {
        self.answer_by = Some(answer_by);
    }

    /// The header names the check may not set: wasmtime's defaults (`Host` among them) and the ones the
    /// host injects (credentials).
    fn forbidden(&self) -> Vec<http::HeaderName> {
        self.grant
            .iter()
            .flat_map(|grant| {
                grant
                    .policy
                    .headers
                    .iter()
                    .map(|header| header.name.clone())
            })
            .collect()
    }
}

impl WasiHttpHooks for OutboundHttp {
    /// A check setting a header the host forbids gets an error, and the refusal is listed with the
    /// evaluation's other refusals when the header is `Host` or one the host injects (the headers a check
    /// might set on purpose; wasmtime's other forbidden headers are connection management).
    fn is_forbidden_header(&mut self, name: &http::HeaderName) -> bool {
        let injected = self.forbidden().contains(name);
        if injected || name == http::header::HOST {
            let why = if injected {
                "the host sets it (credentials from the check's grant)"
            } else {
                "the host sets it from the checked destination"
            };
            self.refusals
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(format!(
                    "HTTP header {name}: the check may not set it; {why}"
                ));
            return true;
        }
        DEFAULT_FORBIDDEN_HEADERS.contains(name)
    }

    /// The same rule as [`OutboundHttp::is_forbidden_header`], without the record (wasmtime's `wasi:http`
    /// 0.3 path asks for the closure).
    fn forbidden_header_filter(&mut self) -> ForbiddenHeaderFilter {
        let injected = self.forbidden();
        Arc::new(move |name| DEFAULT_FORBIDDEN_HEADERS.contains(name) || injected.contains(name))
    }

    /// `Host` is set by [`send`] from the host and port it checked, never from the check's authority.
    fn set_host_header(&mut self) -> bool {
        false
    }

    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        _options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ) -> Box<
        dyn Future<
                Output = Result<
                    (
                        http::Response<WasiBody>,
                        Box<dyn Future<Output = Result<(), HttpError>> + Send>,
                    ),
                    HttpError,
                >,
            > + Send,
    > {
        let (grant, sent, refusals, answer_by) = (
            self.grant.clone(),
            Arc::clone(&self.sent),
            Arc::clone(&self.refusals),
            self.answer_by,
        );
        Box::new(async move {
            match send(grant, request, &sent, answer_by).await {
                Ok(response) => Ok((
                    response,
                    Box::new(async { Ok(()) }) as Box<dyn Future<Output = _> + Send>,
                )),
                Err(refusal) => {
                    refusals
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(refusal.message);
                    Err(refusal.code)
                }
            }
        })
    }
}

/// A request the host refused or could not complete: the code the check sees, the message the operator shows.
struct Refusal {
    code: HttpError,
    message: String,
}

/// Checks and sends one request; answers from the cache when it can.
async fn send(
    grant: Option<Arc<HttpGrant>>,
    request: http::Request<WasiBody>,
    sent: &AtomicU32,
    answer_by: Option<Instant>,
) -> Result<http::Response<WasiBody>, Refusal> {
    let uri = request.uri().clone();
    let shown = format!("{} {uri}", request.method());
    let refuse = |code: HttpError, why: String| Refusal {
        code,
        message: format!("HTTP {shown}: {why}"),
    };
    let Some(grant) = grant else {
        return Err(refuse(
            HttpError::HttpRequestDenied,
            "outbound HTTP is not granted to this check (its ConfigMap has no `http` key)"
                .to_owned(),
        ));
    };
    let policy = &grant.policy;
    if uri
        .authority()
        .is_some_and(|authority| authority.as_str().contains('@'))
    {
        return Err(refuse(
            HttpError::HttpRequestUriInvalid,
            "a user name or password in the URL is refused (credentials come from the grant)"
                .to_owned(),
        ));
    }
    let scheme = uri.scheme_str().unwrap_or("https").to_ascii_lowercase();
    let host = uri
        .host()
        .unwrap_or_default()
        .trim_matches(['[', ']'])
        .to_owned();
    let port = uri.port_u16().unwrap_or_else(|| default_port(&scheme));
    let path =
        normalize_path(uri.path()).map_err(|why| refuse(HttpError::HttpRequestUriInvalid, why))?;
    if !policy.allows(&scheme, &host, port, &path) {
        return Err(refuse(
            HttpError::HttpRequestDenied,
            format!("{scheme}://{host}:{port}{path} is not in the check's allow-list"),
        ));
    }
    let destination = Destination {
        scheme: &scheme,
        host: &host,
        port,
        path: &path,
    };
    let count = sent.fetch_add(1, Ordering::Relaxed) + 1;
    if count > policy.max_requests_per_evaluation {
        return Err(refuse(
            HttpError::HttpRequestDenied,
            format!(
                "more than {} requests in one evaluation",
                policy.max_requests_per_evaluation
            ),
        ));
    }
    let cache_key =
        (request.method() == http::Method::GET).then(|| destination.cache_key(uri.query()));
    let turn = match &cache_key {
        Some(key) => match grant.cache.get_or_turn(key).await {
            Ok(hit) => return Ok(to_response(hit)),
            Err(turn) => turn,
        },
        None => None,
    };
    let budget = answer_by.map_or(policy.request_timeout, |answer_by| {
        policy
            .request_timeout
            .min(answer_by.saturating_duration_since(Instant::now()))
    });
    let fetched = tokio::time::timeout(budget, fetch(&grant, request, &destination))
        .await
        .unwrap_or_else(|_| {
            Err((
                HttpError::HttpResponseTimeout,
                format!("no complete answer within {}", shown_duration(budget)),
            ))
        })
        .map_err(|(code, why)| refuse(code, why))?;
    if let Some(key) = &cache_key {
        grant.cache.store(key, &fetched);
    }
    drop(turn);
    Ok(to_response(fetched))
}

/// Where a request goes, as checked: the scheme, host and port, and the normalised path.
struct Destination<'a> {
    scheme: &'a str,
    host: &'a str,
    port: u16,
    path: &'a str,
}

impl Destination<'_> {
    /// The `Host` header: the checked host (an IPv6 literal in brackets), with the port unless it is the
    /// scheme's.
    fn host_header(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.to_owned()
        };
        if self.port == default_port(self.scheme) {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }

    /// The request target sent (origin form): the normalised path and the query.
    fn origin_form(&self, query: Option<&str>) -> String {
        match query {
            Some(query) => format!("{}?{query}", self.path),
            None => self.path.to_owned(),
        }
    }

    /// The key of a cached response: the request as sent.
    fn cache_key(&self, query: Option<&str>) -> String {
        format!(
            "{}://{}{}",
            self.scheme,
            self.host_header(),
            self.origin_form(query)
        )
    }
}

/// A duration as people read it in a message: `750ms`, `2s`.
fn shown_duration(duration: Duration) -> String {
    if duration.subsec_millis() == 0 && duration.as_secs() > 0 {
        format!("{}s", duration.as_secs())
    } else {
        format!("{}ms", duration.as_millis())
    }
}

/// Resolves, checks the address, connects and reads the whole response, within the size cap.
async fn fetch(
    grant: &HttpGrant,
    mut request: http::Request<WasiBody>,
    destination: &Destination<'_>,
) -> Result<StoredResponse, (HttpError, String)> {
    let policy = &grant.policy;
    let (scheme, host, port) = (destination.scheme, destination.host, destination.port);
    let addresses: Vec<IpAddr> = match host.parse::<IpAddr>() {
        Ok(address) => vec![address],
        Err(_) => tokio::net::lookup_host((host, port))
            .await
            .map_err(|error| {
                let code = HttpError::DnsError {
                    rcode: Some(error.to_string()),
                    info_code: None,
                };
                (code, format!("cannot resolve {host}: {error}"))
            })?
            .map(|address| address.ip())
            .collect(),
    };
    let dialable = policy
        .dialable(&addresses)
        .map_err(|why| (HttpError::DestinationIpProhibited, why))?;
    let tcp = connect(&dialable, port).await?;
    let origin_form = destination
        .origin_form(request.uri().query())
        .parse::<http::Uri>()
        .map_err(|error| (HttpError::HttpRequestUriInvalid, error.to_string()))?;
    *request.uri_mut() = origin_form;
    let host_header = http::HeaderValue::try_from(destination.host_header())
        .map_err(|error| (HttpError::HttpRequestUriInvalid, error.to_string()))?;
    request
        .headers_mut()
        .insert(http::header::HOST, host_header);
    for header in policy.headers_for(scheme, host, port, destination.path) {
        request
            .headers_mut()
            .insert(header.name.clone(), header.value.clone());
    }
    let (response, _connection) = if scheme == "https" {
        let name = ServerName::try_from(host.to_owned()).map_err(|error| {
            (
                HttpError::TlsProtocolError,
                format!("TLS name {host}: {error}"),
            )
        })?;
        let tls = tokio_rustls::TlsConnector::from(Arc::clone(&grant.tls))
            .connect(name, tcp)
            .await
            .map_err(|error| {
                (
                    HttpError::TlsCertificateError,
                    format!("TLS with {host}: {error}"),
                )
            })?;
        exchange(TokioIo::new(tls), request).await?
    } else {
        exchange(TokioIo::new(tcp), request).await?
    };
    let (parts, body) = response.into_parts();
    let limit = policy.max_response_bytes;
    let too_large = |size: String| {
        (
            HttpError::HttpResponseBodySize(None),
            format!("the response is {size} bytes; the limit is {limit}"),
        )
    };
    let declared = parts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok()?.parse::<u64>().ok());
    if let Some(declared) = declared.filter(|size| *size > limit as u64) {
        return Err(too_large(declared.to_string()));
    }
    let mut body = body;
    let mut read = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|error| {
            (
                HttpError::HttpResponseIncomplete,
                format!("reading the response: {error}"),
            )
        })?;
        if let Ok(data) = frame.into_data() {
            if read.len() + data.len() > limit {
                return Err(too_large(format!("more than {limit}")));
            }
            read.extend_from_slice(&data);
        }
    }
    Ok(StoredResponse {
        status: parts.status,
        headers: parts.headers,
        body: read.freeze(),
    })
}

/// Connects to the first of `addresses` that accepts (a name often resolves to `::1` and `127.0.0.1`, and a
/// server may listen on one of them only).
async fn connect(
    addresses: &[IpAddr],
    port: u16,
) -> Result<tokio::net::TcpStream, (HttpError, String)> {
    let mut failures = Vec::new();
    for address in addresses {
        match tokio::net::TcpStream::connect((*address, port)).await {
            Ok(stream) => return Ok(stream),
            Err(error) => failures.push(format!("{address}:{port}: {error}")),
        }
    }
    Err((
        HttpError::ConnectionRefused,
        format!("cannot connect to {}", failures.join(", ")),
    ))
}

/// One HTTP/1.1 exchange on a fresh connection (checks send few requests; the cache spares the rest): the
/// response head, and the task driving the connection, which must live until the body is read.
async fn exchange<T>(
    io: TokioIo<T>,
    request: http::Request<WasiBody>,
) -> Result<(http::Response<hyper::body::Incoming>, AbortOnDrop), (HttpError, String)>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let protocol = |error: hyper::Error| (HttpError::HttpProtocolError, format!("HTTP: {error}"));
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(protocol)?;
    let driver = AbortOnDrop(tokio::spawn(connection));
    let response = sender.send_request(request).await.map_err(protocol)?;
    Ok((response, driver))
}

/// Aborts a spawned task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<Result<(), hyper::Error>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The stored response as the check sees it.
fn to_response(stored: StoredResponse) -> http::Response<WasiBody> {
    let mut response = http::Response::new(
        http_body_util::Full::new(stored.body)
            .map_err(HttpError::from)
            .boxed_unsync(),
    );
    *response.status_mut() = stored.status;
    *response.headers_mut() = stored.headers;
    response
}
