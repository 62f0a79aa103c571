//! A static HTTP file server on a free loopback port, for tests that
//! download (nodeup's assets): URL path → bytes, counted requests. It
//! serves until the test process ends.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The files a [`FileServer`] serves, changeable while it runs.
pub type Files = Arc<Mutex<BTreeMap<String, Vec<u8>>>>;

pub struct FileServer {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    pub files: Files,
    pub requests: Arc<AtomicUsize>,
}

impl FileServer {
    /// Serves `files` (path → bytes); anything else is a 404.
    pub fn start(files: BTreeMap<String, Vec<u8>>) -> FileServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let base = format!("http://{}", listener.local_addr().expect("local address"));
        let files: Files = Arc::new(Mutex::new(files));
        let requests = Arc::new(AtomicUsize::new(0));
        let (f, r) = (files.clone(), requests.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut buf = Vec::new();
                let mut chunk = [0u8; 1024];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut chunk) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                r.fetch_add(1, Ordering::SeqCst);
                let text = String::from_utf8_lossy(&buf);
                let path = text.split_whitespace().nth(1).unwrap_or("/").to_string();
                let body = f
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get(&path)
                    .cloned();
                let _ = match body {
                    Some(body) => stream
                        .write_all(
                            format!(
                                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                                body.len()
                            )
                            .as_bytes(),
                        )
                        .and_then(|_| stream.write_all(&body)),
                    None => stream.write_all(
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    ),
                };
            }
        });
        FileServer {
            base,
            files,
            requests,
        }
    }

    /// Requests served so far.
    pub fn request_count(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}
