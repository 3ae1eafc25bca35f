//! Outbound HTTP from a check, through the standard `wasi:http/outgoing-handler` (contract 0.2).
//!
//! The host sends a request only when the check's ConfigMap allows its destination (`http` key); anything
//! else fails with [`HttpError`] before any connection, and the host reports the refused destination on its
//! side. The host also enforces a per-request timeout, a response-size cap and a requests-per-evaluation
//! cap, may add credentials the check never sees, and answers from its cache when a response carried
//! `Cache-Control: max-age`.
//!
//! ```no_run
//! let response = preflight_guest::http::get("https://deps.example.com/databases/main")?;
//! if response.status == 404 {
//!     // not there yet
//! }
//! # Ok::<(), preflight_guest::http::HttpError>(())
//! ```

use std::fmt;

/// How many redirects [`get`] follows; each one is a new request the host checks against the allow-list.
pub const MAX_REDIRECTS: usize = 5;

/// A response read whole (the host caps its size).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The HTTP status code.
    pub status: u16,
    /// Header names (lower case) and values, in the order received.
    pub headers: Vec<(String, Vec<u8>)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    /// The first value of header `name` (case-insensitive), as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .and_then(|(_, value)| std::str::from_utf8(value).ok())
    }

    /// The body decoded as JSON into `T`.
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, HttpError> {
        serde_json::from_slice(&self.body)
            .map_err(|error| HttpError(format!("the response is not the JSON expected: {error}")))
    }

    /// Whether the status is 2xx.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// A request that failed or was refused; the message names the `wasi:http` error code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpError(pub String);

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for HttpError {}

/// Sends `GET url` and reads the whole response, following up to [`MAX_REDIRECTS`] redirects.
pub fn get(url: &str) -> Result<Response, HttpError> {
    get_with_headers(url, &[])
}

/// [`get`] with request headers (`Accept`, say). Headers the host sets are refused with an error: `Host`
/// (built from the checked destination) and the credentials its grant injects.
pub fn get_with_headers(url: &str, headers: &[(&str, &str)]) -> Result<Response, HttpError> {
    let mut url = url.to_owned();
    for _ in 0..=MAX_REDIRECTS {
        let response = send_get(&url, headers)?;
        let location = match response.status {
            301 | 302 | 303 | 307 | 308 => response.header("location").map(str::to_owned),
            _ => None,
        };
        match location {
            Some(location) => url = resolve(&url, &location)?,
            None => return Ok(response),
        }
    }
    Err(HttpError(format!(
        "more than {MAX_REDIRECTS} redirects from {url}"
    )))
}

/// The parts of an absolute `http(s)` URL: scheme, authority, path with query.
pub(crate) fn split_url(url: &str) -> Result<(&str, &str, &str), HttpError> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| HttpError(format!("{url:?} is not an absolute URL")))?;
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return Err(HttpError(format!(
            "{url:?}: the scheme must be http or https"
        )));
    }
    let path_start = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(path_start);
    if authority.is_empty() {
        return Err(HttpError(format!("{url:?} has no host")));
    }
    Ok((scheme, authority, if path.is_empty() { "/" } else { path }))
}

/// `location` (absolute, or absolute-path) relative to `base`.
fn resolve(base: &str, location: &str) -> Result<String, HttpError> {
    if location.contains("://") {
        return Ok(location.to_owned());
    }
    let (scheme, authority, _) = split_url(base)?;
    if location.starts_with('/') {
        Ok(format!("{scheme}://{authority}{location}"))
    } else {
        Err(HttpError(format!(
            "unsupported redirect location {location:?} (relative paths are not followed)"
        )))
    }
}

#[cfg(target_arch = "wasm32")]
fn send_get(url: &str, headers: &[(&str, &str)]) -> Result<Response, HttpError> {
    use wasip2::http::outgoing_handler;
    use wasip2::http::types::{Fields, IncomingBody, Method, OutgoingRequest, Scheme};
    use wasip2::io::streams::StreamError;

    let (scheme, authority, path) = split_url(url)?;
    let fields = Fields::new();
    for (name, value) in headers {
        fields
            .append(name, value.as_bytes())
            .map_err(|error| HttpError(format!("GET {url}: header {name}: {error:?}")))?;
    }
    let request = OutgoingRequest::new(fields);
    let scheme = if scheme.eq_ignore_ascii_case("https") {
        Scheme::Https
    } else {
        Scheme::Http
    };
    let invalid = |_| HttpError(format!("GET {url}: invalid URL"));
    request.set_method(&Method::Get).map_err(invalid)?;
    request.set_scheme(Some(&scheme)).map_err(invalid)?;
    request.set_authority(Some(authority)).map_err(invalid)?;
    request.set_path_with_query(Some(path)).map_err(invalid)?;
    let failed = |code: wasip2::http::types::ErrorCode| HttpError(format!("GET {url}: {code:?}"));
    let pending = outgoing_handler::handle(request, None).map_err(failed)?;
    pending.subscribe().block();
    let response = match pending.get() {
        Some(Ok(Ok(response))) => response,
        Some(Ok(Err(code))) => return Err(failed(code)),
        Some(Err(())) | None => return Err(HttpError(format!("GET {url}: no response"))),
    };
    let status = response.status();
    let headers = response.headers().entries();
    let body = response
        .consume()
        .map_err(|()| HttpError(format!("GET {url}: the body cannot be read")))?;
    let mut read = Vec::new();
    {
        let stream = body
            .stream()
            .map_err(|()| HttpError(format!("GET {url}: the body cannot be read")))?;
        loop {
            match stream.blocking_read(64 << 10) {
                Ok(chunk) => read.extend_from_slice(&chunk),
                Err(StreamError::Closed) => break,
                Err(StreamError::LastOperationFailed(error)) => {
                    return Err(HttpError(format!(
                        "GET {url}: reading the body: {}",
                        error.to_debug_string()
                    )));
                }
            }
        }
    }
    drop(IncomingBody::finish(body));
    Ok(Response {
        status,
        headers,
        body: read,
    })
}

/// Natively (unit tests) there is no host to send through: run the component (`preflight run`,
/// `preflight test`) to exercise HTTP.
#[cfg(not(target_arch = "wasm32"))]
fn send_get(url: &str, _headers: &[(&str, &str)]) -> Result<Response, HttpError> {
    split_url(url)?;
    Err(HttpError(format!(
        "GET {url}: outbound HTTP needs the preflight host; run the component with `preflight run`"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_scheme_authority_and_path() {
        assert_eq!(
            split_url("http://127.0.0.1:8080/deps/a?x=1").unwrap(),
            ("http", "127.0.0.1:8080", "/deps/a?x=1")
        );
        assert_eq!(split_url("https://h").unwrap(), ("https", "h", "/"));
        assert_eq!(split_url("https://h?q").unwrap(), ("https", "h", "?q"));
        assert!(split_url("ftp://h/").is_err());
        assert!(split_url("/relative").is_err());
        assert!(split_url("http:///x").is_err());
    }

    #[test]
    fn redirects_resolve_against_the_request() {
        assert_eq!(resolve("http://a:1/x", "/y").unwrap(), "http://a:1/y");
        assert_eq!(
            resolve("http://a:1/x", "http://b:2/z").unwrap(),
            "http://b:2/z"
        );
        assert!(resolve("http://a:1/x", "y").is_err());
    }
}
