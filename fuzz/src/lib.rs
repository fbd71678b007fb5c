//! Helpers shared by the fuzz targets.

use std::path::{Path, PathBuf};

/// A little cursor over the fuzz input (reads past the end give zeros / empty slices).
pub struct Input<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Input<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Input { data, pos: 0 }
    }
    pub fn is_empty(&self) -> bool {
        self.pos >= self.data.len()
    }
    pub fn remaining(&self) -> &'a [u8] {
        &self.data[self.pos.min(self.data.len())..]
    }
    pub fn u8(&mut self) -> u8 {
        let v = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        v
    }
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    pub fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | (u64::from(self.u32()) << 32)
    }
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let start = self.pos.min(self.data.len());
        let end = (start + n).min(self.data.len());
        self.pos = start + n;
        &self.data[start..end]
    }
}

/// A scratch directory private to this process, created on first use: under
/// `$ETWDUMP_FUZZ_SCRATCH` when set (the scripts set it and remove it afterwards), else under
/// /dev/shm (tmpfs) or the temp dir. Each fuzzing process (fork-mode jobs too) gets its own.
pub fn scratch_dir() -> PathBuf {
    let base = if let Some(b) = std::env::var_os("ETWDUMP_FUZZ_SCRATCH") {
        PathBuf::from(b)
    } else if Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let d = base.join(format!("etwdump-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

/// Write `data` to `scratch_dir()/name` and return the path.
pub fn scratch_file(name: &str, data: &[u8]) -> PathBuf {
    let p = scratch_dir().join(name);
    std::fs::write(&p, data).expect("write scratch file");
    p
}

/// Total bytes of the regular files under `dir` (recursively).
pub fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let Ok(m) = e.metadata() else { continue };
            if m.is_dir() {
                total += dir_bytes(&e.path());
            } else {
                total += m.len();
            }
        }
    }
    total
}

/// The repository root (fuzz/..), for the fixtures.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The allocation guard: the system allocator, aborting on any single request above
/// `ETWDUMP_FUZZ_MALLOC_LIMIT_MB` (default 2048, libFuzzer's own default `-malloc_limit_mb`).
/// libFuzzer's malloc limit works only through a sanitizer's allocator hooks; a build without
/// a sanitizer (`cargo fuzz build -s none`, the long campaigns of `campaign.sh` with `SAN=none`)
/// keeps the same oracle through this guard. Multi-GiB reservations are what an overcommitting
/// OS grants silently (findings 4 and 8), so the RSS limit alone would not see them.
mod guard {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::io::Write;
    use std::sync::atomic::{AtomicUsize, Ordering};

    pub struct Guard;

    /// The limit in bytes; 0: not read yet.
    static LIMIT: AtomicUsize = AtomicUsize::new(0);

    fn limit() -> usize {
        match LIMIT.load(Ordering::Relaxed) {
            0 => {
                // Reading the environment allocates: set a provisional limit first so the
                // nested allocations pass.
                LIMIT.store(usize::MAX, Ordering::Relaxed);
                let mb = std::env::var("ETWDUMP_FUZZ_MALLOC_LIMIT_MB")
                    .ok()
                    .and_then(|v| v.parse::<usize>().ok())
                    .unwrap_or(2048);
                let l = mb.saturating_mul(1 << 20).max(1);
                LIMIT.store(l, Ordering::Relaxed);
                l
            }
            l => l,
        }
    }

    fn check(size: usize) {
        if size > limit() {
            // No allocation from here on: a fixed buffer, unbuffered stderr, abort (libFuzzer
            // reports the deadly signal and saves the input).
            let mut buf = [0u8; 128];
            let mut w = &mut buf[..];
            let _ = write!(
                w,
                "==ERROR: etwdump-fuzz: allocation of {size} bytes over the limit\n"
            );
            let n = 128 - w.len();
            let _ = std::io::stderr().write_all(&buf[..n]);
            std::process::abort();
        }
    }

    // SAFETY: every call is forwarded to the system allocator unchanged after the size check.
    unsafe impl GlobalAlloc for Guard {
        unsafe fn alloc(&self, l: Layout) -> *mut u8 {
            check(l.size());
            System.alloc(l)
        }
        unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
            check(l.size());
            System.alloc_zeroed(l)
        }
        unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
            System.dealloc(p, l)
        }
        unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
            check(n);
            System.realloc(p, l, n)
        }
    }

    #[global_allocator]
    static GLOBAL: Guard = Guard;
}

/// Apply the input's patch operations to the pages at the file offsets `pages` of `bytes`
/// (the structure-aware targets of issue 27: `scan_mem`, `walks`): each operation is
/// kind u8, page u16 (modulo the list), offset u16 (modulo the page), then per kind
/// 0: len u8 and that many bytes | 1: a u32 | 2: a u64 | 3: a u64 pointer-like value
/// (0xFFFF8... | the input's low 32 bits). At most 32 operations.
pub fn patch_pages(bytes: &mut [u8], pages: &[usize], input: &mut Input<'_>) {
    if pages.is_empty() {
        return;
    }
    for _ in 0..32 {
        if input.is_empty() {
            break;
        }
        let kind = input.u8() % 4;
        let page = pages[usize::from(input.u16()) % pages.len()];
        let off = page + usize::from(input.u16()) % 4096;
        let data: Vec<u8> = match kind {
            0 => {
                let n = usize::from(input.u8());
                input.bytes(n).to_vec()
            }
            1 => input.u32().to_le_bytes().to_vec(),
            2 => input.u64().to_le_bytes().to_vec(),
            _ => (0xFFFF_8000_0000_0000u64 | u64::from(input.u32()))
                .to_le_bytes()
                .to_vec(),
        };
        let end = (off + data.len()).min(bytes.len()).min(page + 4096);
        if off < end {
            bytes[off..end].copy_from_slice(&data[..end - off]);
        }
    }
}

/// The oracle of issue 27: text for a terminal holds no raw control character (C0 but the
/// line break, DEL, C1, bidi controls: `etwdump::text::needs_escape`).
pub fn assert_terminal_safe(what: &str, text: &str) {
    if let Some(c) = text
        .chars()
        .find(|&c| c != '\n' && etwdump::text::needs_escape(c))
    {
        panic!("{what}: raw {c:?} in {text:?}");
    }
}

/// The 19041 fixture's PDB symbols, loaded once and lent to one run's context at a time
/// (`scan_mem`, `walks`): [`lend_symbols`] puts them in, [`return_symbols`] takes them back.
fn fixture_symbols() -> &'static std::sync::Mutex<Option<etwdump::symbols::Symbols>> {
    static S: std::sync::OnceLock<std::sync::Mutex<Option<etwdump::symbols::Symbols>>> =
        std::sync::OnceLock::new();
    S.get_or_init(|| {
        let s = etwdump::symbols::Symbols::from_pdb(
            &repo_root().join("tests/fixtures/x64-19041/ntkrnlmp.pdb"),
            etwdump::symbols::WANTED_TYPES,
        )
        .expect("fixture PDB")
        .with_builtin(19041, etwdump::symbols::TableFamily::X64);
        std::sync::Mutex::new(Some(s))
    })
}

/// Give `ctx` the fixture's symbols (see [`fixture_symbols`]).
pub fn lend_symbols(ctx: &mut etwdump::kernel::context::KernelContext<'_>) {
    ctx.symbols = fixture_symbols().lock().unwrap().take().expect("symbols");
}

/// Take the fixture's symbols back from `ctx`.
pub fn return_symbols(ctx: &mut etwdump::kernel::context::KernelContext<'_>) {
    let s = std::mem::replace(&mut ctx.symbols, etwdump::symbols::Symbols::none(8));
    *fixture_symbols().lock().unwrap() = Some(s);
}

/// A valid dump built once and the file offsets of the pages the input may patch
/// (`scan_mem`, `walks`).
pub struct PatchBase {
    pub bytes: Vec<u8>,
    pub pages: Vec<usize>,
}

impl PatchBase {
    /// Run `f` on the base with the input's patches applied ([`patch_pages`]), through a
    /// kernel context holding the fixture's symbols; nothing when the patched file does not
    /// open.
    pub fn run(&self, data: &[u8], f: impl FnOnce(&etwdump::kernel::context::KernelContext<'_>)) {
        let mut bytes = self.bytes.clone();
        patch_pages(&mut bytes, &self.pages, &mut Input::new(data));
        let Ok(d) = etwdump::dump::DumpFile::from_bytes(bytes, Default::default()) else {
            return;
        };
        let mut ctx = etwdump::kernel::context::KernelContext::without_symbols(&d);
        lend_symbols(&mut ctx);
        f(&ctx);
        return_symbols(&mut ctx);
    }
}
