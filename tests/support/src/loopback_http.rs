//! A small HTTP/1.1 server on a loopback port, standing in for an external system in tests: it answers
//! each request with what a test's function says (status, headers, body, an optional delay) and counts the
//! requests it received. One thread per connection; each connection serves one request (`Connection: close`).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// What the server answers.
#[derive(Debug, Clone, Default)]
pub struct Reply {
    /// HTTP status code.
    pub status: u16,
    /// Extra headers (`Content-Length` and `Connection` are set by the server).
    pub headers: Vec<(String, String)>,
    /// Body.
    pub body: Vec<u8>,
    /// How long to wait before answering.
    pub delay: Duration,
}

impl Reply {
    /// A reply with `status` and `body`.
    pub fn new(status: u16, body: impl Into<Vec<u8>>) -> Self {
        Self {
            status,
            body: body.into(),
            ..Self::default()
        }
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Answers only after `delay`.
    pub fn after(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

type Route = dyn Fn(&str) -> Reply + Send + Sync;

/// The server; stops accepting when dropped.
pub struct LoopbackServer {
    address: SocketAddr,
    requests: Arc<Mutex<Vec<ReceivedRequest>>>,
    route: Arc<Mutex<Arc<Route>>>,
    stop: Arc<AtomicBool>,
}

/// A request as the server received it.
#[derive(Debug, Clone)]
pub struct ReceivedRequest {
    /// Method and path, e.g. `GET /dependencies/db`.
    pub line: String,
    /// Header names (lower case) and values.
    pub headers: HashMap<String, String>,
}

impl LoopbackServer {
    /// Starts a server on `127.0.0.1` (a free port) answering with `route(path)`.
    pub fn start(route: impl Fn(&str) -> Reply + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let address = listener.local_addr().expect("the bound address");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let route: Arc<Mutex<Arc<Route>>> = Arc::new(Mutex::new(Arc::new(route)));
        let stop = Arc::new(AtomicBool::new(false));
        let (seen, routes, stopped) =
            (Arc::clone(&requests), Arc::clone(&route), Arc::clone(&stop));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopped.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let (seen, route) = (Arc::clone(&seen), lock(&routes).clone());
                std::thread::spawn(move || serve(stream, &seen, &*route));
            }
        });
        Self {
            address,
            requests,
            route,
            stop,
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.address.port()
    }

    /// Answers from now on with `route`.
    pub fn set_route(&self, route: impl Fn(&str) -> Reply + Send + Sync + 'static) {
        *lock(&self.route) = Arc::new(route);
    }

    /// How many requests the server has received.
    pub fn request_count(&self) -> usize {
        lock(&self.requests).len()
    }

    /// The requests received, in order.
    pub fn requests(&self) -> Vec<ReceivedRequest> {
        lock(&self.requests).clone()
    }
}

impl Drop for LoopbackServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(self.address);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn serve(stream: TcpStream, seen: &Mutex<Vec<ReceivedRequest>>, route: &Route) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut reader = BufReader::new(&stream);
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let mut headers = HashMap::new();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).unwrap_or(0) == 0 || header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_owned());
        }
    }
    let line = line
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ");
    let path = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
    lock(seen).push(ReceivedRequest { line, headers });
    let reply = route(&path);
    std::thread::sleep(reply.delay);
    let mut head = format!(
        "HTTP/1.1 {} X\r\ncontent-length: {}\r\nconnection: close\r\n",
        reply.status,
        reply.body.len()
    );
    for (name, value) in &reply.headers {
        head += &format!("{name}: {value}\r\n");
    }
    head += "\r\n";
    let mut stream = &stream;
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(&reply.body);
    let _ = stream.flush();
}
