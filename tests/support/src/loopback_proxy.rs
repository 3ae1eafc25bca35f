//! A TCP proxy on a loopback port that a test can cut: what a network partition between one process and a
//! server looks like to that process (its connections drop, new ones are closed at once), with no network
//! namespace or firewall needed. Stopped when dropped.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

/// A proxy forwarding a loopback port to `target`.
pub struct LoopbackProxy {
    address: SocketAddr,
    state: Arc<ProxyState>,
}

#[derive(Default)]
struct ProxyState {
    cut: AtomicBool,
    stopped: AtomicBool,
    open: Mutex<Vec<TcpStream>>,
}

impl LoopbackProxy {
    /// Starts forwarding a free loopback port to `target`.
    pub fn start(target: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let address = listener.local_addr().expect("its address");
        let state = Arc::new(ProxyState::default());
        let accepting = Arc::clone(&state);
        thread::spawn(move || {
            for client in listener.incoming() {
                if accepting.stopped.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(client) = client else { continue };
                if accepting.cut.load(Ordering::SeqCst) {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                }
                let Ok(server) = TcpStream::connect(target) else {
                    continue;
                };
                if let (Ok(client_copy), Ok(server_copy)) = (client.try_clone(), server.try_clone())
                {
                    let mut open = accepting
                        .open
                        .lock()
                        .unwrap_or_else(|error| error.into_inner());
                    open.extend([client_copy, server_copy]);
                }
                forward(&client, &server);
                forward(&server, &client);
            }
        });
        Self { address, state }
    }

    /// Where to connect instead of the target.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Cuts every connection and closes new ones at once, until [`LoopbackProxy::restore`].
    pub fn cut(&self) {
        self.state.cut.store(true, Ordering::SeqCst);
        self.drop_connections();
    }

    /// Forwards again.
    pub fn restore(&self) {
        self.state.cut.store(false, Ordering::SeqCst);
    }

    fn drop_connections(&self) {
        let mut open = self
            .state
            .open
            .lock()
            .unwrap_or_else(|error| error.into_inner());
        for stream in open.drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}

impl Drop for LoopbackProxy {
    fn drop(&mut self) {
        self.state.stopped.store(true, Ordering::SeqCst);
        self.drop_connections();
        // Wakes the accepting thread so that it sees `stopped`.
        let _ = TcpStream::connect(self.address);
    }
}

/// Copies `from` to `to` on a thread of its own until either side closes.
fn forward(from: &TcpStream, to: &TcpStream) {
    let (Ok(mut from), Ok(mut to)) = (from.try_clone(), to.try_clone()) else {
        return;
    };
    thread::spawn(move || {
        let mut buffer = [0; 16 << 10];
        loop {
            match from.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(read) => {
                    if to.write_all(&buffer[..read]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = to.shutdown(Shutdown::Both);
        let _ = from.shutdown(Shutdown::Both);
    });
}
