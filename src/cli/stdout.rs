//! The CLI's standard output, written on a thread of its own.
//!
//! A listing of gigabytes into a pipe would otherwise stop the thread producing the rows
//! every time the pipe is full, for as long as the reader takes to drain it; here the
//! producer only copies into a 1 MiB chunk, and full chunks go to the writing thread (at most
//! `IN_FLIGHT` waiting: bounded memory). On Linux, a pipe on stdout is also enlarged to 1 MiB
//! (`F_SETPIPE_SZ`, the unprivileged maximum by default), so that one chunk is one wake-up of
//! the reader instead of sixteen. Measured in docs/performance.md ("Limits").
//!
//! The bytes and their order are those of a `BufWriter`; `flush` returns when everything
//! written so far is out. The first write error (a closed pipe: `etwdump … | head`) is
//! returned by the next `write` or `flush`.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Bytes gathered before a chunk goes to the writing thread.
const CHUNK: usize = 1 << 20;
/// Chunks waiting for the writing thread at most.
const IN_FLIGHT: usize = 4;
/// The pipe size asked for (Linux).
#[cfg(target_os = "linux")]
const PIPE_SIZE: libc::c_int = 1 << 20;

enum Msg {
    Data(Vec<u8>),
    /// Write out everything before, then answer with the result.
    Flush(SyncSender<io::Result<()>>),
}

/// The first error the writing thread met.
#[derive(Default)]
struct Failure {
    failed: AtomicBool,
    error: Mutex<Option<(io::ErrorKind, String)>>,
}

impl Failure {
    fn set(&self, e: &io::Error) {
        if let Ok(mut g) = self.error.lock() {
            if g.is_none() {
                *g = Some((e.kind(), e.to_string()));
            }
        }
        self.failed.store(true, Ordering::Release);
    }

    fn get(&self) -> Option<io::Error> {
        if !self.failed.load(Ordering::Acquire) {
            return None;
        }
        let (kind, msg) = self
            .error
            .lock()
            .ok()
            .and_then(|g| g.clone())
            .unwrap_or((io::ErrorKind::Other, "stdout failed".into()));
        Some(io::Error::new(kind, msg))
    }
}

/// Standard output through a writing thread (see the module documentation). The thread is
/// started with the first full chunk: an output shorter than a chunk (`symbols`, `info`, a
/// page of any command) is written by the caller's thread when flushed, without the thread's
/// start (measured in docs/performance.md, "symbols").
pub struct ThreadedStdout {
    buf: Vec<u8>,
    /// The writing thread, once started (None after a failed start too: then bytes are
    /// written on the caller's thread).
    writer: Option<Writer>,
    /// Whether the thread was started (or its start failed).
    started: bool,
    failure: Arc<Failure>,
}

/// The writing thread and its channels.
struct Writer {
    tx: SyncSender<Msg>,
    /// Chunks the thread has written, for reuse.
    spare: Receiver<Vec<u8>>,
    handle: JoinHandle<()>,
}

impl Writer {
    /// Start the writing thread (None where no thread can be started).
    fn start(failure: &Arc<Failure>) -> Option<Writer> {
        let (tx, rx) = sync_channel::<Msg>(IN_FLIGHT);
        let (back, spare) = sync_channel::<Vec<u8>>(IN_FLIGHT + 1);
        let f = Arc::clone(failure);
        let handle = std::thread::Builder::new()
            .name("etwdump-stdout".into())
            .spawn(move || {
                enlarge_pipe();
                let mut out = io::stdout().lock();
                for msg in rx {
                    match msg {
                        Msg::Data(mut v) => {
                            if !f.failed.load(Ordering::Relaxed) {
                                if let Err(e) = out.write_all(&v) {
                                    f.set(&e);
                                }
                            }
                            v.clear();
                            let _ = back.try_send(v);
                        }
                        Msg::Flush(ack) => {
                            let r = match f.get() {
                                Some(e) => Err(e),
                                None => out.flush().inspect_err(|e| f.set(e)),
                            };
                            let _ = ack.send(r);
                        }
                    }
                }
                let _ = out.flush();
            })
            .ok()?;
        Some(Writer { tx, spare, handle })
    }
}

impl ThreadedStdout {
    /// Standard output; the writing thread starts with the first full chunk.
    pub fn new() -> ThreadedStdout {
        ThreadedStdout {
            buf: Vec::new(),
            writer: None,
            started: false,
            failure: Arc::new(Failure::default()),
        }
    }

    /// The writing thread, started if it was not (None: it could not be started).
    fn writer(&mut self) -> Option<&Writer> {
        if !self.started {
            self.started = true;
            self.writer = Writer::start(&self.failure);
        }
        self.writer.as_ref()
    }

    /// Hand the gathered bytes to the writing thread (or write them here without one).
    fn send(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        match self.writer() {
            Some(w) => {
                let next = w
                    .spare
                    .try_recv()
                    .unwrap_or_else(|_| Vec::with_capacity(CHUNK));
                let chunk = std::mem::replace(&mut self.buf, next);
                self.writer_send(Msg::Data(chunk))
            }
            None => {
                let r = io::stdout().lock().write_all(&self.buf);
                self.buf.clear();
                r
            }
        }
    }

    /// Send `msg` to the writing thread, which must have been started.
    fn writer_send(&self, msg: Msg) -> io::Result<()> {
        self.writer
            .as_ref()
            .ok_or_else(|| io::Error::other("the stdout thread stopped"))?
            .tx
            .send(msg)
            .map_err(|_| io::Error::other("the stdout thread stopped"))
    }
}

impl ThreadedStdout {
    /// Write `chunk` (after everything written before) by handing it to the writing thread
    /// instead of copying it; returns an empty buffer for the caller's next chunk (one the
    /// thread is done with, when there is one). For [`RowWriter::giving`]: a listing's
    /// rendered batches go out without another copy.
    ///
    /// [`RowWriter::giving`]: etwdump::render::rows::RowWriter::giving
    pub fn give(&mut self, mut chunk: Vec<u8>) -> io::Result<Vec<u8>> {
        if let Some(e) = self.failure.get() {
            return Err(e);
        }
        self.send()?;
        if self.writer().is_some() {
            self.writer_send(Msg::Data(chunk))?;
            Ok(self
                .writer
                .as_ref()
                .and_then(|w| w.spare.try_recv().ok())
                .unwrap_or_default())
        } else {
            io::stdout().lock().write_all(&chunk)?;
            chunk.clear();
            Ok(chunk)
        }
    }

    /// [`give`](Self::give) as a [`RowWriter`](etwdump::render::rows::RowWriter) takes it
    /// (its writer is a `&mut ThreadedStdout`).
    pub fn give_to(out: &mut &mut ThreadedStdout, chunk: Vec<u8>) -> io::Result<Vec<u8>> {
        out.give(chunk)
    }
}

impl Default for ThreadedStdout {
    fn default() -> Self {
        Self::new()
    }
}

impl Write for ThreadedStdout {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        if let Some(e) = self.failure.get() {
            return Err(e);
        }
        if !self.buf.is_empty() && self.buf.len() + b.len() > CHUNK {
            self.send()?;
        }
        if self.buf.capacity() == 0 {
            self.buf.reserve(CHUNK.max(b.len()));
        }
        self.buf.extend_from_slice(b);
        if self.buf.len() >= CHUNK {
            self.send()?;
        }
        Ok(b.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.writer.is_none() {
            // No thread (not started: everything so far fits a chunk; or it could not be
            // started): the bytes go out from here.
            let mut out = io::stdout().lock();
            let r = out.write_all(&self.buf).and_then(|()| out.flush());
            self.buf.clear();
            return r;
        }
        self.send()?;
        let (ack, done) = sync_channel(1);
        self.writer_send(Msg::Flush(ack))?;
        done.recv()
            .map_err(|_| io::Error::other("the stdout thread stopped"))?
    }
}

impl Drop for ThreadedStdout {
    /// What was written and not flushed goes out (as a `BufWriter` does on drop).
    fn drop(&mut self) {
        if self.writer.is_none() {
            let _ = io::stdout().lock().write_all(&self.buf);
            return;
        }
        let _ = self.send();
        if let Some(w) = self.writer.take() {
            drop(w.tx);
            let _ = w.handle.join();
        }
    }
}

/// Make a pipe on stdout hold 1 MiB (Linux; anything else, or a failure, leaves it as it is).
fn enlarge_pipe() {
    #[cfg(target_os = "linux")]
    // SAFETY: fstat and fcntl on file descriptor 1 with a zeroed stat buffer we own; no
    // memory is shared with the kernel beyond the call.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(1, &mut st) == 0 && (st.st_mode & libc::S_IFMT) == libc::S_IFIFO {
            let _ = libc::fcntl(1, libc::F_SETPIPE_SZ, PIPE_SIZE);
        }
    }
}
