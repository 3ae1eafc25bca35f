//! The operator as a child process (`preflight operator`), the way it runs in a pod: started, measured and
//! stopped by the operator benchmarks; stopped too when a benchmark panics, so that no operator outlives it.

use preflight_kube_harness::kubeconfig;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A running `preflight operator`; dropping it stops it (SIGTERM, then up to 20 s for a graceful exit).
pub struct ChildOperator {
    child: Child,
    /// Where it serves /metrics.
    pub address: SocketAddr,
}

impl ChildOperator {
    /// `preflight operator` for `namespace` with `arguments` (`--leader-election=false`, or
    /// `--shard-ring NAME --pod-name NAME`), logging warnings only (`BENCH_OPERATOR_LOG` sets its
    /// `RUST_LOG`), with the binary `bench_binary::preflight` names.
    pub fn spawn(namespace: &str, arguments: &[&str]) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        drop(listener);
        let log = std::env::var("BENCH_OPERATOR_LOG").unwrap_or_else(|_| "warn".into());
        let child = Command::new(crate::bench_binary::preflight())
            .args(["operator", "--namespace", namespace])
            .args(arguments)
            .args(["--log-format", "text", "--listen", &address.to_string()])
            .env("KUBECONFIG", kubeconfig())
            .env("RUST_LOG", log)
            .stdout(Stdio::null())
            .spawn()
            .expect("the preflight binary starts");
        Self { child, address }
    }

    /// Waits (up to a minute) until it accepts connections on its metrics address.
    pub async fn listening(&self) {
        for _ in 0..600 {
            if tokio::net::TcpStream::connect(self.address).await.is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the operator does not listen on {}", self.address);
    }

    /// Current and peak resident set, in MiB.
    pub fn memory(&self) -> (u64, u64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|line| line.strip_prefix(name))
                .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
                .unwrap_or(0)
                / 1024
        };
        (field("VmRSS:"), field("VmHWM:"))
    }
}

impl Drop for ChildOperator {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        for _ in 0..200 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
