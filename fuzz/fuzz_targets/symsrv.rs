//! The symbol-server client's response handling (issue 27): the input's first byte picks
//! (0) a `file.ptr` body (`FilePtr::parse`; a `PATH:` is then read through `read_pointed`,
//!     which must refuse anything but a regular file and stay within the cap);
//! (1) a cabinet (`uncab`), whose first file is then loaded as a PDB;
//! (2) a whole HTTP response: a responder on 127.0.0.1 answers every request with the input
//!     bytes and closes, and `fetch` asks for a PDB (the plain name, the `.pd_`, `file.ptr`)
//!     with a 2 s timeout, caching into a scratch directory.
//!
//! Oracles: what a server says is shown terminal-safe (`FetchError`'s text, `file.ptr`
//! lines: F4); nothing over the 512 MiB cap is accepted.
#![no_main]

use etwdump::symbols::server::{fetch, read_pointed, uncab, FilePtr, Server, MAX_DOWNLOAD};
use etwdump::symbols::{PdbIdentity, Symbols, WANTED_TYPES};
use etwdump_fuzz::{assert_terminal_safe, scratch_dir, Input};
use libfuzzer_sys::fuzz_target;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// The current HTTP answer and the responder's port.
fn responder() -> &'static (Arc<Mutex<Vec<u8>>>, u16) {
    static R: OnceLock<(Arc<Mutex<Vec<u8>>>, u16)> = OnceLock::new();
    R.get_or_init(|| {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().unwrap().port();
        let answer: Arc<Mutex<Vec<u8>>> = Arc::default();
        let a = answer.clone();
        std::thread::spawn(move || {
            for conn in l.incoming() {
                let Ok(mut c) = conn else { continue };
                let _ = c.set_read_timeout(Some(Duration::from_secs(2)));
                // The request line and headers (at most 64 lines), then the answer.
                let mut rd = BufReader::new(match c.try_clone() {
                    Ok(x) => x,
                    Err(_) => continue,
                });
                for _ in 0..64 {
                    let mut line = String::new();
                    if rd.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
                        break;
                    }
                }
                let body = a.lock().unwrap().clone();
                let _ = c.write_all(&body);
                let _ = c.shutdown(std::net::Shutdown::Both);
            }
        });
        (answer, port)
    })
}

fn id() -> PdbIdentity {
    PdbIdentity::from_guid_text("ntkrnlmp.pdb", "5278AFF8-6C34-1677-D7D7-835C85B7B844", 1)
        .expect("identity")
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    match input.u8() % 3 {
        0 => match FilePtr::parse(input.remaining()) {
            FilePtr::Path(p) => {
                assert_terminal_safe("file.ptr PATH", &p.to_string());
                if let Ok(b) = read_pointed(&p) {
                    assert!(b.len() as u64 <= MAX_DOWNLOAD);
                }
            }
            FilePtr::Message(m) => assert_terminal_safe("file.ptr MSG", &m.to_string()),
        },
        1 => {
            if let Ok(pdb) = uncab(input.remaining().to_vec()) {
                assert!(pdb.len() as u64 <= MAX_DOWNLOAD);
                let _ =
                    Symbols::from_pdb_bytes(std::path::Path::new("fuzz.pdb"), &pdb, WANTED_TYPES);
            }
        }
        _ => {
            let (answer, port) = responder();
            *answer.lock().unwrap() = input.remaining().to_vec();
            let mut s = Server::new(
                &format!("http://127.0.0.1:{port}"),
                scratch_dir().join("cache"),
            );
            s.timeout = Duration::from_secs(2);
            if let Err(e) = fetch(&s, &id()) {
                assert_terminal_safe("fetch error", &e.to_string());
            }
        }
    }
});
