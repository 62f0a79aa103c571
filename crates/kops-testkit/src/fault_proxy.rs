//! A loopback HTTP/1.1 proxy in front of a test server that fails a chosen
//! fraction of requests, as a busy or restarting server and a flaky
//! network do: an HTTP 503 with a plain-text body, or the connection
//! closed without an answer. A failed request is never forwarded (the
//! server's state stays what the client was told); the others are relayed
//! as they are, each on a connection of its own. For servers without a
//! fault switch of their own (govmomi's vcsim).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A running proxy; stopped on drop.
pub struct FaultProxy {
    url: String,
    stop: Arc<AtomicBool>,
    counts: Arc<Counts>,
}

#[derive(Default)]
struct Counts {
    forwarded: AtomicU64,
    failed: AtomicU64,
}

impl FaultProxy {
    /// Starts a proxy to `upstream` (`http://host:port`, any path kept)
    /// failing each request with probability `fail_rate`, from a fixed
    /// seed (the same faults each run).
    pub fn start(upstream: &str, fail_rate: f64, seed: u64) -> std::io::Result<FaultProxy> {
        let target = upstream
            .strip_prefix("http://")
            .ok_or_else(|| std::io::Error::other("the upstream must be http://"))?;
        let (authority, path) = target.split_once('/').unwrap_or((target, ""));
        let authority = authority.to_string();
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        let stop = Arc::new(AtomicBool::new(false));
        let counts = Arc::new(Counts::default());
        let random = Arc::new(Mutex::new(seed.max(1)));
        {
            let stop = stop.clone();
            let counts = counts.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((client, _)) => {
                            // Below half the rate: a closed connection;
                            // below the rate: a 503.
                            let draw = next_unit(&random);
                            let fault = (draw < fail_rate).then_some(draw < fail_rate / 2.0);
                            let authority = authority.clone();
                            let counts = counts.clone();
                            std::thread::spawn(move || {
                                let _ = serve(client, &authority, fault, &counts);
                            });
                        }
                        Err(_) => std::thread::sleep(std::time::Duration::from_millis(5)),
                    }
                }
            });
        }
        Ok(FaultProxy {
            url: format!("http://127.0.0.1:{port}/{path}"),
            stop,
            counts,
        })
    }

    /// The proxy's URL (the upstream's path kept).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Requests forwarded and requests failed so far.
    pub fn counts(&self) -> (u64, u64) {
        (
            self.counts.forwarded.load(Ordering::Relaxed),
            self.counts.failed.load(Ordering::Relaxed),
        )
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A number in [0, 1) from a xorshift generator.
fn next_unit(state: &Mutex<u64>) -> f64 {
    let mut x = state.lock().map(|s| *s).unwrap_or(1);
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    if let Ok(mut s) = state.lock() {
        *s = x;
    }
    (x >> 11) as f64 / (1u64 << 53) as f64
}

/// One request: read it, then fail it (`Some(true)`: close the
/// connection, `Some(false)`: answer 503) or relay it and the answer.
fn serve(
    client: TcpStream,
    authority: &str,
    fault: Option<bool>,
    counts: &Counts,
) -> std::io::Result<()> {
    let Some(request) = read_request(&client)? else {
        return Ok(());
    };
    let mut client = client;
    if let Some(close) = fault {
        counts.failed.fetch_add(1, Ordering::Relaxed);
        if !close {
            let text = "injected fault";
            write!(
                client,
                "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
                text.len()
            )?;
        }
        return client.shutdown(Shutdown::Both);
    }
    counts.forwarded.fetch_add(1, Ordering::Relaxed);
    relay(client, authority, &request)
}

/// A request as read off a connection: its request and header lines (as
/// sent, `Connection` left out) and its body.
pub(crate) struct Request {
    pub head: Vec<String>,
    pub body: Vec<u8>,
}

impl Request {
    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.iter().skip(1).find_map(|line| {
            let (n, v) = line.split_once(':')?;
            n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }

    /// The request line's method and target.
    pub fn method_and_target(&self) -> (&str, &str) {
        let mut parts = self
            .head
            .first()
            .map(|l| l.split_whitespace())
            .into_iter()
            .flatten();
        (parts.next().unwrap_or(""), parts.next().unwrap_or(""))
    }
}

/// Reads one request (`None`: the client closed before sending one).
pub(crate) fn read_request(client: &TcpStream) -> std::io::Result<Option<Request>> {
    client.set_nonblocking(false)?;
    let mut reader = BufReader::new(client.try_clone()?);
    let mut head = Vec::new();
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(None);
        }
        if line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            let name = name.trim().to_ascii_lowercase();
            if name == "content-length" {
                length = value.trim().parse().unwrap_or(0);
            }
            if name == "connection" {
                continue;
            }
        }
        head.push(line);
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    Ok(Some(Request { head, body }))
}

/// Sends `request` to `authority` on a connection of its own and the
/// answer back to `client`, as it comes; the client is told the
/// connection closes after it.
pub(crate) fn relay(
    mut client: TcpStream,
    authority: &str,
    request: &Request,
) -> std::io::Result<()> {
    let mut upstream = TcpStream::connect(authority)?;
    for line in &request.head {
        upstream.write_all(line.as_bytes())?;
    }
    upstream.write_all(b"Connection: close\r\n\r\n")?;
    upstream.write_all(&request.body)?;
    let mut answer = BufReader::new(upstream);
    loop {
        let mut line = String::new();
        if answer.read_line(&mut line)? == 0 || line == "\r\n" {
            break;
        }
        if !line.to_ascii_lowercase().starts_with("connection:") {
            client.write_all(line.as_bytes())?;
        }
    }
    client.write_all(b"Connection: close\r\n\r\n")?;
    std::io::copy(&mut answer, &mut client)?;
    client.shutdown(Shutdown::Both)
}
