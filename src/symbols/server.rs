//! Symbol-server downloads (opt-in: `--symbol-server URL`, or `--fetch-symbols` for the
//! `srv*CACHE*URL` entries of `_NT_SYMBOL_PATH`; never by default). The kernel's PDB is asked
//! for as a symbol server serves it, in the Microsoft layout `URL/<pdb>/<GUID><AGE>/<file>`:
//! the plain `<pdb>`, then the CAB-compressed `<pd_>` (MSZIP or LZX), then `file.ptr` (a
//! `PATH:` to a file this machine can read, or a `MSG:` from the server). What arrives is
//! loaded as a PDB and must carry the GUID and age asked for before it is kept, in the cache
//! directory's same layout (which `--symbols DIR` reads). Proxies come from `ALL_PROXY` /
//! `HTTPS_PROXY` / `HTTP_PROXY` (and lowercase; `NO_PROXY` honoured).

use super::{PdbIdentity, Symbols};
use crate::text::Untrusted;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Largest file accepted from a server (the 22000 kernel's PDB is about 15 MB).
pub const MAX_DOWNLOAD: u64 = 512 << 20;

/// A symbol server and the local cache its files go to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Server {
    /// `http://` or `https://` base URL, without the trailing slash.
    pub url: String,
    pub cache: PathBuf,
    /// Whole-request timeout.
    pub timeout: Duration,
}

impl Server {
    /// A symbol server at `url`, downloads cached under `cache`.
    pub fn new(url: &str, cache: PathBuf) -> Server {
        Server {
            url: url.trim_end_matches('/').to_string(),
            cache,
            timeout: Duration::from_secs(60),
        }
    }
}

/// Why a download gave no PDB.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("{id} is not on {server}: {tried} gave 404")]
    NotFound {
        server: String,
        id: String,
        tried: String,
    },
    #[error("{url}: no answer within {secs} s")]
    Timeout { url: String, secs: u64 },
    #[error("{url}: HTTP status {status}")]
    Status { url: String, status: u16 },
    /// `why`: the HTTP client's text, which may quote what the server sent: untrusted.
    #[error("{url}: {why}")]
    Network { url: String, why: Untrusted },
    /// `why`: the PDB or cabinet reader's text about the server's file: untrusted.
    #[error("{url}: not the PDB asked for: {why}")]
    BadFile { url: String, why: Untrusted },
    /// What a server's `file.ptr` said (`MSG:`), or why the file its `PATH:` names could
    /// not be read: text from the network, shown escaped.
    #[error("{url}: the server says: {message}")]
    Message { url: String, message: Untrusted },
    #[error("{path}: {why}")]
    Cache { path: String, why: String },
}

/// One answer: the body, or a status.
enum Got {
    Body(Vec<u8>),
    Missing,
}

/// GET `url`. A panic of the HTTP client on a hostile answer is contained and reported as a
/// network error (finding 12: ureq 3.5.2 panics in `consume_redirect_body` on a 3xx status it
/// treats as a redirect in one place and not in another, e.g. `343` with a Location).
fn get(agent: &ureq::Agent, url: &str, secs: u64) -> Result<Got, FetchError> {
    super::pdb::contained(|| get_unguarded(agent, url, secs)).unwrap_or_else(|why| {
        Err(FetchError::Network {
            url: url.to_string(),
            why: Untrusted::new(format!(
                "the HTTP client failed on the server's answer ({why})"
            )),
        })
    })
}

fn get_unguarded(agent: &ureq::Agent, url: &str, secs: u64) -> Result<Got, FetchError> {
    let mut resp = match agent.get(url).call() {
        Ok(r) => r,
        Err(ureq::Error::Timeout(_)) => {
            return Err(FetchError::Timeout {
                url: url.to_string(),
                secs,
            })
        }
        Err(e) => {
            return Err(FetchError::Network {
                url: url.to_string(),
                why: Untrusted::new(e.to_string()),
            })
        }
    };
    match resp.status().as_u16() {
        200 => {}
        404 => return Ok(Got::Missing),
        status => {
            return Err(FetchError::Status {
                url: url.to_string(),
                status,
            })
        }
    }
    match resp
        .body_mut()
        .with_config()
        .limit(MAX_DOWNLOAD)
        .read_to_vec()
    {
        Ok(b) => Ok(Got::Body(b)),
        Err(ureq::Error::Timeout(_)) => Err(FetchError::Timeout {
            url: url.to_string(),
            secs,
        }),
        Err(e) => Err(FetchError::Network {
            url: url.to_string(),
            why: Untrusted::new(e.to_string()),
        }),
    }
}

/// The first file of a CAB archive (`.pd_`), at most [`MAX_DOWNLOAD`] bytes. A panic of the
/// `cab` crate on a hostile archive (its `folder.rs` indexes out of bounds on some corrupted
/// headers: 12 of the unit test's 2,000 corruptions) is contained, silently, as for the `pdb`
/// crate, and reported as a bad file. Public for the `symsrv` fuzz target.
pub fn uncab(bytes: Vec<u8>) -> Result<Vec<u8>, String> {
    super::pdb::contained(move || uncab_inner(bytes))
        .unwrap_or_else(|why| Err(format!("the cabinet reader failed on it ({why})")))
}

fn uncab_inner(bytes: Vec<u8>) -> Result<Vec<u8>, String> {
    let mut cab = cab::Cabinet::new(std::io::Cursor::new(bytes)).map_err(|e| e.to_string())?;
    let name = cab
        .folder_entries()
        .flat_map(|f| f.file_entries())
        .map(|f| (f.name().to_string(), f.uncompressed_size()))
        .next()
        .ok_or("an empty cabinet")?;
    if u64::from(name.1) > MAX_DOWNLOAD {
        return Err(format!("{} holds {} bytes", name.0, name.1));
    }
    let mut out = Vec::new();
    cab.read_file(&name.0)
        .map_err(|e| e.to_string())?
        .take(MAX_DOWNLOAD)
        .read_to_end(&mut out)
        .map_err(|e| e.to_string())?;
    Ok(out)
}

/// A `file.ptr` answer: the first line's `PATH:<file>`, else a message (`MSG:<text>` or the
/// whole text), each at most 4096 bytes of the body, untrusted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FilePtr {
    Path(Untrusted),
    Message(Untrusted),
}

impl FilePtr {
    /// Parse a `file.ptr` body: `PATH:<file>`, else a message (after `MSG:`, or the whole text;
    /// at most 200 characters); at most 4096 bytes of the body are read.
    pub fn parse(body: &[u8]) -> FilePtr {
        let t = Untrusted::from_utf8_lossy(&body[..body.len().min(4096)]);
        let text = t.raw().trim();
        match text.strip_prefix("PATH:") {
            Some(p) => FilePtr::Path(Untrusted::from(p.trim())),
            None => FilePtr::Message(
                Untrusted::from(text.strip_prefix("MSG:").unwrap_or(text).trim()).truncated(200),
            ),
        }
    }
}

/// The file a `file.ptr` names, read only if it is a regular file: opened without blocking
/// (a FIFO cannot hold the tool), checked on the open handle (no device, FIFO or socket, even
/// if the path was swapped after a check), and read through the download cap
/// ([`MAX_DOWNLOAD`]) whatever length the file reports.
pub fn read_pointed(path: &Untrusted) -> Result<Vec<u8>, String> {
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    let f = opts.open(path.raw()).map_err(|e| e.to_string())?;
    let meta = f.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err(format!(
            "not a regular file ({}): only a regular file is read",
            file_kind(&meta)
        ));
    }
    if meta.len() > MAX_DOWNLOAD {
        return Err(format!(
            "{} bytes (more than the {MAX_DOWNLOAD}-byte download cap)",
            meta.len()
        ));
    }
    let mut out = Vec::new();
    f.take(MAX_DOWNLOAD + 1)
        .read_to_end(&mut out)
        .map_err(|e| e.to_string())?;
    if out.len() as u64 > MAX_DOWNLOAD {
        return Err(format!("more than {MAX_DOWNLOAD} bytes (the download cap)"));
    }
    Ok(out)
}

/// What kind of file `meta` describes, for the message.
fn file_kind(meta: &std::fs::Metadata) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let t = meta.file_type();
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    if meta.is_dir() {
        "a directory"
    } else {
        "not a regular file"
    }
}

/// Load `bytes` as the PDB `id` names; the symbols when its GUID and age are those.
fn verify(url: &str, id: &PdbIdentity, bytes: &[u8]) -> Result<Symbols, FetchError> {
    let bad = |why: String| FetchError::BadFile {
        url: url.to_string(),
        why: Untrusted::new(why),
    };
    let s = Symbols::from_pdb_bytes(Path::new(url), bytes, super::WANTED_TYPES)
        .map_err(|e| bad(e.to_string()))?;
    match &s.identity {
        Some(got) if got.same_build(id) => Ok(s),
        Some(got) => Err(bad(format!("it is {got}, not {id}"))),
        None => Err(bad("it has no PDB identity".into())),
    }
}

/// Write `bytes` to `path` through a temporary file in the same directory.
fn keep(path: &Path, bytes: &[u8]) -> Result<(), FetchError> {
    let err = |why: std::io::Error| FetchError::Cache {
        path: path.display().to_string(),
        why: why.to_string(),
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(err)?;
    let tmp = dir.join(format!(".etwdump-{}.part", std::process::id()));
    std::fs::write(&tmp, bytes).map_err(err)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        err(e)
    })
}

/// Fetch the PDB `id` names from `server` into its cache: the symbols and where they were kept.
pub fn fetch(server: &Server, id: &PdbIdentity) -> Result<(Symbols, PathBuf), FetchError> {
    let secs = server.timeout.as_secs();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(server.timeout))
        .http_status_as_error(false)
        .proxy(ureq::Proxy::try_from_env())
        .user_agent(concat!("etwdump/", env!("CARGO_PKG_VERSION")))
        .build()
        .into();
    // The name comes from the dump's CodeView record: only a plain file name reaches a URL or a
    // path (`PdbIdentity::file_name`).
    let name = id.file_name().ok_or_else(|| FetchError::BadFile {
        url: server.url.clone(),
        why: id.name.truncated(80).map(|n| {
            format!(
                "the kernel's PDB name in the dump (\"{n}\") is not a plain file name; give the PDB with --pdb"
            )
        }),
    })?;
    let base = format!("{}/{name}/{}", server.url, id.store_key);
    let dest = server.cache.join(name).join(&id.store_key).join(name);
    let mut tried = Vec::new();
    // 1. The PDB itself.
    let url = format!("{base}/{name}");
    if let Got::Body(b) = get(&agent, &url, secs)? {
        let s = verify(&url, id, &b)?;
        keep(&dest, &b)?;
        return Ok((s, dest));
    }
    tried.push(url);
    // 2. CAB-compressed: the name's last character replaced by '_'.
    let mut cabbed = name.to_string();
    cabbed.pop();
    cabbed.push('_');
    let url = format!("{base}/{cabbed}");
    if let Got::Body(b) = get(&agent, &url, secs)? {
        let pdb = uncab(b).map_err(|why| FetchError::BadFile {
            url: url.clone(),
            why: Untrusted::new(format!("not a readable cabinet: {why}")),
        })?;
        let s = verify(&url, id, &pdb)?;
        keep(&dest, &pdb)?;
        return Ok((s, dest));
    }
    tried.push(url);
    // 3. file.ptr: "PATH:<file>" or "MSG:<text>".
    let url = format!("{base}/file.ptr");
    if let Got::Body(b) = get(&agent, &url, secs)? {
        return match FilePtr::parse(&b) {
            FilePtr::Path(p) => {
                let bytes = read_pointed(&p).map_err(|why| FetchError::Message {
                    url: url.clone(),
                    message: Untrusted::new(format!("PATH:{p} cannot be read here: {why}")),
                })?;
                let s = verify(&url, id, &bytes)?;
                keep(&dest, &bytes)?;
                Ok((s, dest))
            }
            FilePtr::Message(message) => Err(FetchError::Message { url, message }),
        };
    }
    tried.push(url);
    Err(FetchError::NotFound {
        server: server.url.clone(),
        id: id.to_string(),
        tried: tried.join(", "),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn cabinet(payload: &[u8]) -> Vec<u8> {
        let mut b = cab::CabinetBuilder::new();
        b.add_folder(cab::CompressionType::MsZip)
            .add_file("ntkrnlmp.pdb");
        let mut w = b.build(std::io::Cursor::new(Vec::new())).unwrap();
        while let Some(mut f) = w.next_file().unwrap() {
            f.write_all(payload).unwrap();
        }
        w.finish().unwrap().into_inner()
    }

    /// file.ptr answers: PATH: (trimmed), MSG:, or the text itself, at most 200 characters
    /// of a message; the text stays untrusted (escaped when shown).
    #[test]
    fn file_ptr_lines() {
        assert_eq!(
            FilePtr::parse(b"  PATH: /srv/sym/nt.pdb \r\n"),
            FilePtr::Path("/srv/sym/nt.pdb".into())
        );
        assert_eq!(
            FilePtr::parse(b"MSG: gone\x1b[31m"),
            FilePtr::Message("gone\u{1b}[31m".into())
        );
        let FilePtr::Message(m) = FilePtr::parse(&[b'x'; 5000]) else {
            panic!()
        };
        assert_eq!(m.len(), 200);
        let FilePtr::Path(p) = FilePtr::parse("PATH:a\u{9b}\u{202e}b".as_bytes()) else {
            panic!()
        };
        assert_eq!(p.to_string(), "a\\u{9b}\\u{202e}b");
    }

    /// Only regular files are read, through the cap: devices, FIFOs (without blocking) and
    /// directories are refused by what the open handle is, a sparse file over the cap by its
    /// length; a plain file is read whole.
    #[test]
    fn pointed_files_are_regular_and_capped() {
        let dir = std::env::temp_dir().join(format!("etwdump-fileptr-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ok = dir.join("ok.pdb");
        std::fs::write(&ok, b"PDB bytes").unwrap();
        assert_eq!(
            read_pointed(&ok.display().to_string().into()).unwrap(),
            b"PDB bytes"
        );
        let big = dir.join("big.pdb");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(MAX_DOWNLOAD + 1)
            .unwrap();
        let e = read_pointed(&big.display().to_string().into()).unwrap_err();
        assert_eq!(
            e,
            format!(
                "{} bytes (more than the 536870912-byte download cap)",
                MAX_DOWNLOAD + 1
            )
        );
        assert_eq!(
            read_pointed(&"/dev/zero".into()).unwrap_err(),
            "not a regular file (a character device): only a regular file is read"
        );
        let fifo = dir.join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo only creates the node.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert_eq!(
            read_pointed(&fifo.display().to_string().into()).unwrap_err(),
            "not a regular file (a FIFO): only a regular file is read"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A valid cabinet gives its file back; every truncation and 2,000 single-byte corruptions
    /// of it end in Ok or Err, never a panic or an unbounded allocation.
    #[test]
    fn hostile_cabinets_end_cleanly() {
        let payload: Vec<u8> = (0..40_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let good = cabinet(&payload);
        assert_eq!(uncab(good.clone()).unwrap(), payload);
        for n in (0..good.len()).step_by(7) {
            let _ = uncab(good[..n].to_vec());
        }
        let mut x = 0x9E37_79B9u32;
        for _ in 0..2000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let mut b = good.clone();
            let i = x as usize % b.len();
            b[i] ^= (x >> 8) as u8 | 1;
            if let Ok(out) = uncab(b) {
                assert!(out.len() as u64 <= MAX_DOWNLOAD);
            }
        }
    }
}
