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

/// Why `address` is refused as a destination whatever name led to it, unless the allow-list names it
/// literally: link-local addresses (where cloud metadata services answer, 169.254.169.254) and the other
/// well-known metadata addresses. A check that could reach them could read the node's cloud credentials.
/// `allowPrivateNetworks` never opens these.
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

/// Why `address` is in a private network, or `None` for a public address: loopback (127.0.0.0/8, ::1),
/// "this network" (0.0.0.0/8, ::), the private ranges (10/8, 172.16/12, 192.168/16), shared address space
/// (100.64/10) and unique local IPv6 (fc00::/7). Inside a cluster these reach internal services, and the
/// DNS of an allowed wildcard domain is not always the administrator's: they are refused unless the
/// allow-list names the address literally or the grant allows private networks.
pub fn private_address(address: IpAddr) -> Option<&'static str> {
    match address {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            if v4.is_loopback() {
                Some("a loopback address")
            } else if a == 0 {
                Some("an unspecified address (this host)")
            } else if v4.is_private() {
                Some("a private address")
            } else if a == 100 && (64..128).contains(&b) {
                Some("a shared (carrier-grade NAT) address")
            } else {
                None
            }
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return private_address(IpAddr::V4(v4));
            }
            if v6.is_loopback() {
                Some("a loopback address")
            } else if v6.is_unspecified() {
                Some("an unspecified address (this host)")
            } else if v6.segments()[0] & 0xfe00 == 0xfc00 {
                Some("a unique local (private) address")
            } else {
                None
            }
        }
    }
}

/// A request path as the host checks and sends it: unreserved characters decoded (`%2e` is `.`), dot
/// segments removed (RFC 3986, 5.2.4), so that `/api/../admin` is matched, and sent, as `/admin`. A path
/// that servers may read in more than one way (an encoded `/` or `\`, a raw `\`) is refused.
pub fn normalize_path(path: &str) -> Result<String, String> {
    let mut decoded = String::with_capacity(path.len());
    let mut rest = path;
    while let Some(at) = rest.find('%') {
        decoded.push_str(&rest[..at]);
        let escape = rest.get(at + 1..at + 3).unwrap_or_default();
        let byte = u8::from_str_radix(escape, 16)
            .map_err(|_| format!("the path {path:?} has a malformed %-escape"))?;
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                decoded.push(char::from(byte));
            }
            b'/' | b'\\' => {
                return Err(format!(
                    "the path {path:?} encodes a `/` or `\\`, which servers read in different ways"
                ));
            }
            _ => {
                decoded.push('%');
                decoded.push_str(&escape.to_ascii_uppercase());
            }
        }
        rest = &rest[at + 3..];
    }
    decoded.push_str(rest);
    if decoded.contains('\\') {
        return Err(format!(
            "the path {path:?} holds a `\\`, which servers read in different ways"
        ));
    }
    let mut segments: Vec<&str> = Vec::new();
    let mut parts = decoded.split('/').skip(1).peekable();
    while let Some(segment) = parts.next() {
        let last = parts.peek().is_none();
        match segment {
            "." | ".." => {
                if segment == ".." {
                    segments.pop();
                }
                if last {
                    segments.push("");
                }
            }
            segment => segments.push(segment),
        }
    }
    Ok(format!("/{}", segments.join("/")))
}

/// A header the host adds to requests (a credential read from a Secret): the check never sees it and cannot
/// set it, and it goes only to the origins named for it, never to another allowed destination.
#[derive(Clone)]
pub struct InjectedHeader {
    /// The header, e.g. `Authorization`.
    pub name: http::HeaderName,
    /// Its value.
    pub value: http::HeaderValue,
    /// Where it is sent: requests matching one of these (and the allow-list).
    pub only_to: Vec<UrlPattern>,
}

/// What a check may do over HTTP: where, how long, how much. Built by the operator from the check's
/// ConfigMap (or by the CLI from flags or the same grant file), credentials already resolved.
#[derive(Clone)]
pub struct HttpPolicy {
    /// Allowed destinations; a request matching none is refused before any connection.
    pub allow: Vec<UrlPattern>,
    /// Private networks (see [`private_address`]) an allowed name may resolve into; none by default.
    pub private_networks: Vec<ipnet::IpNet>,
    /// Budget of one request, from connecting to the last byte of the response. Never more than what is
    /// left of the evaluation minus a tenth of its timeout, so that a hanging server gives the check an
    /// error it can handle rather than ending the evaluation.
    pub request_timeout: Duration,
    /// Largest response body a check may receive; a larger one is refused, its extra bytes unread.
    pub max_response_bytes: usize,
    /// Requests one evaluation may send (cached answers included).
    pub max_requests_per_evaluation: u32,
    /// Headers the host adds to the requests of their origins (credentials read from a Secret).
    pub headers: Vec<InjectedHeader>,
    /// PEM certificates trusted beside the system's roots (a private CA).
    pub extra_roots_pem: Option<Vec<u8>>,
    /// How many responses the per-check cache keeps (those with `Cache-Control: max-age`).
    pub cache_entries: usize,
}

impl HttpPolicy {
    /// 2 s per request (and never past the evaluation's deadline: see [`HttpPolicy::request_timeout`]).
    pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
    /// 256 KiB.
    pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 256 << 10;
    /// 8 requests per evaluation.
    pub const DEFAULT_MAX_REQUESTS: u32 = 8;
    /// 256 cached responses per check.
    pub const DEFAULT_CACHE_ENTRIES: usize = 256;

    /// A policy allowing `allow`, with the default limits, no private networks, no credentials and no extra
    /// roots.
    pub fn allowing(allow: Vec<UrlPattern>) -> Self {
        Self {
            allow,
            private_networks: Vec::new(),
            request_timeout: Self::DEFAULT_REQUEST_TIMEOUT,
            max_response_bytes: Self::DEFAULT_MAX_RESPONSE_BYTES,
            max_requests_per_evaluation: Self::DEFAULT_MAX_REQUESTS,
            headers: Vec::new(),
            extra_roots_pem: None,
            cache_entries: Self::DEFAULT_CACHE_ENTRIES,
        }
    }

    /// Every private network: what `allowPrivateNetworks: true` grants.
    pub fn all_private_networks() -> Vec<ipnet::IpNet> {
        ["0.0.0.0/0", "::/0"]
            .iter()
            .filter_map(|network| network.parse().ok())
            .collect()
    }

    /// Whether a request to `scheme://host:port/path` is allowed.
    pub fn allows(&self, scheme: &str, host: &str, port: u16, path: &str) -> bool {
        self.allow
            .iter()
            .any(|pattern| pattern.matches(scheme, host, port, path))
    }

    /// The injected headers a request to `scheme://host:port/path` carries: those whose origins it matches.
    pub fn headers_for<'a>(
        &'a self,
        scheme: &'a str,
        host: &'a str,
        port: u16,
        path: &'a str,
    ) -> impl Iterator<Item = &'a InjectedHeader> + 'a {
        self.headers.iter().filter(move |header| {
            header
                .only_to
                .iter()
                .any(|pattern| pattern.matches(scheme, host, port, path))
        })
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
        let mut private = false;
        for address in addresses {
            if literal.contains(address) {
                allowed.push(*address);
            } else if let Some(why) = forbidden_address(*address) {
                refused.push(format!("{address} is {why}"));
            } else if let Some(why) = private_address(*address).filter(|_| {
                !self
                    .private_networks
                    .iter()
                    .any(|network| network.contains(address))
            }) {
                private = true;
                refused.push(format!("{address} is {why}"));
            } else {
                allowed.push(*address);
            }
        }
        let remedy = if private {
            "list the address literally in the allow-list, or allow private networks in the grant \
             (allowPrivateNetworks), to allow it"
        } else {
            "list the address literally in the allow-list to allow it"
        };
        match (allowed.is_empty(), refused.is_empty()) {
            (false, _) => Ok(allowed),
            (true, true) => Err("the name resolved to no address".to_owned()),
            (true, false) => Err(format!("{}; {remedy}", refused.join(", "))),
        }
    }
}

impl std::fmt::Debug for HttpPolicy {
    /// Header values are credentials: only their names are shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let headers: Vec<&str> = self
            .headers
            .iter()
            .map(|header| header.name.as_str())
            .collect();
        f.debug_struct("HttpPolicy")
            .field("allow", &self.allow)
            .field("private_networks", &self.private_networks)
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
        let public: IpAddr = "192.0.2.7".parse().unwrap();
        assert_eq!(by_name.dialable(&[metadata, public]), Ok(vec![public]));

        let literal =
            HttpPolicy::allowing(vec![UrlPattern::parse("http://169.254.169.254").unwrap()]);
        assert_eq!(literal.dialable(&[metadata]), Ok(vec![metadata]));
        assert!(literal.dialable(&[]).is_err());
    }

    #[test]
    fn private_networks_are_refused_unless_named_or_granted() {
        for address in [
            "127.0.0.1",
            "127.1.2.3",
            "10.0.0.1",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "100.64.0.1",
            "100.127.255.255",
            "0.0.0.0",
            "::1",
            "::",
            "fc00::1",
            "fdff::1",
            "::ffff:10.1.2.3",
        ] {
            assert!(
                private_address(address.parse().unwrap()).is_some(),
                "{address}"
            );
        }
        for address in ["172.32.0.1", "100.128.0.1", "8.8.8.8", "2001:db8::1"] {
            assert!(
                private_address(address.parse().unwrap()).is_none(),
                "{address}"
            );
        }
        let wildcard =
            HttpPolicy::allowing(vec![UrlPattern::parse("https://*.example.com").unwrap()]);
        let internal: IpAddr = "10.0.0.5".parse().unwrap();
        let error = wildcard.dialable(&[internal]).unwrap_err();
        assert!(
            error.contains("10.0.0.5 is a private address")
                && error.contains("allowPrivateNetworks"),
            "{error}"
        );
        let literal =
            HttpPolicy::allowing(vec![UrlPattern::parse("http://10.0.0.5:8080").unwrap()]);
        assert_eq!(literal.dialable(&[internal]), Ok(vec![internal]));
        let mut granted = wildcard.clone();
        granted.private_networks = vec!["10.0.0.0/24".parse().unwrap()];
        assert_eq!(granted.dialable(&[internal]), Ok(vec![internal]));
        assert!(granted.dialable(&["10.0.1.5".parse().unwrap()]).is_err());
        let mut everything = wildcard;
        everything.private_networks = HttpPolicy::all_private_networks();
        assert_eq!(everything.dialable(&[internal]), Ok(vec![internal]));
        let metadata: IpAddr = "169.254.169.254".parse().unwrap();
        assert!(
            everything.dialable(&[metadata]).is_err(),
            "private networks never open the metadata addresses"
        );
    }

    #[test]
    fn paths_are_normalised_before_matching_and_ambiguous_ones_refused() {
        for (path, normalised) in [
            ("/api/x", "/api/x"),
            ("/", "/"),
            ("/api/../admin", "/admin"),
            ("/api/./../admin", "/admin"),
            ("/api/%2e%2e/admin", "/admin"),
            ("/api/%2E%2E/admin", "/admin"),
            ("/api/%2e/x", "/api/x"),
            ("/api/..", "/"),
            ("/api/.", "/api/"),
            ("/../../etc", "/etc"),
            ("/api/%41b", "/api/Ab"),
            ("/api/a%20b", "/api/a%20b"),
            ("/api/a%3fb", "/api/a%3Fb"),
        ] {
            assert_eq!(normalize_path(path).as_deref(), Ok(normalised), "{path}");
        }
        for path in [
            "/api/%2f..%2fadmin",
            "/api/%5c",
            "/api\\..\\admin",
            "/api/%zz",
            "/api/%2",
        ] {
            assert!(normalize_path(path).is_err(), "{path}");
        }
        let policy = HttpPolicy::allowing(vec![
            UrlPattern::parse("http://127.0.0.1:8080/api").unwrap(),
        ]);
        let sent = normalize_path("/api/%2e%2e/admin").unwrap();
        assert!(!policy.allows("http", "127.0.0.1", 8080, &sent));
    }

    #[test]
    fn credentials_go_only_to_their_origins() {
        let mut policy = HttpPolicy::allowing(vec![
            UrlPattern::parse("https://deps.example.com").unwrap(),
            UrlPattern::parse("https://other.example.com").unwrap(),
        ]);
        policy.headers.push(InjectedHeader {
            name: http::header::AUTHORIZATION,
            value: http::HeaderValue::from_static("Bearer t"),
            only_to: vec![UrlPattern::parse("https://deps.example.com").unwrap()],
        });
        let to = |host: &str| {
            policy
                .headers_for("https", host, 443, "/x")
                .map(|header| header.name.as_str().to_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(to("deps.example.com"), ["authorization"]);
        assert!(to("other.example.com").is_empty());
    }

    #[test]
    fn credentials_are_not_printed() {
        let mut policy = HttpPolicy::allowing(Vec::new());
        policy.headers.push(InjectedHeader {
            name: http::header::AUTHORIZATION,
            value: http::HeaderValue::from_static("Bearer secret-token"),
            only_to: Vec::new(),
        });
        let shown = format!("{policy:?}");
        assert!(
            shown.contains("authorization") && !shown.contains("secret-token"),
            "{shown}"
        );
    }
}
