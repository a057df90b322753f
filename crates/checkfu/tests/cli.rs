//! The `checkfu` binary itself: `up` bootstraps, prints where things are,
//! serves, and exits cleanly on SIGTERM.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn up_bootstraps_serves_and_drains_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut child = Command::new(env!("CARGO_BIN_EXE_checkfu"))
        .args(["up", "--data-dir", data.to_str().unwrap(), "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let url = first.split("API base URL ").nth(1).unwrap().trim().to_string();
    assert!(url.starts_with("http://127.0.0.1:") && url.ends_with("/v1"), "{first}");
    let second = lines.next().unwrap().unwrap();
    let key_file = data.join("admin.key");
    assert!(second.contains(key_file.to_str().unwrap()), "{second}");
    let key = std::fs::read_to_string(&key_file).unwrap();
    assert!(key.trim().starts_with("ck_"));
    assert!(!first.contains(key.trim()) && !second.contains(key.trim()), "the key is never printed");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&key_file).unwrap().permissions().mode() & 0o777, 0o600);
    }
    let base = url.trim_end_matches("/v1").to_string();
    let ready = http_status(&format!("{base}/readyz"));
    assert_eq!(ready, 200);

    let pid = child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "exits cleanly: {status}");
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(15), "did not exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    }

    // A second start on the same data keeps the installation and the key.
    let mut again = Command::new(env!("CARGO_BIN_EXE_checkfu"))
        .args(["up", "--data-dir", data.to_str().unwrap(), "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(again.stdout.take().unwrap()).lines();
    lines.next().unwrap().unwrap();
    let second = lines.next().unwrap().unwrap();
    assert!(second.starts_with("Existing installation"), "{second}");
    assert_eq!(std::fs::read_to_string(&key_file).unwrap(), key);
    again.kill().unwrap();
    again.wait().unwrap();
}

/// A bare HTTP/1.1 GET, to keep this test free of client dependencies.
fn http_status(url: &str) -> u16 {
    use std::io::{Read, Write};
    let rest = url.trim_start_matches("http://");
    let (host, path) = rest.split_once('/').map(|(h, p)| (h, format!("/{p}"))).unwrap();
    for _ in 0..100 {
        if let Ok(mut s) = std::net::TcpStream::connect(host) {
            write!(s, "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").unwrap();
            let mut buf = String::new();
            s.read_to_string(&mut buf).unwrap();
            return buf.split_whitespace().nth(1).unwrap().parse().unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{url} never answered");
}
