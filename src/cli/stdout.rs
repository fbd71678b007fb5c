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
/// Before the writing thread starts (the first `CHUNK` bytes), bytes are gathered this many
/// at a time and written on the caller's thread: an output shorter than a chunk (`symbols`,
/// `info`) then touches 64 KiB of buffer, not a chunk's MiB (a fault a page: 85 of
/// `symbols`' 960 on the large PDB).
const FIRST: usize = 1 << 16;
/// Chunks waiting for the writing thread at most.
const IN_FLIGHT: usize = 4;
/// The pipe size asked for (Linux).
#[cfg(target_os = "linux")]
const PIPE_SIZE: libc::c_int = 1 << 20;

/// Where the bytes go: standard output (or, in tests, a shared buffer).
pub trait Sink: Clone + Send + 'static {
    fn write_all(&self, b: &[u8]) -> io::Result<()>;
    fn flush(&self) -> io::Result<()>;
    /// Ready the sink for a stream (when the writing thread starts).
    fn prepare(&self) {}
}

/// The process's standard output.
#[derive(Clone, Copy, Default)]
pub struct Stdout;

impl Sink for Stdout {
    fn write_all(&self, b: &[u8]) -> io::Result<()> {
        io::stdout().lock().write_all(b)
    }

    fn flush(&self) -> io::Result<()> {
        io::stdout().lock().flush()
    }

    fn prepare(&self) {
        enlarge_pipe();
    }
}

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

/// Standard output through a writing thread (see the module documentation). The first
/// chunk's bytes are written by the caller's thread, 64 KiB at a time (`FIRST`), and the
/// thread is started with the first full chunk after them: an output shorter than a chunk
/// (`symbols`, `info`, a page of any command) is written without the thread's start and
/// through a small buffer (measured in docs/performance.md, "symbols").
pub struct ThreadedStdout<S: Sink = Stdout> {
    sink: S,
    buf: Vec<u8>,
    /// The writing thread, once started (None after a failed start too: then bytes are
    /// written on the caller's thread).
    writer: Option<Writer>,
    /// Whether the thread was started (or its start failed).
    started: bool,
    /// Bytes written on the caller's thread before the thread started.
    direct: usize,
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
    fn start<S: Sink>(sink: &S, failure: &Arc<Failure>) -> Option<Writer> {
        let (tx, rx) = sync_channel::<Msg>(IN_FLIGHT);
        let (back, spare) = sync_channel::<Vec<u8>>(IN_FLIGHT + 1);
        let f = Arc::clone(failure);
        let out = sink.clone();
        let handle = std::thread::Builder::new()
            .name("etwdump-stdout".into())
            .spawn(move || {
                out.prepare();
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
        ThreadedStdout::to(Stdout)
    }
}

impl<S: Sink> ThreadedStdout<S> {
    /// Output to `sink`.
    pub fn to(sink: S) -> ThreadedStdout<S> {
        ThreadedStdout {
            sink,
            buf: Vec::new(),
            writer: None,
            started: false,
            direct: 0,
            failure: Arc::new(Failure::default()),
        }
    }

    /// The writing thread, started if it was not (None: it could not be started).
    fn writer(&mut self) -> Option<&Writer> {
        if !self.started {
            self.started = true;
            self.writer = Writer::start(&self.sink, &self.failure);
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
                let r = self.sink.write_all(&self.buf);
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

impl<S: Sink> ThreadedStdout<S> {
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
            self.sink.write_all(&chunk)?;
            chunk.clear();
            Ok(chunk)
        }
    }

    /// [`give`](Self::give) as a [`RowWriter`](etwdump::render::rows::RowWriter) takes it
    /// (its writer is a `&mut ThreadedStdout`).
    pub fn give_to(out: &mut &mut ThreadedStdout<S>, chunk: Vec<u8>) -> io::Result<Vec<u8>> {
        out.give(chunk)
    }
}

impl Default for ThreadedStdout {
    fn default() -> Self {
        Self::new()
    }
}

impl<S: Sink> Write for ThreadedStdout<S> {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        if let Some(e) = self.failure.get() {
            return Err(e);
        }
        if !self.started && self.direct < CHUNK {
            // The first chunk's bytes: out from here, FIRST at a time.
            if !self.buf.is_empty() && self.buf.len() + b.len() > FIRST {
                self.sink.write_all(&self.buf)?;
                self.direct += self.buf.len();
                self.buf.clear();
            }
            if b.len() >= FIRST {
                self.sink.write_all(b)?;
                self.direct += b.len();
            } else {
                if self.buf.capacity() == 0 {
                    self.buf.reserve(FIRST);
                }
                self.buf.extend_from_slice(b);
            }
            return Ok(b.len());
        }
        if !self.buf.is_empty() && self.buf.len() + b.len() > CHUNK {
            self.send()?;
        }
        if self.buf.capacity() < CHUNK {
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
            let r = self
                .sink
                .write_all(&self.buf)
                .and_then(|()| self.sink.flush());
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

impl<S: Sink> Drop for ThreadedStdout<S> {
    /// What was written and not flushed goes out (as a `BufWriter` does on drop).
    fn drop(&mut self) {
        if self.writer.is_none() {
            let _ = self.sink.write_all(&self.buf);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A sink that keeps what it is given, and the size of each write.
    #[derive(Clone, Default)]
    struct Kept(Arc<Mutex<(Vec<u8>, Vec<usize>)>>);

    impl Sink for Kept {
        fn write_all(&self, b: &[u8]) -> io::Result<()> {
            let mut g = self.0.lock().unwrap();
            g.0.extend_from_slice(b);
            g.1.push(b.len());
            Ok(())
        }
        fn flush(&self) -> io::Result<()> {
            Ok(())
        }
    }

    /// Bytes numbered by position (a reordering or a lost piece shows).
    fn bytes(from: usize, n: usize) -> Vec<u8> {
        (from..from + n).map(|i| (i % 251) as u8).collect()
    }

    #[test]
    fn a_short_output_goes_out_in_pieces_of_first_without_the_thread() {
        let sink = Kept::default();
        let mut out = ThreadedStdout::to(sink.clone());
        let mut at = 0;
        // 347 KB in the pieces a pretty writer gives (up to 64 KiB), as `symbols` writes.
        for n in [70_000usize, 65_536, 1, 100_000, 5, 65_535, 46_000] {
            out.write_all(&bytes(at, n)).unwrap();
            at += n;
        }
        out.flush().unwrap();
        assert!(out.writer.is_none(), "no writing thread for {at} bytes");
        let g = sink.0.lock().unwrap();
        assert_eq!(g.0, bytes(0, at));
        // Pieces of at most 64 KiB gathered, or a large write passed on whole.
        assert!(
            g.1.iter()
                .all(|&n| n <= FIRST || n == 70_000 || n == 100_000),
            "{:?}",
            g.1
        );
    }

    #[test]
    fn a_long_output_is_in_order_across_the_threads_start() {
        let sink = Kept::default();
        let mut out = ThreadedStdout::to(sink.clone());
        let mut at = 0;
        let mut sizes = [1usize, 4096, 65_536, 65_537, 300_000, 7, CHUNK, CHUNK + 3]
            .iter()
            .cycle();
        while at < 5 * CHUNK {
            let n = *sizes.next().unwrap();
            if n == 300_000 {
                // A rendered batch handed over whole (`RowWriter::giving`).
                let spare = out.give(bytes(at, n)).unwrap();
                assert!(spare.is_empty());
            } else {
                out.write_all(&bytes(at, n)).unwrap();
            }
            at += n;
            if n == 7 {
                out.flush().unwrap();
                assert_eq!(sink.0.lock().unwrap().0, bytes(0, at), "flushed at {at}");
            }
        }
        out.flush().unwrap();
        assert!(out.writer.is_some(), "the thread writes a long output");
        assert_eq!(sink.0.lock().unwrap().0, bytes(0, at));
        drop(out);
        assert_eq!(sink.0.lock().unwrap().0.len(), at);
    }

    /// A sink that fails (a closed pipe) once it has taken `limit` bytes.
    #[derive(Clone)]
    struct Closes(Arc<Mutex<usize>>, usize);

    impl Sink for Closes {
        fn write_all(&self, b: &[u8]) -> io::Result<()> {
            let mut g = self.0.lock().unwrap();
            if *g + b.len() > self.1 {
                return Err(io::Error::new(io::ErrorKind::BrokenPipe, "closed"));
            }
            *g += b.len();
            Ok(())
        }
        fn flush(&self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_closed_sink_is_an_error_before_and_after_the_threads_start() {
        for limit in [10_000usize, 3 * CHUNK] {
            let mut out = ThreadedStdout::to(Closes(Default::default(), limit));
            let mut failed = None;
            for i in 0..200 {
                if let Err(e) = out.write_all(&bytes(i * 40_000, 40_000)).and_then(|()| {
                    if i % 10 == 9 {
                        out.flush()
                    } else {
                        Ok(())
                    }
                }) {
                    failed = Some((i, e.kind()));
                    break;
                }
            }
            let (i, kind) = failed.expect("the closed sink is reported");
            assert_eq!(kind, io::ErrorKind::BrokenPipe, "limit {limit}");
            // Reported by the write that met it, or by the flush after it (at most ten
            // writes of 40,000 bytes later, and never before the limit was reached).
            assert!(
                (i + 1) * 40_000 > limit && i * 40_000 <= limit + 10 * 40_000,
                "{i}"
            );
        }
    }
}
