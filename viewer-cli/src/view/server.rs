//! A small HTTP/1.1 server on 127.0.0.1: GET only, one request per connection, a thread per
//! connection. The viewer needs nothing more, so there is no async runtime and no framework.
//!
//! Requests whose `Host` is not this server's loopback address are refused, so a web page on
//! another site cannot reach the API through DNS rebinding.
//!
//! Slow or idle clients cannot stall others (VW-SERVE-1): the accept loop only accepts and hands
//! each connection to its own thread; a connection has [`HEAD_DEADLINE`] in total to send its
//! request head (however slowly its bytes trickle in) and [`WRITE_TIMEOUT`] per write; at most
//! [`MAX_CONNECTIONS`] are served at once, and a connection beyond that is answered 503 at once.

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::api::{self, ApiError};
use super::build::Shared;
use super::web;

/// Requests larger than this (request line and headers) are refused.
const MAX_HEAD: usize = 16 * 1024;
/// Time a client has to send its whole request head.
pub const HEAD_DEADLINE: Duration = Duration::from_secs(5);
/// Time one write of the answer may block.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 1024;

/// Serves the viewer on `listener` until the process ends.
pub fn serve(listener: TcpListener, shared: Arc<Shared>) -> io::Result<()> {
    let port = listener.local_addr()?.port();
    let active = Arc::new(AtomicUsize::new(0));
    for stream in listener.incoming() {
        let stream = match stream {
            Ok(s) => s,
            Err(e) => {
                // Out of file descriptors, say: wait a little instead of spinning.
                eprintln!("jets view: accepting a connection: {e}");
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        if active.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
            active.fetch_sub(1, Ordering::AcqRel);
            let mut s = stream;
            let _ = s.set_write_timeout(Some(Duration::from_millis(200)));
            let _ = respond(&mut s, 503, "text/plain", b"too many connections");
            continue;
        }
        let (shared, done) = (shared.clone(), active.clone());
        let spawned = std::thread::Builder::new()
            .name("jets-view-http".into())
            .stack_size(256 << 10)
            .spawn(move || {
                // A client that vanishes mid-request is its own problem.
                let _ = handle(stream, &shared, port);
                done.fetch_sub(1, Ordering::AcqRel);
            });
        if let Err(e) = spawned {
            eprintln!("jets view: starting a connection thread: {e}");
            active.fetch_sub(1, Ordering::AcqRel);
        }
    }
    Ok(())
}

/// A reader that fails once `deadline` has passed, however the bytes arrive.
struct Deadline {
    stream: TcpStream,
    deadline: Instant,
}

impl Read for Deadline {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "the request took too long"));
        }
        self.stream.set_read_timeout(Some(left))?;
        self.stream.read(buf)
    }
}

struct Request {
    path: String,
    params: HashMap<String, String>,
}

fn handle(stream: TcpStream, shared: &Shared, port: u16) -> io::Result<()> {
    stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
    let deadline = Instant::now() + HEAD_DEADLINE;
    let mut reader = BufReader::new(Deadline { stream: stream.try_clone()?, deadline });
    let mut out = stream;
    let req = match read_request(&mut reader, port) {
        Ok(r) => r,
        Err((status, msg)) => return respond(&mut out, status, "text/plain", msg.as_bytes()),
    };
    match req.path.as_str() {
        "/" | "/index.html" => {
            respond(&mut out, 200, "text/html; charset=utf-8", web::page_live().as_bytes())
        }
        "/viewer.js" => {
            respond(&mut out, 200, "text/javascript; charset=utf-8", web::JS.as_bytes())
        }
        "/viewer.css" => respond(&mut out, 200, "text/css; charset=utf-8", web::CSS.as_bytes()),
        path => match path.strip_prefix("/api/") {
            Some(name) => match api::handle(shared, name, &req.params) {
                Ok(body) => respond(&mut out, 200, "application/json", &body),
                Err(ApiError { status, message }) => {
                    let body =
                        serde_json::to_vec(&api::ErrorBody { error: &message }).unwrap_or_default();
                    respond(&mut out, status, "application/json", &body)
                }
            },
            None => respond(&mut out, 404, "text/plain", b"not found"),
        },
    }
}

fn read_request(r: &mut impl BufRead, port: u16) -> Result<Request, (u16, String)> {
    let mut head = Vec::new();
    loop {
        let n = r
            .by_ref()
            .take((MAX_HEAD - head.len()) as u64 + 1)
            .read_until(b'\n', &mut head)
            .map_err(|e| (400, format!("reading the request: {e}")))?;
        if n == 0 || head.len() > MAX_HEAD {
            return Err((400, "incomplete or oversized request".into()));
        }
        if head.ends_with(b"\r\n\r\n") || head.ends_with(b"\n\n") {
            break;
        }
    }
    let text = String::from_utf8_lossy(&head);
    let mut lines = text.lines();
    let mut first = lines.next().unwrap_or("").split_whitespace();
    let (method, target) = (first.next().unwrap_or(""), first.next().unwrap_or(""));
    if method != "GET" {
        return Err((405, format!("method {method} is not allowed")));
    }
    let host = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("host"))
        .map(|(_, v)| v.trim().to_owned())
        .unwrap_or_default();
    let allowed = [format!("127.0.0.1:{port}"), format!("localhost:{port}")];
    if !allowed.contains(&host) {
        return Err((403, format!("Host {host:?} is not this viewer")));
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let params = query
        .split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect();
    Ok(Request { path: percent_decode(path), params })
}

/// Decodes `%XX` escapes and `+` (a space in a query string); invalid escapes stay as they are.
pub fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(v) => {
                        out.push(v);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn respond(out: &mut TcpStream, status: u16, ctype: &str, body: &[u8]) -> io::Result<()> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        503 => "Service Unavailable",
        _ => "Internal Server Error",
    };
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n\
         Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n\
         Content-Security-Policy: default-src 'self'; img-src 'self' data:; object-src 'none'; \
         base-uri 'none'; frame-ancestors 'none'\r\nConnection: close\r\n\r\n",
        body.len()
    );
    out.write_all(head.as_bytes())?;
    out.write_all(body)?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("a%20b+c%3Cscript%3E"), "a b c<script>");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
    }

    #[test]
    fn requests_are_checked() {
        let ok = "GET /api/window?t0=1&t1=5&rows=1%2C2 HTTP/1.1\r\nHost: 127.0.0.1:80\r\n\r\n";
        let req = read_request(&mut ok.as_bytes(), 80).expect("valid request");
        assert_eq!(req.path, "/api/window");
        assert_eq!(req.params["rows"], "1,2");
        let evil = "GET / HTTP/1.1\r\nHost: evil.example:80\r\n\r\n";
        assert_eq!(read_request(&mut evil.as_bytes(), 80).err().map(|e| e.0), Some(403));
        let post = "POST / HTTP/1.1\r\nHost: 127.0.0.1:80\r\n\r\n";
        assert_eq!(read_request(&mut post.as_bytes(), 80).err().map(|e| e.0), Some(405));
        let cut = "GET / HTTP/1.1\r\nHost: 127.0.0.1:80\r\n";
        assert_eq!(read_request(&mut cut.as_bytes(), 80).err().map(|e| e.0), Some(400));
    }
}
