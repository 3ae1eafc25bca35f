//! Where a check may send HTTP requests: the allow-list an administrator grants, and the addresses that
//! stay refused even when a name is allowed. Pure functions, so that every rule is tested without a network.

use std::net::IpAddr;
use std::time::Duration;

/// One allowed destination, written as a URL pattern: `scheme://host[:port][/path-prefix]`.
///
/// - `host` is a name or an IP literal, or `*.example.com` for any subdomain (not `example.com` itself);
/// - `port` defaults to the scheme's (80, 443); `*` allows any port;
/// - a path prefix matches whole segments: `/api` allows `/api` and `/api/x`, not `/apix`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlPattern {
    scheme: String,
    host: HostPattern,
    port: Option<u16>,
    path_prefix: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum HostPattern {
    Exact(String),
    Subdomains(String),
}

impl UrlPattern {
    /// Parses `https://deps.example.com/api`, `http://127.0.0.1:8080`, `https://*.example.com:*`.
    pub fn parse(pattern: &str) -> Result<Self, String> {
        let invalid = |why: &str| Err(format!("invalid URL pattern {pattern:?}: {why}"));
        let Some((scheme, rest)) = pattern.split_once("://") else {
            return invalid("it needs a scheme, e.g. https://host");
        };
        let scheme = scheme.to_ascii_lowercase();
        if scheme != "http" && scheme != "https" {
            return invalid("the scheme must be http or https");
        }
        let (authority, path) = match rest.find('/') {
            Some(slash) => (&rest[..slash], &rest[slash..]),
            None => (rest, ""),
        };
        if authority.contains('@') || path.contains(['?', '#']) {
            return invalid("no user, query or fragment");
        }
        let (host, port) = split_host_port(authority);
        let port = match port {
            None => Some(default_port(&scheme)),
            Some("*") => None,
            Some(port) => match port.parse::<u16>() {
                Ok(port) if port > 0 => Some(port),
                _ => return invalid("the port must be a number from 1 to 65535, or *"),
            },
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty()
            || host.contains('*') && !host.starts_with("*.")
            || host[1..].contains('*')
        {
            return invalid("the host must be a name, an IP literal or *.domain");
        }
        let host = match host.strip_prefix("*.") {
            Some(domain) => HostPattern::Subdomains(domain.to_ascii_lowercase()),
            None => HostPattern::Exact(host.to_ascii_lowercase()),
        };
        Ok(Self {
            scheme,
            host,
            port,
            path_prefix: path.trim_end_matches('/').to_owned(),
        })
    }

    /// Whether a request to `scheme://host:port/path` matches this pattern.
    pub fn matches(&self, scheme: &str, host: &str, port: u16, path: &str) -> bool {
        let host = host.to_ascii_lowercase();
        let host_matches = match &self.host {
            HostPattern::Exact(exact) => *exact == host,
            HostPattern::Subdomains(domain) => host
                .strip_suffix(domain.as_str())
                .is_some_and(|sub| sub.len() > 1 && sub.ends_with('.')),
        };
        let path_matches = path
            .strip_prefix(self.path_prefix.as_str())
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'));
        scheme.eq_ignore_ascii_case(&self.scheme)
            && host_matches
            && self.port.is_none_or(|allowed| allowed == port)
            && path_matches
    }

    /// The IP address this pattern names literally, if its host is one: such an address is allowed even when
    /// it is link-local or a cloud metadata address, because the administrator wrote it down.
    pub fn literal_address(&self) -> Option<IpAddr> {
        match &self.host {
            HostPattern::Exact(host) => host.parse().ok(),
            HostPattern::Subdomains(_) => None,
        }
    }
}

/// `host:port` → (`host`, `Some(port)`); an IPv6 literal keeps its brackets here.
fn split_host_port(authority: &str) -> (&str, Option<&str>) {
    if let Some(end) = authority.rfind(']') {
        let (host, rest) = authority.split_at(end + 1);
        return (host, rest.strip_prefix(':'));
    }
    match authority.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (authority, None),
    }
}

/// 443 for https, 80 otherwise.
pub(crate) fn default_port(scheme: &str) -> u16 {
    if scheme.eq_ignore_ascii_case("https") {
        443
    } else {
        80
    }
}

/// Why `address` is refused as a destination whatever name led to it, or `None` when it may be dialled:
/// link-local addresses (where cloud metadata services answer, 169.254.169.254) and the other well-known
/// metadata addresses. A check that could reach them could read the node's cloud credentials.
pub fn forbidden_address(address: IpAddr) -> Option<&'static str> {
    match address {
        IpAddr::V4(v4) if v4.is_link_local() => {
            Some("a link-local address (cloud metadata services live here)")
        }
        IpAddr::V4(v4) if v4.octets() == [100, 100, 100, 200] => Some("a cloud metadata address"),
        IpAddr::V4(_) => None,
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return forbidden_address(IpAddr::V4(v4));
            }
            if v6.segments()[0] & 0xffc0 == 0xfe80 {
                Some("a link-local address (cloud metadata services live here)")
            } else if v6.segments() == [0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254] {
                Some("a cloud metadata address")
            } else {
                None
            }
        }
    }
}

/// What a check may do over HTTP: where, how long, how much. Built by the operator from the check's
/// ConfigMap (or by the CLI from flags), credentials already resolved.
#[derive(Clone)]
pub struct HttpPolicy {
    /// Allowed destinations; a request matching none is refused before any connection.
    pub allow: Vec<UrlPattern>,
    /// Budget of one request, from connecting to the last byte of the response (inside the evaluation's
    /// own deadline, which ends everything).
    pub request_timeout: Duration,
    /// Largest response body a check may receive; a larger one is refused, its extra bytes unread.
    pub max_response_bytes: usize,
    /// Requests one evaluation may send (cached answers included).
    pub max_requests_per_evaluation: u32,
    /// Headers the host adds to every allowed request (credentials read from a Secret): the check never
    /// sees them and cannot set them.
    pub headers: Vec<(http::HeaderName, http::HeaderValue)>,
    /// PEM certificates trusted beside the system's roots (a private CA).
    pub extra_roots_pem: Option<Vec<u8>>,
    /// How many responses the per-check cache keeps (those with `Cache-Control: max-age`).
    pub cache_entries: usize,
}

impl HttpPolicy {
    /// 2 s per request.
    pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
    /// 256 KiB.
    pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 256 << 10;
    /// 8 requests per evaluation.
    pub const DEFAULT_MAX_REQUESTS: u32 = 8;
    /// 256 cached responses per check.
    pub const DEFAULT_CACHE_ENTRIES: usize = 256;

    /// A policy allowing `allow`, with the default limits, no credentials and no extra roots.
    pub fn allowing(allow: Vec<UrlPattern>) -> Self {
        Self {
            allow,
            request_timeout: Self::DEFAULT_REQUEST_TIMEOUT,
            max_response_bytes: Self::DEFAULT_MAX_RESPONSE_BYTES,
            max_requests_per_evaluation: Self::DEFAULT_MAX_REQUESTS,
            headers: Vec::new(),
            extra_roots_pem: None,
            cache_entries: Self::DEFAULT_CACHE_ENTRIES,
        }
    }

    /// Whether a request to `scheme://host:port/path` is allowed.
    pub fn allows(&self, scheme: &str, host: &str, port: u16, path: &str) -> bool {
        self.allow
            .iter()
            .any(|pattern| pattern.matches(scheme, host, port, path))
    }

    /// The addresses among `addresses` (what the host name resolved to) that may be dialled, in order; why
    /// none may, when none may.
    pub(crate) fn dialable(&self, addresses: &[IpAddr]) -> Result<Vec<IpAddr>, String> {
        let literal: Vec<IpAddr> = self
            .allow
            .iter()
            .filter_map(UrlPattern::literal_address)
            .collect();
        let (mut allowed, mut refused) = (Vec::new(), Vec::new());
        for address in addresses {
            match forbidden_address(*address) {
                Some(why) if !literal.contains(address) => {
                    refused.push(format!("{address} is {why}"))
                }
                _ => allowed.push(*address),
            }
        }
        match (allowed.is_empty(), refused.is_empty()) {
            (false, _) => Ok(allowed),
            (true, true) => Err("the name resolved to no address".to_owned()),
            (true, false) => Err(format!(
                "{}; list the address literally in the allow-list to allow it",
                refused.join(", ")
            )),
        }
    }
}

impl std::fmt::Debug for HttpPolicy {
    /// Header values are credentials: only their names are shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let headers: Vec<&str> = self.headers.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("HttpPolicy")
            .field("allow", &self.allow)
            .field("request_timeout", &self.request_timeout)
            .field("max_response_bytes", &self.max_response_bytes)
            .field(
                "max_requests_per_evaluation",
                &self.max_requests_per_evaluation,
            )
            .field("headers", &headers)
            .field("extra_roots", &self.extra_roots_pem.is_some())
            .field("cache_entries", &self.cache_entries)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allows(pattern: &str, url: (&str, &str, u16, &str)) -> bool {
        UrlPattern::parse(pattern)
            .unwrap()
            .matches(url.0, url.1, url.2, url.3)
    }

    #[test]
    fn patterns_match_scheme_host_port_and_whole_path_segments() {
        assert!(allows(
            "https://deps.example.com",
            ("https", "deps.example.com", 443, "/x")
        ));
        assert!(allows(
            "https://Deps.Example.com",
            ("HTTPS", "deps.EXAMPLE.com", 443, "/")
        ));
        assert!(!allows(
            "https://deps.example.com",
            ("http", "deps.example.com", 443, "/")
        ));
        assert!(!allows(
            "https://deps.example.com",
            ("https", "deps.example.com", 8443, "/")
        ));
        assert!(!allows(
            "https://deps.example.com",
            ("https", "evil.com", 443, "/")
        ));
        assert!(!allows(
            "https://deps.example.com",
            ("https", "deps.example.com.evil.com", 443, "/")
        ));
        assert!(allows(
            "http://127.0.0.1:8080",
            ("http", "127.0.0.1", 8080, "/")
        ));
        assert!(!allows(
            "http://127.0.0.1:8080",
            ("http", "127.0.0.1", 8081, "/")
        ));
        assert!(allows(
            "http://127.0.0.1:*",
            ("http", "127.0.0.1", 8081, "/")
        ));
        assert!(allows("http://[::1]:8080/", ("http", "::1", 8080, "/")));
        assert!(allows(
            "https://*.example.com",
            ("https", "a.b.example.com", 443, "/")
        ));
        assert!(!allows(
            "https://*.example.com",
            ("https", "example.com", 443, "/")
        ));
        assert!(!allows(
            "https://*.example.com",
            ("https", "badexample.com", 443, "/")
        ));
        assert!(allows("https://h/api", ("https", "h", 443, "/api")));
        assert!(allows("https://h/api/", ("https", "h", 443, "/api/v1")));
        assert!(!allows("https://h/api", ("https", "h", 443, "/apix")));
        assert!(!allows("https://h/api", ("https", "h", 443, "/")));
    }

    #[test]
    fn malformed_patterns_are_refused_with_the_reason() {
        for (pattern, why) in [
            ("deps.example.com", "scheme"),
            ("ftp://h", "http or https"),
            ("https://h:0", "port"),
            ("https://h:99999", "port"),
            ("https://user@h", "no user"),
            ("https://h/?q", "no user, query"),
            ("https://a*.h", "host"),
            ("https://", "host"),
        ] {
            let error = UrlPattern::parse(pattern).unwrap_err();
            assert!(error.contains(why), "{pattern}: {error}");
        }
    }

    #[test]
    fn link_local_and_metadata_addresses_are_forbidden() {
        for address in [
            "169.254.169.254",
            "169.254.0.1",
            "100.100.100.200",
            "fe80::1",
            "febf::1",
            "fd00:ec2::254",
            "::ffff:169.254.169.254",
        ] {
            assert!(
                forbidden_address(address.parse().unwrap()).is_some(),
                "{address}"
            );
        }
        for address in [
            "127.0.0.1",
            "10.0.0.1",
            "192.168.1.1",
            "::1",
            "fec0::1",
            "100.100.100.201",
            "8.8.8.8",
        ] {
            assert!(
                forbidden_address(address.parse().unwrap()).is_none(),
                "{address}"
            );
        }
    }

    #[test]
    fn a_forbidden_address_is_dialled_only_when_listed_literally() {
        let by_name =
            HttpPolicy::allowing(vec![UrlPattern::parse("http://metadata.internal").unwrap()]);
        let metadata: IpAddr = "169.254.169.254".parse().unwrap();
        let error = by_name.dialable(&[metadata]).unwrap_err();
        assert!(
            error.contains("169.254.169.254 is a link-local address"),
            "{error}"
        );
        let loopback: IpAddr = "127.0.0.1".parse().unwrap();
        assert_eq!(by_name.dialable(&[metadata, loopback]), Ok(vec![loopback]));

        let literal =
            HttpPolicy::allowing(vec![UrlPattern::parse("http://169.254.169.254").unwrap()]);
        assert_eq!(literal.dialable(&[metadata]), Ok(vec![metadata]));
        assert!(literal.dialable(&[]).is_err());
    }

    #[test]
    fn credentials_are_not_printed() {
        let mut policy = HttpPolicy::allowing(Vec::new());
        policy.headers.push((
            http::header::AUTHORIZATION,
            http::HeaderValue::from_static("Bearer secret-token"),
        ));
        let shown = format!("{policy:?}");
        assert!(
            shown.contains("authorization") && !shown.contains("secret-token"),
            "{shown}"
        );
    }
}
