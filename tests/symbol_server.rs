//! Symbol-server downloads (issue 16) against a local HTTP server on loopback serving the
//! fixture PDB in each form a symbol server uses: the plain PDB, a CAB-compressed `.pd_`, a
//! `file.ptr` (PATH: and MSG:), nothing (404), the wrong file, a wrong GUID, no answer
//! (timeout), and through an HTTP proxy from the environment.

use etwdump::dump::{DumpFile, OpenOptions};
use etwdump::kernel::context::{KernelContext, SymbolOptions};
use etwdump::symbols::server::{fetch, FetchError, Server};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn sample() -> PathBuf {
    repo().join("tests/data/sample-x64-etw.dmp")
}

/// A response: status and body; status 0 = accept and never answer.
type Routes = Arc<Mutex<HashMap<String, (u16, Vec<u8>)>>>;

/// A tiny HTTP/1.1 server on 127.0.0.1 (one thread per connection); records each request's
/// target (path, or the absolute URL when used as a proxy).
struct Http {
    port: u16,
    routes: Routes,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Http {
    fn start() -> Http {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let routes: Routes = Arc::default();
        let seen: Arc<Mutex<Vec<String>>> = Arc::default();
        let (r, s) = (routes.clone(), seen.clone());
        std::thread::spawn(move || {
            for conn in l.incoming() {
                let Ok(mut c) = conn else { continue };
                let (r, s) = (r.clone(), s.clone());
                std::thread::spawn(move || {
                    let mut rd = BufReader::new(c.try_clone().unwrap());
                    let read_request = |rd: &mut BufReader<std::net::TcpStream>| {
                        let mut line = String::new();
                        rd.read_line(&mut line).ok()?;
                        loop {
                            let mut h = String::new();
                            if rd.read_line(&mut h).is_err() || h.trim().is_empty() {
                                break;
                            }
                        }
                        Some(line)
                    };
                    let Some(mut line) = read_request(&mut rd) else {
                        return;
                    };
                    // As a proxy: a CONNECT tunnel, then the request inside it.
                    if line.starts_with("CONNECT ") {
                        s.lock().unwrap().push(line.trim().to_string());
                        let _ = c.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n");
                        let Some(inner) = read_request(&mut rd) else {
                            return;
                        };
                        line = inner;
                    }
                    let target = line.split_whitespace().nth(1).unwrap_or("").to_string();
                    s.lock().unwrap().push(target.clone());
                    // A proxied request names the whole URL: route by its path.
                    let path = match target.find("://") {
                        Some(i) => target[i + 3..]
                            .find('/')
                            .map_or("/".to_string(), |j| target[i + 3 + j..].to_string()),
                        None => target,
                    };
                    let (status, body) = r
                        .lock()
                        .unwrap()
                        .get(&path)
                        .cloned()
                        .unwrap_or((404, b"not here".to_vec()));
                    if status == 0 {
                        std::thread::sleep(Duration::from_secs(30));
                        return;
                    }
                    let _ = write!(
                        c,
                        "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = c.write_all(&body);
                });
            }
        });
        Http { port, routes, seen }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/symbols", self.port)
    }

    fn serve(&self, path: &str, status: u16, body: Vec<u8>) {
        self.routes
            .lock()
            .unwrap()
            .insert(path.to_string(), (status, body));
    }

    fn clear(&self) {
        self.routes.lock().unwrap().clear();
        self.seen.lock().unwrap().clear();
    }
}

/// The sample dump's kernel PDB identity, and the matching fixture PDB's bytes.
fn identity() -> (etwdump::symbols::PdbIdentity, Vec<u8>) {
    let d = DumpFile::open(&sample(), OpenOptions::default()).unwrap();
    let ctx = KernelContext::open(&d, &SymbolOptions::default()).unwrap();
    let id = ctx.kernel_pdb().unwrap().clone();
    let pdb = std::fs::read(repo().join("tests/fixtures/x64-19041/ntkrnlmp.pdb")).unwrap();
    (id, pdb)
}

/// `etwdump sessions SAMPLE` with `args`; (exit status, stdout, stderr).
fn sessions(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_etwdump"));
    c.arg("sessions")
        .arg(sample())
        .args(args)
        .args(["--format", "json"]);
    c.env_remove("_NT_SYMBOL_PATH");
    for v in [
        "ALL_PROXY",
        "all_proxy",
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
    ] {
        c.env_remove(v);
    }
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn session_count(json: &str) -> usize {
    let j: serde_json::Value = serde_json::from_str(json)
        .unwrap_or_else(|e| panic!("{e}: {:?}", &json[..json.len().min(300)]));
    j["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == "session")
        .count()
}

#[test]
fn fetches_each_form_and_says_why_not() {
    let (id, pdb) = identity();
    let http = Http::start();
    let base = format!("/symbols/{}/{}", id.name, id.store_key);
    let url = http.url();
    let via_server = |cache: &Path| {
        sessions(
            &[
                "--symbol-server",
                &url,
                "--symbol-cache",
                cache.to_str().unwrap(),
            ],
            &[],
        )
    };

    // 1. The plain PDB: fetched, verified, kept in the Microsoft layout; then offline.
    let cache = tempfile::tempdir().unwrap();
    let c = cache.path().to_str().unwrap();
    http.serve(&format!("{base}/{}", id.name), 200, pdb.clone());
    let (st, out, err) = via_server(Path::new(c));
    assert_eq!(st, 0, "{err}");
    assert!(!out.is_empty(), "{err}");
    assert_eq!(session_count(&out), 6);
    let kept = cache
        .path()
        .join(id.name.raw())
        .join(&id.store_key)
        .join(id.name.raw());
    assert_eq!(std::fs::read(&kept).unwrap(), pdb);
    http.clear();
    let (st, out, err) = sessions(&["--symbols", c], &[]);
    assert_eq!(
        (st, session_count(&out)),
        (0, 6),
        "offline from the cache: {err}"
    );
    assert!(
        http.seen.lock().unwrap().is_empty(),
        "no request without --symbol-server"
    );

    // 2. CAB-compressed (MSZIP), the only form served.
    let cache = tempfile::tempdir().unwrap();
    let c = cache.path().to_str().unwrap();
    let mut b = cab::CabinetBuilder::new();
    b.add_folder(cab::CompressionType::MsZip)
        .add_file(id.name.raw());
    let mut w = b.build(std::io::Cursor::new(Vec::new())).unwrap();
    while let Some(mut f) = w.next_file().unwrap() {
        f.write_all(&pdb).unwrap();
    }
    let cabbed = w.finish().unwrap().into_inner();
    assert!(cabbed.len() < pdb.len(), "compressed");
    let mut pd_ = id.name.raw().to_string();
    pd_.pop();
    pd_.push('_');
    http.serve(&format!("{base}/{pd_}"), 200, cabbed);
    let (st, out, err) = via_server(Path::new(c));
    assert_eq!((st, session_count(&out)), (0, 6), "{err}");
    let kept = cache
        .path()
        .join(id.name.raw())
        .join(&id.store_key)
        .join(id.name.raw());
    assert_eq!(std::fs::read(&kept).unwrap(), pdb, "decompressed");
    let seen = http.seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![format!("{base}/{}", id.name), format!("{base}/{pd_}")],
        "the plain name first, then the .pd_"
    );
    http.clear();

    // 3. file.ptr with a PATH: this machine can read; then a MSG:.
    let cache = tempfile::tempdir().unwrap();
    let c = cache.path().to_str().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let p = elsewhere.path().join("copy.pdb");
    std::fs::write(&p, &pdb).unwrap();
    http.serve(
        &format!("{base}/file.ptr"),
        200,
        format!("PATH:{}", p.display()).into_bytes(),
    );
    let (st, out, err) = via_server(Path::new(c));
    assert_eq!((st, session_count(&out)), (0, 6), "{err}");
    http.serve(
        &format!("{base}/file.ptr"),
        200,
        b"MSG: This file is not available\x1b[31m".to_vec(),
    );
    let cache2 = tempfile::tempdir().unwrap();
    let (st, _, err) = via_server(cache2.path());
    assert_eq!(st, 2, "{err}");
    assert!(
        err.contains("the server says: This file is not available\\u{1b}[31m"),
        "{err}"
    );
    // 3b. (issue 27, F4) A PATH: naming a file with ESC, BEL, CR/LF, C1 and a bidi control in
    // its name: echoed escaped, on one line.
    http.serve(
        &format!("{base}/file.ptr"),
        200,
        "PATH:/nonexistent/\u{1b}]0;owned\u{7}\r\nx\u{9b}\u{202e}.pdb"
            .as_bytes()
            .to_vec(),
    );
    let (st, _, err) = via_server(cache2.path());
    assert_eq!(st, 2, "{err}");
    assert!(
        err.contains(
            "PATH:/nonexistent/\\u{1b}]0;owned\\u{7}\\u{d}\\u{a}x\\u{9b}\\u{202e}.pdb cannot be read here"
        ),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!err.trim_end().chars().any(etwdump::text::needs_escape));
    // 3c. (F6) A PATH: naming a device or a FIFO is refused at once, not read without bound
    // (/dev/zero grew to 2.1 GB in 1.7 s) or waited on for ever.
    let fifo = elsewhere.path().join("fifo");
    let c_path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo only creates the node.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    for (target, kind) in [
        ("/dev/zero".to_string(), "a character device"),
        ("/dev/urandom".to_string(), "a character device"),
        (fifo.display().to_string(), "a FIFO"),
        (elsewhere.path().display().to_string(), "a directory"),
    ] {
        http.serve(
            &format!("{base}/file.ptr"),
            200,
            format!("PATH:{target}").into_bytes(),
        );
        let t = std::time::Instant::now();
        let (st, _, err) = via_server(cache2.path());
        assert_eq!(st, 2, "{target}: {err}");
        assert!(
            err.contains(&format!(
                "PATH:{target} cannot be read here: not a regular file ({kind}): only a regular file is read"
            )),
            "{target}: {err}"
        );
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "{target}: {:?}",
            t.elapsed()
        );
    }
    http.clear();

    // 4. Nothing anywhere: the three URLs tried are named.
    let (st, _, err) = via_server(cache2.path());
    assert_eq!(st, 2);
    assert!(
        err.contains("gave 404")
            && err.contains(&format!("{base}/{pd_}"))
            && err.contains("file.ptr"),
        "{err}"
    );

    // 5. The wrong file: an HTML page, and another kernel's PDB.
    http.serve(
        &format!("{base}/{}", id.name),
        200,
        b"<html>login</html>".to_vec(),
    );
    let (st, _, err) = via_server(cache2.path());
    assert_eq!(st, 2);
    assert!(err.contains("not the PDB asked for"), "{err}");
    let other = std::fs::read(repo().join("tests/fixtures/x64-14393/ntkrnlmp.pdb")).unwrap();
    http.serve(&format!("{base}/{}", id.name), 200, other);
    let (st, _, err) = via_server(cache2.path());
    assert_eq!(st, 2);
    assert!(
        err.contains("not the PDB asked for: it is ntkrnlmp.pdb {"),
        "{err}"
    );
    assert!(
        !cache2.path().join(id.name.raw()).exists(),
        "nothing kept from a bad download"
    );
    http.clear();

    // 6. A server that never answers: a timeout, said so.
    http.serve(&format!("{base}/{}", id.name), 0, Vec::new());
    let mut srv = Server::new(&url, cache2.path().to_path_buf());
    srv.timeout = Duration::from_secs(1);
    match fetch(&srv, &id) {
        Err(FetchError::Timeout { url: u, secs: 1 }) => assert!(u.ends_with(id.name.raw())),
        other => panic!("{:?}", other.map(|x| x.1)),
    }
    http.clear();

    // 7. Through a proxy from the environment: the server's host does not resolve, the
    // proxy (our server) gets the whole URL.
    http.serve(
        &format!("/symbols/{}/{}/{}", id.name, id.store_key, id.name),
        200,
        pdb.clone(),
    );
    let cache = tempfile::tempdir().unwrap();
    let proxy = format!("http://127.0.0.1:{}", http.port);
    let (st, out, err) = sessions(
        &[
            "--symbol-server",
            "http://symbols.invalid/symbols",
            "--symbol-cache",
            cache.path().to_str().unwrap(),
        ],
        &[("HTTP_PROXY", &proxy)],
    );
    assert_eq!(st, 0, "{err}");
    assert_eq!(session_count(&out), 6, "{err}");
    // The tunnel to the server's host, then the request through it.
    let seen = http.seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![
            "CONNECT symbols.invalid:80 HTTP/1.1".to_string(),
            format!("/symbols/{}/{}/{}", id.name, id.store_key, id.name)
        ]
    );
}

/// `srv*CACHE*URL` entries of `_NT_SYMBOL_PATH` are fetched only with `--fetch-symbols`
/// (without it the built-in layouts are used: `info` says `symbols.source` is `none`).
#[test]
fn nt_symbol_path_servers_only_when_asked() {
    let (id, pdb) = identity();
    let http = Http::start();
    http.serve(
        &format!("/symbols/{}/{}/{}", id.name, id.store_key, id.name),
        200,
        pdb,
    );
    let cache = tempfile::tempdir().unwrap();
    let nt = format!("srv*{}*{}", cache.path().display(), http.url());
    let info = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_etwdump"))
            .arg("info")
            .arg(sample())
            .args(args)
            .args(["--format", "json"])
            .env("_NT_SYMBOL_PATH", &nt)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        j["symbols"]["source"].as_str().unwrap().to_string()
    };
    assert_eq!(info(&[]), "none");
    assert!(
        http.seen.lock().unwrap().is_empty(),
        "no download without --fetch-symbols"
    );
    assert_eq!(info(&["--fetch-symbols"]), "pdb");
    assert_eq!(http.seen.lock().unwrap().len(), 1);
    assert!(cache
        .path()
        .join(id.name.raw())
        .join(&id.store_key)
        .join(id.name.raw())
        .is_file());
    // The cache is now a local store: no request the next time.
    assert_eq!(info(&[]), "pdb");
    assert_eq!(http.seen.lock().unwrap().len(), 1);
}
