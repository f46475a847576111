//! Running `tl serve` in tests and talking to it over plain HTTP/1.1 (a small
//! client on `std::net`, so the tests need no HTTP crate).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{default_model, tl};

/// A running `tl serve` on a free port, killed when dropped.
pub struct Server {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub address: String,
    log: Arc<Mutex<String>>,
}

impl Server {
    /// `tl serve -m DEFAULT --port 0 --device cpu` plus `args`.
    pub fn start(args: &[&str]) -> Server {
        Self::start_with_env(args, &[])
    }

    pub fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> Server {
        let model = default_model().to_string_lossy().into_owned();
        let mut command = tl();
        command
            .args(["serve", "-m", &model, "--port", "0", "--device", "cpu"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().expect("cannot start tl serve");
        let stderr = child.stderr.take().expect("piped stderr");
        let log = Arc::new(Mutex::new(String::new()));
        let (address_tx, address_rx) = std::sync::mpsc::channel();
        let thread_log = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(address) = line.strip_prefix("listening on http://") {
                    let _ = address_tx.send(address.to_owned());
                }
                if let Ok(mut log) = thread_log.lock() {
                    log.push_str(&line);
                    log.push('\n');
                }
            }
        });
        let address = match address_rx.recv_timeout(Duration::from_secs(120)) {
            Ok(address) => address,
            Err(_) => {
                let _ = child.kill();
                panic!(
                    "tl serve did not start: {}",
                    log.lock().map(|l| l.clone()).unwrap_or_default()
                );
            }
        };
        Server {
            child,
            address,
            log,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// What the server wrote on stderr so far.
    pub fn log(&self) -> String {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Waits up to `timeout` for stderr to contain `needle` (the reader
    /// thread may lag behind the server); the log so far either way.
    pub fn wait_for_log(&self, needle: &str, timeout: Duration) -> String {
        let start = Instant::now();
        loop {
            let log = self.log();
            if log.contains(needle) || start.elapsed() >= timeout {
                return log;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn get(&self, path: &str) -> Response {
        request(&self.address, "GET", path, None, &[])
    }

    pub fn post(&self, path: &str, body: &str) -> Response {
        request(&self.address, "POST", path, Some(body), &[])
    }

    /// One metric's value from `/metrics` (the first line starting with `name`).
    pub fn metric(&self, name: &str) -> f64 {
        let text = self.get("/metrics").body;
        text.lines()
            .find_map(|line| {
                let rest = line.strip_prefix(name)?;
                rest.strip_prefix(' ')?.trim().parse().ok()
            })
            .unwrap_or_else(|| panic!("no metric {name} in:\n{text}"))
    }

    /// Polls until `metric(name) == value` or fails after `timeout`.
    pub fn wait_for_metric(&self, name: &str, value: f64, timeout: Duration) {
        let start = Instant::now();
        loop {
            let got = self.metric(name);
            if got == value {
                return;
            }
            assert!(
                start.elapsed() < timeout,
                "{name} stayed at {got}, expected {value}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends a signal by name (`INT`, as Ctrl-C in a terminal does; `TERM`).
    pub fn signal(&self, name: &str) {
        let status = std::process::Command::new("kill")
            .args([&format!("-{name}"), &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success());
    }

    /// Waits up to `timeout` for the process to exit; whether it did.
    pub fn exits_within(&mut self, timeout: Duration) -> bool {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if !self.is_running() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A whole HTTP response.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Sends one request (`Connection: close`) and reads the whole response.
pub fn request(
    address: &str,
    method: &str,
    path: &str,
    body: Option<&str>,
    headers: &[(&str, &str)],
) -> Response {
    let mut stream = open(address, method, path, body, headers);
    let mut reader = BufReader::new(stream.try_clone().expect("clone socket"));
    let (status, headers) = read_head(&mut reader);
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let mut body = Vec::new();
    if chunked {
        ChunkedBody::new(reader)
            .read_to_end(&mut body)
            .expect("chunked body");
    } else {
        reader.read_to_end(&mut body).expect("body");
    }
    let _ = stream.flush();
    Response {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

/// Sends a request and returns the status and a reader over the (chunked)
/// body's lines, for reading a stream part way and then hanging up.
pub fn open_stream(address: &str, path: &str, body: &str) -> (u16, Box<dyn BufRead + Send>) {
    let stream = open(address, "POST", path, Some(body), &[]);
    let mut reader = BufReader::new(stream);
    let (status, headers) = read_head(&mut reader);
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    if chunked {
        (status, Box::new(BufReader::new(ChunkedBody::new(reader))))
    } else {
        (status, Box::new(reader))
    }
}

/// The JSON chunks of a server-sent-events stream, up to its `[DONE]`
/// (lines other than `data:` ones skipped).
pub fn sse_chunks(lines: impl IntoIterator<Item = String>) -> Vec<serde_json::Value> {
    lines
        .into_iter()
        .filter_map(|line| line.strip_prefix("data: ").map(str::to_owned))
        .take_while(|data| data != "[DONE]")
        .map(|data| serde_json::from_str(&data).unwrap())
        .collect()
}

fn open(
    address: &str,
    method: &str,
    path: &str,
    body: Option<&str>,
    headers: &[(&str, &str)],
) -> TcpStream {
    let mut stream = TcpStream::connect(address).expect("connect to tl serve");
    stream
        .set_read_timeout(Some(Duration::from_secs(300)))
        .expect("timeout");
    let body = body.unwrap_or("");
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
    {
        head.push_str("Content-Type: application/json\r\n");
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).expect("send head");
    stream.write_all(body.as_bytes()).expect("send body");
    stream
}

fn read_head(reader: &mut impl BufRead) -> (u16, Vec<(String, String)>) {
    let mut line = String::new();
    reader.read_line(&mut line).expect("status line");
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {line:?}"));
    let mut headers = Vec::new();
    loop {
        line.clear();
        reader.read_line(&mut line).expect("header line");
        let trimmed = line.trim_end();
        if trimmed.is_empty() {
            break;
        }
        if let Some((k, v)) = trimmed.split_once(':') {
            headers.push((k.trim().to_owned(), v.trim().to_owned()));
        }
    }
    (status, headers)
}

/// Decodes `Transfer-Encoding: chunked`.
struct ChunkedBody<R> {
    inner: R,
    left: usize,
    done: bool,
}

impl<R: BufRead> ChunkedBody<R> {
    fn new(inner: R) -> Self {
        ChunkedBody {
            inner,
            left: 0,
            done: false,
        }
    }
}

impl<R: BufRead> Read for ChunkedBody<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.done {
            return Ok(0);
        }
        if self.left == 0 {
            let mut size = String::new();
            self.inner.read_line(&mut size)?;
            let hex = size.trim().split(';').next().unwrap_or("");
            self.left = usize::from_str_radix(hex, 16).map_err(|e| {
                std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{size:?}: {e}"))
            })?;
            if self.left == 0 {
                self.done = true;
                return Ok(0);
            }
        }
        let want = buf.len().min(self.left);
        let n = self.inner.read(&mut buf[..want])?;
        self.left -= n;
        if self.left == 0 {
            let mut crlf = [0u8; 2];
            self.inner.read_exact(&mut crlf)?;
        }
        Ok(n)
    }
}

/// Resident memory of process `pid` in KiB (Linux; 0 elsewhere).
pub fn resident_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}
