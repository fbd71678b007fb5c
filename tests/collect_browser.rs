//! `collect`'s index.html in a real browser (issue 31 item 6): headless Chromium loads the
//! page from disk and is asked, through the DevTools protocol (`--remote-debugging-pipe`),
//! what it rendered: the summary's figures as the browser reads them, the tables laid out and
//! styled, the chart decoded, the Content-Security-Policy in force (a script added to the page
//! does not run), a screenshot that is not blank, and every link as the browser resolves it
//! naming a file in DIR. The page of the dump with hostile names shows them as text, with no
//! element of theirs.
//!
//! Chromium: Debian's `chromium` (.ci/run installs it) or `ETWDUMP_CHROMIUM`. Without it the
//! test says SKIPPED and passes, unless `ETWDUMP_REQUIRE_BROWSER=1` (then it fails).
#![cfg(unix)]

mod common;
use common::collect::{
    collect, hostile_dump, percent_decoded, root, ARTEFACTS, HOSTILE_SESSION, SAMPLE,
};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

/// The browser: `ETWDUMP_CHROMIUM`, else the first of the usual names on PATH.
fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("ETWDUMP_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    for name in [
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
    ] {
        for dir in std::env::split_paths(&path) {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// A headless Chromium driven through the DevTools protocol over its pipe (fd 3 in, fd 4
/// out: JSON messages ended by NUL), killed after 90 s whatever happens.
struct Browser {
    child: std::process::Child,
    to: std::fs::File,
    from: BufReader<std::fs::File>,
    next: u64,
    session: Option<String>,
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
    _profile: tempfile::TempDir,
}

impl Browser {
    fn start(exe: &Path) -> Browser {
        use std::os::unix::io::FromRawFd;
        use std::os::unix::process::CommandExt;
        let profile = tempfile::tempdir().unwrap();
        let (mut to, mut from) = ([0i32; 2], [0i32; 2]);
        // SAFETY: pipe2 fills the two arrays with new descriptors (close-on-exec).
        unsafe {
            assert_eq!(libc::pipe2(to.as_mut_ptr(), libc::O_CLOEXEC), 0);
            assert_eq!(libc::pipe2(from.as_mut_ptr(), libc::O_CLOEXEC), 0);
        }
        let (to_r, to_w, from_r, from_w) = (to[0], to[1], from[0], from[1]);
        let mut cmd = std::process::Command::new(exe);
        cmd.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--window-size=1280,900",
            "--remote-debugging-pipe",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("about:blank")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
        // SAFETY: only async-signal-safe calls (fcntl, dup2, close) between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                // Above 10 first, so that neither lands on 3 or 4 before it is moved.
                let a = libc::fcntl(to_r, libc::F_DUPFD, 10);
                let b = libc::fcntl(from_w, libc::F_DUPFD, 10);
                if a < 0 || b < 0 || libc::dup2(a, 3) < 0 || libc::dup2(b, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::close(a);
                libc::close(b);
                Ok(())
            });
        }
        let child = cmd.spawn().expect("start chromium");
        // SAFETY: the parent's ends are ours alone from here; the child's are closed.
        let (to, from) = unsafe {
            libc::close(to_r);
            libc::close(from_w);
            (
                std::fs::File::from_raw_fd(to_w),
                std::fs::File::from_raw_fd(from_r),
            )
        };
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (flag, pid) = (done.clone(), child.id() as i32);
        std::thread::spawn(move || {
            for _ in 0..900 {
                if flag.load(std::sync::atomic::Ordering::Relaxed) {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            // SAFETY: a signal to the browser this test started.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        });
        let mut b = Browser {
            child,
            to,
            from: BufReader::new(from),
            next: 1,
            session: None,
            done,
            _profile: profile,
        };
        let target = b.call("Target.createTarget", json!({"url": "about:blank"}));
        let attached = b.call(
            "Target.attachToTarget",
            json!({"targetId": target["targetId"], "flatten": true}),
        );
        b.session = Some(attached["sessionId"].as_str().unwrap().to_string());
        b
    }

    /// One command (on the page once attached); its result (events in between are skipped).
    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = &self.session {
            msg["sessionId"] = json!(s);
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        self.to.write_all(&bytes).unwrap();
        loop {
            let mut buf = Vec::new();
            let n = self.from.read_until(0, &mut buf).unwrap();
            assert!(n > 0, "chromium closed the pipe (killed after 90 s?)");
            buf.pop();
            let v: Value = serde_json::from_slice(&buf).unwrap();
            if v["id"] == id {
                assert!(v["error"].is_null(), "{method}: {}", v["error"]);
                return v["result"].clone();
            }
        }
    }

    /// `expression`'s value in the page (DevTools evaluation, which the page's CSP does not
    /// govern).
    fn eval(&mut self, expression: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true}),
        );
        assert!(r["exceptionDetails"].is_null(), "{expression}: {r}");
        r["result"]["value"].clone()
    }

    /// Open `page` and wait until it and its images are loaded.
    fn open(&mut self, page: &Path) {
        self.call(
            "Page.navigate",
            json!({"url": format!("file://{}", page.display())}),
        );
        for _ in 0..200 {
            if self.eval("document.readyState") == "complete"
                && self.eval("location.protocol") == "file:"
            {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("{} did not load in 10 s", page.display());
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        self.done.store(true, std::sync::atomic::Ordering::Relaxed);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the test reads of a rendered page, in one evaluation.
const PROBE: &str = r#"JSON.stringify({
  title: document.title,
  scripts: document.scripts.length,
  elements: [...new Set([...document.body.querySelectorAll('*')].map(e => e.localName))].sort(),
  csp: document.querySelector('meta[http-equiv="Content-Security-Policy"]').content,
  summary: Object.fromEntries([...document.querySelectorAll('#summary-table td')].map(td => [td.id, td.textContent])),
  tables: Object.fromEntries([...document.querySelectorAll('table')].map(t => [t.id, t.tBodies[0].rows.length])),
  artefacts: [...document.querySelectorAll('#artefacts-table td[id^="art-"]')].map(td => td.id.slice(4)),
  status: [...document.querySelectorAll('#artefacts-table td[class^="status-"]')].map(td => td.className),
  sessions: [...document.querySelectorAll('#sessions-table tbody tr')].map(r => [...r.cells].map(c => c.textContent)),
  switches: [...document.querySelectorAll('#switches-table tbody tr')].map(r => [...r.cells].map(c => c.textContent)),
  links: [...document.querySelectorAll('a[href]')].map(a => a.href),
  images: [...document.images].map(i => [i.src, i.complete, i.naturalWidth, i.naturalHeight]),
  width: Math.round(document.querySelector('#artefacts-table').getBoundingClientRect().width),
  height: document.documentElement.scrollHeight,
  th: getComputedStyle(document.querySelector('th')).backgroundColor
})"#;

fn probe(b: &mut Browser, page: &Path) -> Value {
    b.open(page);
    serde_json::from_str(b.eval(PROBE).as_str().unwrap()).unwrap()
}

/// A `file://` URL the browser resolved, as a path (percent-decoded).
fn file_path(url: &str) -> PathBuf {
    let p = url
        .strip_prefix("file://")
        .unwrap_or_else(|| panic!("{url}: not a file"));
    PathBuf::from(percent_decoded(p).unwrap())
}

/// Every link and image of the page, as the browser resolved it, is a file inside `dir`;
/// returns the files, relative.
fn resolved_files(page: &Value, dir: &Path) -> std::collections::BTreeSet<String> {
    let dir = dir.canonicalize().unwrap();
    let mut out = std::collections::BTreeSet::new();
    let urls = page["links"]
        .as_array()
        .unwrap()
        .iter()
        .chain(page["images"].as_array().unwrap().iter().map(|i| &i[0]));
    for u in urls {
        let p = file_path(u.as_str().unwrap());
        let real = p
            .canonicalize()
            .unwrap_or_else(|_| panic!("{u}: no such file"));
        assert!(real.is_file(), "{u}: not a file");
        let rel = real
            .strip_prefix(&dir)
            .unwrap_or_else(|_| panic!("{u}: outside DIR"));
        out.insert(rel.to_string_lossy().into_owned());
    }
    out
}

/// Base64 (the screenshot), without a dependency.
fn base64(s: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let mut out = Vec::new();
    for chunk in s.as_bytes().chunks(4) {
        let c: Vec<u8> = chunk.iter().copied().filter(|&c| c != b'=').collect();
        let n = c.iter().fold(0u32, |a, &x| a << 6 | u32::from(val(x))) << (6 * (4 - c.len()));
        out.extend_from_slice(&n.to_be_bytes()[1..c.len()]);
    }
    out
}

#[test]
fn index_renders_in_a_headless_browser() {
    let Some(exe) = chromium() else {
        let msg = "SKIPPED: collect_browser: no chromium on PATH (apt-get install chromium, or set ETWDUMP_CHROMIUM): index.html is not checked in a browser";
        assert!(
            std::env::var_os("ETWDUMP_REQUIRE_BROWSER").is_none(),
            "{msg}"
        );
        eprintln!("{msg}");
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("case");
    let (code, _, err) = collect(&root().join(SAMPLE), &dir, &[]);
    assert_eq!(code, 0, "{err}");
    let hostile_dir = t.path().join("hostile");
    let (code, _, err) = collect(&hostile_dump(t.path()), &hostile_dir, &[]);
    assert_eq!(code, 0, "{err}");
    let mut b = Browser::start(&exe);

    let p = probe(&mut b, &dir.join("index.html"));
    assert_eq!(p["title"], "etwdump collect: sample-x64-etw.dmp");
    assert_eq!(p["scripts"], 0);
    assert!(p["csp"]
        .as_str()
        .unwrap()
        .starts_with("default-src 'none'; script-src 'none';"));
    for (id, v) in [
        ("sum-kind", "bitmap full (x64)"),
        ("sum-build", "19041"),
        ("sum-processors", "4"),
        ("sum-symbols", "pdb, matched by GUID and age"),
        ("sum-sessions", "6"),
        ("sum-buffers", "20"),
        ("sum-etl-files", "6"),
        ("sum-etl-records", "2972"),
        ("sum-switches", "1435"),
        ("sum-events", "2925"),
        ("sum-providers", "19"),
        ("sum-findings", "0"),
        ("sum-scan-objects", "28"),
        ("sum-artefacts", "11 (0 failed)"),
        ("sum-warnings", "15 warnings, 3 notes"),
    ] {
        assert_eq!(p["summary"][id], v, "{id}");
    }
    // Rows per table: the artefacts' files (2+2+1+1+1+7+1+3+1+2+1), the sessions, 5 last
    // switches of each of the 4 CPUs, the warnings.
    assert_eq!(
        p["tables"],
        json!({"summary-table": 18, "artefacts-table": 22, "sessions-table": 6,
               "switches-table": 20, "warnings-table": 18})
    );
    assert_eq!(p["artefacts"], json!(ARTEFACTS));
    assert!(p["status"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s == "status-ok"));
    assert_eq!(p["sessions"][0][1], "NT Kernel Logger");
    assert_eq!(p["sessions"][0][8], "etl/00-NT Kernel Logger.etl");
    assert_eq!(
        p["switches"][5],
        json!([
            "1",
            "2021-02-21T01:38:22.9869629Z",
            "explorer.exe (4836) tid 1288",
            "svchost.exe (1100) tid 1280",
            "WrEventPair",
            "pending"
        ])
    );
    // Laid out and styled by the inline CSS; the chart decoded (its size from the SVG).
    assert!(p["width"].as_u64().unwrap() > 900, "{}", p["width"]);
    assert!(p["height"].as_u64().unwrap() > 2000, "{}", p["height"]);
    assert_eq!(p["th"], "rgb(243, 243, 243)");
    assert_eq!(p["images"].as_array().unwrap().len(), 1);
    assert_eq!(p["images"][0][1], true);
    assert_eq!(
        (p["images"][0][2].as_u64(), p["images"][0][3].as_u64()),
        (Some(1200), Some(236))
    );
    // Every link the browser resolved is a file of DIR, and every file is linked.
    let linked = resolved_files(&p, &dir);
    let mut want = std::collections::BTreeSet::new();
    for e in walkdir(&dir) {
        if e != "index.html" {
            want.insert(e);
        }
    }
    assert_eq!(linked, want);
    // The policy is in force: a script added to the page does not run.
    let ran = b.eval(
        "(() => { const s = document.createElement('script'); s.textContent = 'window.ran = 1'; \
         document.body.appendChild(s); return window.ran === 1; })()",
    );
    assert_eq!(ran, false, "an inline script ran despite the CSP");
    // The screenshot is the page: mostly white, with text and the chart's colours.
    let shot = b.call("Page.captureScreenshot", json!({"format": "png"}));
    let png = base64(shot["data"].as_str().unwrap());
    let pix = resvg::tiny_skia::Pixmap::decode_png(&png).unwrap();
    assert_eq!(pix.width(), 1280);
    assert!(pix.height() > 600, "{}", pix.height());
    if let Some(keep) = std::env::var_os("ETWDUMP_KEEP_SCREENSHOT") {
        std::fs::write(keep, &png).unwrap();
    }
    let ink = pix
        .pixels()
        .iter()
        .filter(|c| c.red() < 200 || c.green() < 200 || c.blue() < 200)
        .count();
    assert!(ink > 10_000, "{ink} dark pixels: a blank screenshot?");

    // The hostile names are text on the page: no element of theirs, shown escaped.
    let h = probe(&mut b, &hostile_dir.join("index.html"));
    assert_eq!(h["scripts"], 0);
    assert_eq!(
        h["elements"], p["elements"],
        "the same elements as the clean page's"
    );
    let s4 = h["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r[0] == "4")
        .unwrap();
    let shown = "<script>alert(1)</script>\"'../../x&amp;\\u{1b}[31m\\u{202e}\\u{7}";
    assert_ne!(shown, HOSTILE_SESSION);
    assert_eq!(s4[1], shown);
    assert_eq!(
        s4[7],
        "..\\..\\<img src=x onerror=alert(2)>\\u{d}\\u{a}\\u{9b}"
    );
    assert_eq!(
        s4[8],
        "etl/04-_script_alert_1___script_______x_amp___31m__.etl"
    );
    assert!(h["switches"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r[2] == "<s>\"../\\u{1b}\\u{202e} (1100) tid 1280"));
    let linked = resolved_files(&h, &hostile_dir);
    assert!(linked.contains("etl/04-_script_alert_1___script_______x_amp___31m__.etl"));
    assert_eq!(linked.len(), walkdir(&hostile_dir).len() - 1);
}

/// Every file under `dir`, relative.
fn walkdir(dir: &Path) -> std::collections::BTreeSet<String> {
    common::collect::tree(dir).into_keys().collect()
}
