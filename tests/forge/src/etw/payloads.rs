//! Realistic payloads for the classic kernel (MOF) event classes (issue 29 item 5): for each
//! (hook, version) a writer of the event data after the SYSTEM / PERFINFO header, for both
//! pointer widths, that returns the bytes and the fields it wrote ("the truth": MOF field names
//! and values) so that a reader's decoding can be compared field by field.
//!
//! Written from public documentation only, never from etwdump's decoder:
//!
//! * [MOF] Microsoft's kernel MOF schema `wmicore.mof` (Windows SDK; the copy read is
//!   github.com/johnstra10/qemu_exploration `wmicore.mof`): class names, event types, versions
//!   (`EventVersion`), field order and types. Qualifiers: `pointer` / `PointerType` and
//!   `extension("SizeT")` are pointer-sized (4 bytes in the 32-bit header kinds, 8 in the 64-bit
//!   ones); a `string` without `format("w")` is an ANSI NUL-terminated string, with it a UTF-16
//!   one; `char16[N]` is N UTF-16 units, NUL-padded; `extension("WmiTime")` a 64-bit time;
//!   `extension("IPAddrV4")` 4 address bytes, `extension("IPAddrV6")` 16, `extension("Port")` a
//!   16-bit port (both in network byte order, as on the wire); fields are packed in declaration
//!   order (MOF data has no alignment padding).
//! * [LEARN] the Microsoft Learn class pages ("Process_V2_TypeGroup1 class", "Image_Load class",
//!   "TcpIp_TypeGroup1 class", ...; https://learn.microsoft.com/windows/win32/etw/<class>): the
//!   same layouts, and the field names. Where a page shows an older layout under the current class
//!   name (Image_Load, FileIo_Create: the version-2 layouts), the MOF's versioned classes are
//!   followed: the version byte of the record says which layout it carries.
//! * [SID] `extension("Sid")`: "a TOKEN_USER structure followed by the SID" (the MOF qualifier
//!   pages); TOKEN_USER = {PSID Sid; ULONG Attributes} padded to pointer alignment: 8 bytes with
//!   32-bit pointers, 16 with 64-bit ones (TraceEvent's `SkipSID`: `HostOffset(8, 2)`); then the
//!   SID (MS-DTYP 2.4.2.2: Revision 1, SubAuthorityCount, 6-byte big-endian
//!   IdentifierAuthority, SubAuthority[] little-endian ULONGs). A NULL TOKEN_USER pointer is a
//!   4-byte 0 (TraceEvent); the forge always writes a SID.
//! * [NTWMI] the event groups of ntwmi.h (`EVENT_TRACE_GROUP_*`): IO 0x01, MEMORY 0x02,
//!   PROCESS 0x03, FILE 0x04, THREAD 0x05, TCPIP 0x06, UDPIP 0x08, REGISTRY 0x09, CONFIG 0x0B,
//!   PERFINFO 0x0F, IMAGE 0x14; a hook is `group << 8 | type`.
//!
//! Ambiguities (written as the MOF says, noted here):
//! * SampledProfile v2: the MOF has `Count` uint16 + `Reserved` uint16, the Learn page one
//!   `Count` uint32 ("not used"). The MOF's layout is written (Reserved = 0).
//! * Image_Load v3: the MOF has `SignatureLevel` uint8, `SignatureType` uint8, `Reserved0`
//!   uint16 where the Learn page (the v2 layout) has `Reserved0` uint32. The field name is
//!   `ImageCheckSum` on the current Learn page and `ImageChecksum` in the MOF: the Learn
//!   spelling is used.
//! * FileIo v3 (MOF `FileIo_Create`, ...): `TTID` is a uint32 after `FileObject`; the Learn
//!   pages show the v2 layout (`TTID` a pointer after `IrpPtr`), written here for version 2.
//! * TcpIp / UdpIp v2: `seqnum` then `connid` (MOF and Learn), `connid` pointer-sized (the MOF's
//!   `PointerType`, Learn's "Pointer").
//! * ISR v2: `ReturnValue` uint8, `Vector` uint16, `Reserved` uint8 packed after `Routine`
//!   (so `Vector` is unaligned, at +0x11 on x64 / +0x0D on x86).

use crate::util::Rng;

/// A decoded value as the forge meant it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Val {
    /// An unsigned integer (uint8..uint64).
    U(u64),
    /// A signed integer (sint16, sint32, sint64).
    I(i64),
    /// A pointer-sized value (`pointer`, `PointerType`, `extension("SizeT")`).
    Ptr(u64),
    /// A string (ANSI, UTF-16, or a char16 array up to its first NUL).
    Str(String),
    /// A SID as `S-1-...` text.
    Sid(String),
    /// An IPv4 (dotted) or IPv6 (RFC 5952) address.
    Ip(String),
    /// A GUID, `XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX` (uppercase).
    Guid(String),
}

/// Which header the record has (etw-internals.md §5): SYSTEM32/64 (0x20 bytes: ThreadId and
/// ProcessId of the logging thread, SystemTime, Kernel/UserTime) or PERFINFO32/64 (0x10).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PayloadHeader {
    System,
    PerfInfo,
}

/// One record with a realistic payload and its truth.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PayloadRec {
    pub header: PayloadHeader,
    /// 64-bit header kind and pointers (else 32-bit).
    pub x64: bool,
    pub hook: u16,
    /// The class version (the marker's low byte).
    pub version: u8,
    /// The SYSTEM header's ThreadId / ProcessId (0 for PERFINFO records).
    pub tid: u32,
    pub pid: u32,
    /// The MOF class name of this (hook, version).
    pub class: String,
    /// The event data.
    pub data: Vec<u8>,
    /// The fields in wire order: (MOF name, value).
    pub fields: Vec<(String, Val)>,
}

impl PayloadRec {
    /// The record's size (header + data).
    pub fn size(&self) -> usize {
        match self.header {
            PayloadHeader::System => 0x20 + self.data.len(),
            PayloadHeader::PerfInfo => 0x10 + self.data.len(),
        }
    }
}

/// Writes one payload: bytes and truth.
struct W {
    x64: bool,
    data: Vec<u8>,
    fields: Vec<(String, Val)>,
}

impl W {
    fn new(x64: bool) -> W {
        W {
            x64,
            data: Vec::new(),
            fields: Vec::new(),
        }
    }
    fn f(&mut self, name: &str, v: Val) {
        self.fields.push((name.to_string(), v));
    }
    fn u8(&mut self, name: &str, v: u8) {
        self.data.push(v);
        self.f(name, Val::U(v.into()));
    }
    fn u16(&mut self, name: &str, v: u16) {
        self.data.extend_from_slice(&v.to_le_bytes());
        self.f(name, Val::U(v.into()));
    }
    fn i16(&mut self, name: &str, v: i16) {
        self.data.extend_from_slice(&v.to_le_bytes());
        self.f(name, Val::I(v.into()));
    }
    fn u32(&mut self, name: &str, v: u32) {
        self.data.extend_from_slice(&v.to_le_bytes());
        self.f(name, Val::U(v.into()));
    }
    fn i32(&mut self, name: &str, v: i32) {
        self.data.extend_from_slice(&v.to_le_bytes());
        self.f(name, Val::I(v.into()));
    }
    fn u64(&mut self, name: &str, v: u64) {
        self.data.extend_from_slice(&v.to_le_bytes());
        self.f(name, Val::U(v));
    }
    fn i64(&mut self, name: &str, v: i64) {
        self.data.extend_from_slice(&v.to_le_bytes());
        self.f(name, Val::I(v));
    }
    /// A pointer-sized value (truncated to 32 bits in the 32-bit kinds).
    fn ptr(&mut self, name: &str, v: u64) {
        let v = if self.x64 { v } else { v & 0xFFFF_FFFF };
        let n = if self.x64 { 8 } else { 4 };
        self.data.extend_from_slice(&v.to_le_bytes()[..n]);
        self.f(name, Val::Ptr(v));
    }
    fn ansi(&mut self, name: &str, s: &str) {
        assert!(s.is_ascii());
        self.data.extend_from_slice(s.as_bytes());
        self.data.push(0);
        self.f(name, Val::Str(s.to_string()));
    }
    fn wstr(&mut self, name: &str, s: &str) {
        for u in s.encode_utf16() {
            self.data.extend_from_slice(&u.to_le_bytes());
        }
        self.data.extend_from_slice(&[0, 0]);
        self.f(name, Val::Str(s.to_string()));
    }
    /// `char16[n]`: the text, NUL-padded to n units.
    fn wchars(&mut self, name: &str, s: &str, n: usize) {
        let units: Vec<u16> = s.encode_utf16().collect();
        assert!(units.len() < n, "{name}: {s:?} does not fit char16[{n}]");
        for i in 0..n {
            let u = units.get(i).copied().unwrap_or(0);
            self.data.extend_from_slice(&u.to_le_bytes());
        }
        self.f(name, Val::Str(s.to_string()));
    }
    /// `extension("Sid")`: TOKEN_USER {Sid pointer, Attributes} (8 / 16 bytes), then the SID.
    fn sid(&mut self, name: &str, token_va: u64, sid: &Sid) {
        let tu = if self.x64 { 16 } else { 8 };
        let mut t = vec![0u8; tu];
        let p = if self.x64 { 8 } else { 4 };
        // TOKEN_USER.User.Sid points right after the structure (where the SID follows).
        let sid_va = token_va + tu as u64;
        t[..p].copy_from_slice(&sid_va.to_le_bytes()[..p]);
        // TOKEN_USER.User.Attributes: 0 (SE_GROUP attributes are not used for the user SID).
        self.data.extend_from_slice(&t);
        self.data.push(1);
        self.data.push(sid.subs.len() as u8);
        self.data
            .extend_from_slice(&sid.authority.to_be_bytes()[2..8]);
        for s in &sid.subs {
            self.data.extend_from_slice(&s.to_le_bytes());
        }
        self.f(name, Val::Sid(sid.text()));
    }
    fn ipv4(&mut self, name: &str, a: [u8; 4]) {
        self.data.extend_from_slice(&a);
        self.f(name, Val::Ip(std::net::Ipv4Addr::from(a).to_string()));
    }
    fn ipv6(&mut self, name: &str, a: [u8; 16]) {
        self.data.extend_from_slice(&a);
        self.f(name, Val::Ip(std::net::Ipv6Addr::from(a).to_string()));
    }
    /// `extension("Port")`: network byte order.
    fn port(&mut self, name: &str, p: u16) {
        self.data.extend_from_slice(&p.to_be_bytes());
        self.f(name, Val::U(p.into()));
    }
    fn done(self, header: PayloadHeader, hook: u16, version: u8, class: &str) -> PayloadRec {
        PayloadRec {
            header,
            x64: self.x64,
            hook,
            version,
            tid: 0,
            pid: 0,
            class: class.to_string(),
            data: self.data,
            fields: self.fields,
        }
    }
}

/// A SID: IdentifierAuthority (48 bits) and SubAuthorities.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sid {
    pub authority: u64,
    pub subs: Vec<u32>,
}

impl Sid {
    pub fn text(&self) -> String {
        let mut s = format!("S-1-{}", self.authority);
        for x in &self.subs {
            s += &format!("-{x}");
        }
        s
    }
    /// S-1-5-18 (LocalSystem).
    pub fn local_system() -> Sid {
        Sid {
            authority: 5,
            subs: vec![18],
        }
    }
    /// S-1-5-19 (LocalService).
    pub fn local_service() -> Sid {
        Sid {
            authority: 5,
            subs: vec![19],
        }
    }
    /// A domain user S-1-5-21-a-b-c-rid.
    pub fn user(rid: u32) -> Sid {
        Sid {
            authority: 5,
            subs: vec![21, 3_623_811_015, 3_361_044_348, 30_300_820, rid],
        }
    }
}

/// A uniform index in `0..n`.
fn pick(rng: &mut Rng, n: usize) -> usize {
    rng.range(0, n as u64) as usize
}

/// A fair coin.
fn coin(rng: &mut Rng) -> bool {
    rng.next_u64() & 1 == 1
}

// ------------------------------------------------------------------------------------------
// The world the payloads describe

/// A process of the forged system.
#[derive(Clone, Debug)]
pub struct WorldProcess {
    pub pid: u32,
    pub ppid: u32,
    pub session: u32,
    /// `ImageFileName` (the EPROCESS short name, ANSI).
    pub name: &'static str,
    /// The image's NT path.
    pub path: &'static str,
    pub cmdline: &'static str,
    pub tids: Vec<u32>,
    pub sid: Sid,
}

/// What the payloads refer to: processes and threads (those of [`crate::STANDARD_PROCESSES`]:
/// the process list of dumps with processes), loaded images, files, keys, endpoints.
#[derive(Clone, Debug)]
pub struct World {
    pub x64: bool,
    pub procs: Vec<WorldProcess>,
}

impl World {
    /// The standard processes ([`crate::STANDARD_PROCESSES`]) with their paths, command lines,
    /// sessions and users.
    pub fn standard(x64: bool) -> World {
        let facts: [(u32, u32, &str, &str, Sid); 4] = [
            (0, 0, "", "", Sid::local_system()),
            (
                4,
                0,
                "\\SystemRoot\\System32\\smss.exe",
                "\\SystemRoot\\System32\\smss.exe",
                Sid::local_system(),
            ),
            (
                0x184,
                0,
                "\\Device\\HarddiskVolume3\\Windows\\System32\\svchost.exe",
                "C:\\Windows\\system32\\svchost.exe -k LocalServiceNetworkRestricted -p -s EventLog",
                Sid::local_service(),
            ),
            (
                0x44C,
                1,
                "\\Device\\HarddiskVolume3\\Windows\\explorer.exe",
                "C:\\Windows\\Explorer.EXE",
                Sid::user(1001),
            ),
        ];
        let procs = crate::STANDARD_PROCESSES
            .iter()
            .zip(facts)
            .map(|(&(pid, name, tids), (ppid, session, path, cmd, sid))| {
                let path: &'static str = if name == "System" { "System" } else { path };
                WorldProcess {
                    pid: pid as u32,
                    ppid,
                    session,
                    name,
                    path,
                    cmdline: cmd,
                    tids: tids.iter().map(|&t| t as u32).collect(),
                    sid,
                }
            })
            .collect();
        World { x64, procs }
    }

    fn kernel(&self, rng: &mut Rng) -> u64 {
        if self.x64 {
            0xFFFF_C000_0000_0000
                | (rng.range(0x0800_0000, 0x0FFF_FFFF) << 16)
                | (rng.range(0, 0xFFF8) & !7)
        } else {
            0x8600_0000 + (rng.range(0, 0x0F00_0000) & !7)
        }
    }
    fn user(&self, rng: &mut Rng) -> u64 {
        if self.x64 {
            0x0000_7FF0_0000_0000 + (rng.range(0, 0x0F_FFFF_FFFF) & !0xF)
        } else {
            0x0040_0000 + (rng.range(0, 0x7000_0000) & !0xF)
        }
    }
    fn token_va(&self, rng: &mut Rng) -> u64 {
        if self.x64 {
            0xFFFF_E00F_0000_0000 | (rng.range(0, 0xFFF_FFFF) << 4)
        } else {
            0x9A00_0000 + (rng.range(0, 0x00FF_FFFF) << 4)
        }
    }
    fn proc(&self, rng: &mut Rng) -> &WorldProcess {
        &self.procs[rng.range(1, self.procs.len() as u64) as usize]
    }
    fn thread(&self, rng: &mut Rng) -> (u32, u32) {
        let p = self.proc(rng);
        (p.pid, p.tids[pick(rng, p.tids.len())])
    }
}

/// Modules: (NT path, size, checksum, TimeDateStamp, kernel image).
const IMAGES: &[(&str, u32, u32, u32, bool)] = &[
    (
        "\\SystemRoot\\system32\\ntoskrnl.exe",
        0x0104_6000,
        0x00A5_2C1B,
        0x5F3C_9A21,
        true,
    ),
    (
        "\\SystemRoot\\System32\\drivers\\tcpip.sys",
        0x0030_2000,
        0x0030_7D4A,
        0x1F2E_8B11,
        true,
    ),
    (
        "\\SystemRoot\\System32\\drivers\\Ntfs.sys",
        0x002C_4000,
        0x002D_1102,
        0x6A3F_0C44,
        true,
    ),
    (
        "\\Device\\HarddiskVolume3\\Windows\\System32\\ntdll.dll",
        0x001F_8000,
        0x001F_4C2A,
        0x2B5C_11A9,
        false,
    ),
    (
        "\\Device\\HarddiskVolume3\\Windows\\System32\\kernel32.dll",
        0x000B_E000,
        0x000C_2F55,
        0x9E30_77D2,
        false,
    ),
    (
        "\\Device\\HarddiskVolume3\\Windows\\System32\\KernelBase.dll",
        0x0029_C000,
        0x002A_0B13,
        0x6411_5E07,
        false,
    ),
    (
        "\\Device\\HarddiskVolume3\\Windows\\System32\\combase.dll",
        0x0035_4000,
        0x0035_8F6E,
        0x0C8D_2A40,
        false,
    ),
];

const FILES: &[&str] = &[
    "\\Device\\HarddiskVolume3\\Windows\\System32\\winevt\\Logs\\System.evtx",
    "\\Device\\HarddiskVolume3\\Users\\alice\\Documents\\report-2021.docx",
    "\\Device\\HarddiskVolume3\\Windows\\Prefetch\\EXPLORER.EXE-D5E97654.pf",
    "\\Device\\HarddiskVolume3\\ProgramData\\Microsoft\\Windows Defender\\Scans\\mpcache-1.bin",
    "\\Device\\HarddiskVolume3\\Windows\\System32\\config\\SOFTWARE",
    "\\Device\\HarddiskVolume3\\$Extend\\$UsnJrnl:$J",
];

const KEYS: &[&str] = &[
    "\\REGISTRY\\MACHINE\\SYSTEM\\ControlSet001\\Services\\EventLog\\Parameters",
    "\\REGISTRY\\MACHINE\\SOFTWARE\\Microsoft\\Windows\\CurrentVersion\\Run",
    "\\REGISTRY\\USER\\S-1-5-21-3623811015-3361044348-30300820-1001\\Software\\Microsoft\\Windows\\CurrentVersion\\Explorer\\RecentDocs",
    "\\REGISTRY\\MACHINE\\SYSTEM\\ControlSet001\\Control\\Session Manager\\Memory Management",
    "\\REGISTRY\\MACHINE\\SOFTWARE\\Policies\\Microsoft\\Windows Defender",
];

// ------------------------------------------------------------------------------------------
// The classes

/// Process group (0x03), types 1 Start, 2 End, 3 DCStart, 4 DCEnd, 39 Defunct:
/// `Process_V2_TypeGroup1` (v2), `Process_V3_TypeGroup1` (v3; + DirectoryTableBase),
/// `Process_V4_TypeGroup1` (v4; + Flags, PackageFullName, ApplicationId). [MOF], [LEARN]
/// "Process_V2_TypeGroup1 class" / "Process_TypeGroup1 class", [SID].
pub(crate) fn process(w: &World, rng: &mut Rng, ty: u8, version: u8) -> PayloadRec {
    assert!(matches!(ty, 1 | 2 | 3 | 4 | 39) && (2..=4).contains(&version));
    let p = w.proc(rng).clone();
    let mut o = W::new(w.x64);
    o.ptr("UniqueProcessKey", w.kernel(rng));
    o.u32("ProcessId", p.pid);
    o.u32("ParentId", p.ppid);
    o.u32("SessionId", p.session);
    // Running: STILL_ACTIVE (0x103); ended: 0 or an NTSTATUS (STATUS_CONTROL_C_EXIT).
    let exit = match ty {
        2 | 39 if coin(rng) => 0xC000_013Au32 as i32,
        2 | 39 => 0,
        _ => 0x103,
    };
    o.i32("ExitStatus", exit);
    if version >= 3 {
        // A physical address (page aligned, under 8 GiB).
        o.ptr("DirectoryTableBase", rng.range(0x1000, 0x001F_FFFF) << 12);
    }
    if version >= 4 {
        // PROCESS flags (e.g. 0x2 package, 0x4 protected): keep small.
        o.u32("Flags", rng.range(0, 3) as u32 * 2);
    }
    let tok = w.token_va(rng);
    o.sid("UserSID", tok, &p.sid);
    let image = p.path.rsplit('\\').next().unwrap_or(p.name);
    o.ansi("ImageFileName", image);
    o.wstr("CommandLine", p.cmdline);
    if version >= 4 {
        let (pkg, app) = if p.name == "explorer.exe" && coin(rng) {
            (
                "Microsoft.Windows.ShellExperienceHost_10.0.19041.746_neutral_neutral_cw5n1h2txyewy",
                "App",
            )
        } else {
            ("", "")
        };
        o.wstr("PackageFullName", pkg);
        o.wstr("ApplicationId", app);
    }
    let class = format!("Process_V{version}_TypeGroup1");
    o.done(
        PayloadHeader::System,
        0x0300 | u16::from(ty),
        version,
        &class,
    )
}

/// Thread group (0x05), types 1 Start, 2 End, 3 DCStart, 4 DCEnd: `Thread_V2_TypeGroup1` (v2)
/// and `Thread_V3_TypeGroup1` (v3: Affinity in StartAddr's place, then BasePriority,
/// PagePriority, IoPriority, ThreadFlags). [MOF], [LEARN] "Thread_V2_TypeGroup1 class",
/// "Thread_TypeGroup1 class" (the v3 layout).
pub(crate) fn thread(w: &World, rng: &mut Rng, ty: u8, version: u8) -> PayloadRec {
    assert!((1..=4).contains(&ty) && (2..=3).contains(&version));
    let (pid, tid) = w.thread(rng);
    let mut o = W::new(w.x64);
    o.u32("ProcessId", pid);
    o.u32("TThreadId", tid);
    let stack_base = w.kernel(rng) & !0xFFF;
    o.ptr("StackBase", stack_base);
    o.ptr("StackLimit", stack_base - 0x6000);
    let ustack = w.user(rng) & !0xFFF;
    o.ptr("UserStackBase", ustack);
    o.ptr("UserStackLimit", ustack - 0x3000);
    if version == 2 {
        o.ptr("StartAddr", w.user(rng));
    } else {
        o.ptr("Affinity", if coin(rng) { 0xF } else { 0x3 });
    }
    o.ptr("Win32StartAddr", w.user(rng));
    o.ptr("TebBase", w.user(rng) & !0xFFF);
    o.u32("SubProcessTag", if pid == 0x184 { 0x11 } else { 0 });
    if version == 3 {
        o.u8("BasePriority", [8u8, 9, 13, 15][pick(rng, 4)]);
        o.u8("PagePriority", 5);
        o.u8("IoPriority", 2);
        o.u8("ThreadFlags", 0);
    }
    let class = format!("Thread_V{version}_TypeGroup1");
    o.done(
        PayloadHeader::System,
        0x0500 | u16::from(ty),
        version,
        &class,
    )
}

/// Image group (0x14), types 10 Load, 2 UnLoad, 3 DCStart, 4 DCEnd: `Image_Load` (v3). [MOF]
/// `Image_Load` (SignatureLevel, SignatureType, Reserved0 uint16), [LEARN] "Image_Load class"
/// (field names; it shows the v2 layout).
pub(crate) fn image(w: &World, rng: &mut Rng, ty: u8) -> PayloadRec {
    assert!(matches!(ty, 2 | 3 | 4 | 10));
    let (path, size, sum, stamp, kernel) = IMAGES[pick(rng, IMAGES.len())];
    let mut o = W::new(w.x64);
    let base = if kernel {
        if w.x64 {
            0xFFFF_F800_0000_0000 | (rng.range(0x4000, 0x7FFF) << 20)
        } else {
            0x8000_0000 | (rng.range(0x200, 0x3FF) << 20)
        }
    } else if w.x64 {
        0x0000_7FF8_0000_0000 | (rng.range(0x100, 0xFFF) << 20)
    } else {
        0x7000_0000 | (rng.range(0x10, 0xFF) << 20)
    };
    o.ptr("ImageBase", base);
    o.ptr("ImageSize", u64::from(size));
    let pid = if kernel { 0 } else { w.proc(rng).pid };
    o.u32("ProcessId", pid);
    o.u32("ImageCheckSum", sum);
    o.u32("TimeDateStamp", stamp);
    // SE_SIGNING_LEVEL_WINDOWS (0x0C) / MICROSOFT (0x08); SIGNATURE_TYPE embedded (1) /
    // catalog cached (2).
    o.u8("SignatureLevel", if kernel { 0x0C } else { 0x08 });
    o.u8("SignatureType", 1 + u8::from(coin(rng)));
    o.u16("Reserved0", 0);
    o.ptr(
        "DefaultBase",
        if w.x64 { 0x1_8000_0000 } else { 0x1000_0000 },
    );
    o.u32("Reserved1", 0);
    o.u32("Reserved2", 0);
    o.u32("Reserved3", 0);
    o.u32("Reserved4", 0);
    o.wstr("FileName", path);
    o.done(
        PayloadHeader::System,
        0x1400 | u16::from(ty),
        3,
        "Image_Load",
    )
}

/// DiskIo group (0x01), version 3: `DiskIo_TypeGroup1` (10 Read, 11 Write),
/// `DiskIo_TypeGroup2` (12 ReadInit, 13 WriteInit, 15 FlushInit), `DiskIo_TypeGroup3` (14
/// FlushBuffers). [MOF] DiskIo (EventVersion 3), [LEARN] "DiskIo_TypeGroup1 class".
pub(crate) fn disk_io(w: &World, rng: &mut Rng, ty: u8) -> PayloadRec {
    let mut o = W::new(w.x64);
    let (_, tid) = w.thread(rng);
    let class = match ty {
        10 | 11 => {
            o.u32("DiskNumber", u32::from(coin(rng)));
            // IRP_NOCACHE | IRP_PAGING_IO | IRP_SYNCHRONOUS_PAGING_IO | IRP_READ/WRITE_OPERATION
            o.u32("IrpFlags", if ty == 10 { 0x0006_0043 } else { 0x0006_0A03 });
            o.u32("TransferSize", 0x1000 * rng.range(1, 64) as u32);
            o.u32("Reserved", 0);
            o.u64("ByteOffset", rng.range(0x10_0000, 0x3A_0000_0000) & !0x1FF);
            o.ptr("FileObject", w.kernel(rng));
            o.ptr("Irp", w.kernel(rng));
            o.u64("HighResResponseTime", rng.range(800, 250_000));
            o.u32("IssuingThreadId", tid);
            "DiskIo_TypeGroup1"
        }
        12 | 13 | 15 => {
            o.ptr("Irp", w.kernel(rng));
            o.u32("IssuingThreadId", tid);
            "DiskIo_TypeGroup2"
        }
        14 => {
            o.u32("DiskNumber", 0);
            o.u32("IrpFlags", 0x0006_0000);
            o.u64("HighResResponseTime", rng.range(20_000, 900_000));
            o.ptr("Irp", w.kernel(rng));
            o.u32("IssuingThreadId", tid);
            "DiskIo_TypeGroup3"
        }
        _ => panic!("DiskIo type {ty}"),
    };
    o.done(PayloadHeader::System, 0x0100 | u16::from(ty), 3, class)
}

/// FileIo group (0x04), versions 2 and 3: `FileIo_Name` (0 Name, 32 FileCreate, 35
/// FileDelete, 36 FileRundown), `FileIo_Create` (64), `FileIo_SimpleOp` (65 Cleanup, 66 Close,
/// 73 Flush), `FileIo_ReadWrite` (67 Read, 68 Write), `FileIo_Info` (69 SetInfo, 70 Delete, 71
/// Rename, 74 QueryInfo, 75 FSControl), `FileIo_DirEnum` (72 DirEnum, 77 DirNotify),
/// `FileIo_OpEnd` (76); the version-2 classes `FileIo_V2_*` with `TTID` a pointer right after
/// `IrpPtr` (v3: a uint32 after the pointers). [MOF] FileIo (v3) and FileIo_V2, [LEARN]
/// "FileIo_Name class", "FileIo_Create class" (the v2 layout), "FileIo_ReadWrite class",
/// "FileIo_SimpleOp class", "FileIo_Info class", "FileIo_DirEnum class", "FileIo_OpEnd class".
pub(crate) fn file_io(w: &World, rng: &mut Rng, ty: u8, version: u8) -> PayloadRec {
    assert!(version == 2 || version == 3);
    let mut o = W::new(w.x64);
    let (_, tid) = w.thread(rng);
    let file = FILES[pick(rng, FILES.len())];
    let irp = w.kernel(rng);
    let fo = w.kernel(rng);
    let key = w.kernel(rng);
    let v2 = version == 2;
    // IrpPtr [, TTID (v2, a pointer)]
    let head = |o: &mut W| {
        o.ptr("IrpPtr", irp);
        if v2 {
            o.ptr("TTID", u64::from(tid));
        }
    };
    let ttid3 = |o: &mut W| {
        if !v2 {
            o.u32("TTID", tid);
        }
    };
    let class = match ty {
        0 | 32 | 35 | 36 => {
            o.ptr("FileObject", fo);
            o.wstr("FileName", file);
            "Name"
        }
        64 => {
            head(&mut o);
            o.ptr("FileObject", fo);
            ttid3(&mut o);
            // FILE_OPEN_IF << 24 | FILE_SYNCHRONOUS_IO_NONALERT | FILE_NON_DIRECTORY_FILE
            o.u32("CreateOptions", 0x0300_0060);
            o.u32("FileAttributes", 0x80);
            o.u32("ShareAccess", 3);
            o.wstr("OpenPath", file);
            "Create"
        }
        65 | 66 | 73 => {
            head(&mut o);
            o.ptr("FileObject", fo);
            o.ptr("FileKey", key);
            ttid3(&mut o);
            "SimpleOp"
        }
        67 | 68 => {
            o.u64("Offset", rng.range(0, 0x40_0000) & !0xFFF);
            head(&mut o);
            o.ptr("FileObject", fo);
            o.ptr("FileKey", key);
            ttid3(&mut o);
            o.u32("IoSize", 0x200 * rng.range(1, 128) as u32);
            o.u32("IoFlags", if coin(rng) { 0 } else { 0x0006_0900 });
            "ReadWrite"
        }
        69 | 70 | 71 | 74 | 75 => {
            head(&mut o);
            o.ptr("FileObject", fo);
            o.ptr("FileKey", key);
            o.ptr("ExtraInfo", rng.range(0, 0x200));
            ttid3(&mut o);
            // FileBasicInformation 4, FileDispositionInformation 13, FileRenameInformation 10,
            // FileStandardInformation 5, FSCTL (a control code's function).
            let class_of = match ty {
                69 => 4,
                70 => 13,
                71 => 10,
                74 => 5,
                _ => 0x0009_00A8,
            };
            o.u32("InfoClass", class_of);
            "Info"
        }
        72 | 77 => {
            head(&mut o);
            o.ptr("FileObject", fo);
            o.ptr("FileKey", key);
            ttid3(&mut o);
            o.u32("Length", 0x1000);
            // FileIdBothDirectoryInformation (37).
            o.u32("InfoClass", 37);
            o.u32("FileIndex", 0);
            o.wstr("FileName", "*");
            "DirEnum"
        }
        76 => {
            o.ptr("IrpPtr", irp);
            o.ptr("ExtraInfo", rng.range(0, 0x10000));
            // STATUS_SUCCESS or STATUS_END_OF_FILE / STATUS_OBJECT_NAME_NOT_FOUND.
            o.u32("NtStatus", [0u32, 0xC000_0011, 0xC000_0034][pick(rng, 3)]);
            "OpEnd"
        }
        _ => panic!("FileIo type {ty}"),
    };
    let class = if v2 {
        format!("FileIo_V2_{class}")
    } else {
        format!("FileIo_{class}")
    };
    o.done(
        PayloadHeader::System,
        0x0400 | u16::from(ty),
        version,
        &class,
    )
}

/// An endpoint pair: (remote, local) addresses, ports.
fn endpoints(rng: &mut Rng, v6: bool) -> (Vec<u8>, Vec<u8>, u16, u16) {
    if v6 {
        let remote: [u8; 16] = [
            0x26, 0x20, 0x01, 0xec, 0x0c, 0x11, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x2f,
        ];
        let mut local: [u8; 16] = [
            0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x1c, 0x3d, 0x7a, 0x22, 0, 0, 0, 0,
        ];
        local[15] = rng.range(1, 0xFE) as u8;
        (
            remote.to_vec(),
            local.to_vec(),
            443,
            rng.range(49152, 65535) as u16,
        )
    } else {
        let remote = [[13u8, 107, 4, 50], [52, 114, 128, 9], [192, 168, 1, 1]];
        let r = remote[pick(rng, 3)];
        let port = if r[0] == 192 { 53 } else { 443 };
        (
            r.to_vec(),
            vec![192, 168, 1, 37],
            port,
            rng.range(49152, 65535) as u16,
        )
    }
}

/// TcpIp group (0x06), version 2: `TcpIp_SendIPV4` (10), `TcpIp_TypeGroup1` (11 RecvIPV4, 13
/// DisconnectIPV4, 14 RetransmitIPV4, 16 ReconnectIPV4, 18 TCPCopyIPV4), `TcpIp_TypeGroup2`
/// (12 ConnectIPV4, 15 AcceptIPV4), `TcpIp_Fail` (17), and the IPv6 classes `TcpIp_SendIPV6`
/// (26), `TcpIp_TypeGroup3` (27, 29, 30, 32, 34), `TcpIp_TypeGroup4` (28, 31). UdpIp group
/// (0x08), version 2: `UdpIp_TypeGroup1` (10 SendIPV4, 11 RecvIPV4), `UdpIp_Fail` (17),
/// `UdpIp_TypeGroup2` (26 SendIPV6, 27 RecvIPV6). [MOF], [LEARN] "TcpIp_TypeGroup1 class",
/// "TcpIp_TypeGroup2 class", "TcpIp_SendIPV4 class", "UdpIp_TypeGroup1 class".
pub(crate) fn net(w: &World, rng: &mut Rng, udp: bool, ty: u8) -> PayloadRec {
    let mut o = W::new(w.x64);
    let group: u16 = if udp { 0x0800 } else { 0x0600 };
    let hook = group | u16::from(ty);
    if ty == 17 {
        // IPPROTO_TCP 6 / IPPROTO_UDP 17; a failure code (small enumeration).
        o.u16("Proto", if udp { 17 } else { 6 });
        o.u16("FailureCode", rng.range(1, 6) as u16);
        let class = if udp { "UdpIp_Fail" } else { "TcpIp_Fail" };
        return o.done(PayloadHeader::System, hook, 2, class);
    }
    let v6 = ty >= 26;
    let p = w.proc(rng).pid;
    let (remote, local, dport, sport) = endpoints(rng, v6);
    o.u32("PID", p);
    let send = ty == 10 || ty == 26;
    o.u32(
        "size",
        if send {
            rng.range(40, 1460) as u32
        } else {
            rng.range(40, 65535) as u32
        },
    );
    if v6 {
        o.ipv6("daddr", remote.try_into().unwrap());
        o.ipv6("saddr", local.try_into().unwrap());
    } else {
        o.ipv4("daddr", remote.try_into().unwrap());
        o.ipv4("saddr", local.try_into().unwrap());
    }
    o.port("dport", dport);
    o.port("sport", sport);
    let class = if udp {
        if v6 {
            "UdpIp_TypeGroup2"
        } else {
            "UdpIp_TypeGroup1"
        }
    } else {
        match ty {
            10 | 26 => {
                let start = rng.range(1_000_000, 2_000_000) as u32;
                o.u32("startime", start);
                o.u32("endtime", start + rng.range(1, 5000) as u32);
                if ty == 10 {
                    "TcpIp_SendIPV4"
                } else {
                    "TcpIp_SendIPV6"
                }
            }
            12 | 15 | 28 | 31 => {
                o.u16("mss", if v6 { 1440 } else { 1460 });
                o.u16("sackopt", 1);
                o.u16("tsopt", 0);
                o.u16("wsopt", 1);
                o.u32("rcvwin", 64240);
                o.i16("rcvwinscale", 8);
                o.i16("sndwinscale", 8);
                if v6 {
                    "TcpIp_TypeGroup4"
                } else {
                    "TcpIp_TypeGroup2"
                }
            }
            11 | 13 | 14 | 16 | 18 => "TcpIp_TypeGroup1",
            27 | 29 | 30 | 32 | 34 => "TcpIp_TypeGroup3",
            _ => panic!("TcpIp type {ty}"),
        }
    };
    o.u32("seqnum", rng.next_u64() as u32);
    o.ptr("connid", w.kernel(rng));
    o.done(PayloadHeader::System, hook, 2, class)
}

/// Registry group (0x09), version 2: `Registry_TypeGroup1` (10 Create, 11 Open, 12 Delete,
/// 13 Query, 14 SetValue, 15 DeleteValue, 16 QueryValue, 17 EnumerateKey, 18
/// EnumerateValueKey, 19 QueryMultipleValue, 20 SetInformation, 21 Flush, 22 KCBCreate, 23
/// KCBDelete, 24 KCBRundownBegin, 25 KCBRundownEnd, 26 Virtualize, 27 Close, 28 SetSecurity,
/// 29 QuerySecurity). [MOF] Registry (EventVersion 2), [LEARN] "Registry_TypeGroup1 class".
pub(crate) fn registry(w: &World, rng: &mut Rng, ty: u8) -> PayloadRec {
    assert!((10..=29).contains(&ty));
    let mut o = W::new(w.x64);
    o.i64(
        "InitialTime",
        rng.range(1_000_000_000, 9_000_000_000) as i64,
    );
    // STATUS_SUCCESS, STATUS_OBJECT_NAME_NOT_FOUND, STATUS_BUFFER_OVERFLOW.
    o.u32("Status", [0u32, 0xC000_0034, 0x8000_0005][pick(rng, 3)]);
    o.u32(
        "Index",
        if ty == 17 || ty == 18 {
            rng.range(0, 40) as u32
        } else {
            0
        },
    );
    o.ptr("KeyHandle", w.kernel(rng));
    o.wstr("KeyName", KEYS[pick(rng, KEYS.len())]);
    o.done(
        PayloadHeader::System,
        0x0900 | u16::from(ty),
        2,
        "Registry_TypeGroup1",
    )
}

/// PageFault group (0x02), version 2: `PageFault_TypeGroup1` (10 TransitionFault, 11
/// DemandZeroFault, 12 CopyOnWrite, 13 GuardPageFault, 14 HardPageFault, 15 AccessViolation),
/// `PageFault_HardFault` (32), `PageFault_VirtualAlloc` (98 VirtualAlloc, 99 VirtualFree).
/// [MOF] PageFault_V2, [LEARN] "PageFault_TypeGroup1 class", "PageFault_HardFault class",
/// "PageFault_VirtualAlloc class".
pub(crate) fn page_fault(w: &World, rng: &mut Rng, ty: u8) -> PayloadRec {
    let mut o = W::new(w.x64);
    let class = match ty {
        10..=15 => {
            o.ptr("VirtualAddress", w.user(rng));
            o.ptr("ProgramCounter", w.user(rng));
            "PageFault_TypeGroup1"
        }
        32 => {
            let (_, tid) = w.thread(rng);
            o.u64("InitialTime", rng.range(1_000_000_000, 9_000_000_000));
            o.u64("ReadOffset", rng.range(0, 0x1000_0000) & !0xFFF);
            o.ptr("VirtualAddress", w.user(rng) & !0xFFF);
            o.ptr("FileObject", w.kernel(rng));
            o.u32("TThreadId", tid);
            o.u32("ByteCount", 0x1000 * rng.range(1, 16) as u32);
            "PageFault_HardFault"
        }
        98 | 99 => {
            o.ptr("BaseAddress", w.user(rng) & !0xFFFF);
            o.ptr("RegionSize", 0x1000 * rng.range(1, 0x400));
            o.u32("ProcessId", w.proc(rng).pid);
            // MEM_COMMIT | MEM_RESERVE (alloc), MEM_RELEASE (free).
            o.u32("Flags", if ty == 98 { 0x3000 } else { 0x8000 });
            "PageFault_VirtualAlloc"
        }
        _ => panic!("PageFault type {ty}"),
    };
    o.done(PayloadHeader::System, 0x0200 | u16::from(ty), 2, class)
}

/// PerfInfo group (0x0F), version 2, in PERFINFO headers: `SampledProfile` (46),
/// `SysCallEnter` (51), `SysCallExit` (52), `DPC` (66 ThreadedDPC, 68 DPC, 69 TimerDPC, 70
/// IOTimer), `ISR` (67), `ISR_MSI` (50). [MOF] PerfInfo_V2, [LEARN] "SampledProfile class",
/// "SysCallEnter class", "SysCallExit class", "DPC class", "ISR class", "ISR_MSI class".
pub(crate) fn perf_info(w: &World, rng: &mut Rng, ty: u8) -> PayloadRec {
    let mut o = W::new(w.x64);
    let kfn = |rng: &mut Rng| {
        if w.x64 {
            0xFFFF_F806_1A20_0000 + rng.range(0, 0xA0_0000)
        } else {
            0x82A0_0000 + rng.range(0, 0x60_0000)
        }
    };
    let class = match ty {
        46 => {
            let (_, tid) = w.thread(rng);
            o.ptr("InstructionPointer", kfn(rng));
            o.u32("ThreadId", tid);
            o.u16("Count", 1);
            o.u16("Reserved", 0);
            "SampledProfile"
        }
        51 => {
            o.ptr("SysCallAddress", kfn(rng));
            "SysCallEnter"
        }
        52 => {
            o.u32("SysCallNtStatus", [0u32, 0x103, 0xC000_0022][pick(rng, 3)]);
            "SysCallExit"
        }
        66 | 68 | 69 | 70 => {
            o.u64("InitialTime", rng.range(1_000_000_000, 9_000_000_000));
            o.ptr("Routine", kfn(rng));
            "DPC"
        }
        67 | 50 => {
            o.u64("InitialTime", rng.range(1_000_000_000, 9_000_000_000));
            o.ptr("Routine", kfn(rng));
            o.u8("ReturnValue", 1);
            o.u16("Vector", rng.range(0x50, 0xDF) as u16);
            o.u8("Reserved", 0);
            if ty == 50 {
                o.u32("MessageNumber", rng.range(0, 15) as u32);
                "ISR_MSI"
            } else {
                "ISR"
            }
        }
        _ => panic!("PerfInfo type {ty}"),
    };
    o.done(PayloadHeader::PerfInfo, 0x0F00 | u16::from(ty), 2, class)
}

/// SystemConfig group (0x0B), in SYSTEM headers: version 2 `SystemConfig_V2_CPU` (10),
/// `SystemConfig_V2_PhyDisk` (11), `SystemConfig_V2_LogDisk` (12), `SystemConfig_V2_NIC` (13),
/// `SystemConfig_V2_Services` (15), `SystemConfig_V2_Power` (16), `SystemConfig_V2_PnP` (22),
/// `SystemConfig_V2_DPI` (28); version 3 `SystemConfig_V3_Services` (15, + LoadOrderGroup,
/// SvchostGroup) and `SystemConfig_V3_PnP` (22, + PdoName). [MOF] SystemConfig_V2 / _V3,
/// [LEARN] "SystemConfig_V2_CPU class", "SystemConfig_V2_PhyDisk class", ... .
pub(crate) fn system_config(w: &World, _rng: &mut Rng, ty: u8, version: u8) -> PayloadRec {
    let mut o = W::new(w.x64);
    let class = match (ty, version) {
        (10, 2) => {
            o.u32("MHz", 2904);
            o.u32("NumberOfProcessors", 4);
            o.u32("MemSize", 16_304);
            o.u32("PageSize", 4096);
            o.u32("AllocationGranularity", 65536);
            o.wchars("ComputerName", "DESKTOP-7Q2K9LM", 256);
            o.wchars("DomainName", "WORKGROUP", 134);
            o.ptr("HyperThreadingFlag", 1);
            "SystemConfig_V2_CPU"
        }
        (11, 2) => {
            o.u32("DiskNumber", 0);
            o.u32("BytesPerSector", 512);
            o.u32("SectorsPerTrack", 63);
            o.u32("TracksPerCylinder", 255);
            o.u64("Cylinders", 62_260);
            o.u32("SCSIPort", 0);
            o.u32("SCSIPath", 0);
            o.u32("SCSITarget", 0);
            o.u32("SCSILun", 0);
            o.wchars("Manufacturer", "Samsung SSD 860 EVO 500GB", 256);
            o.u32("PartitionCount", 4);
            o.u8("WriteCacheEnabled", 1);
            o.u8("Pad", 0);
            o.wchars("BootDriveLetter", "C:", 3);
            o.wchars("Spare", "", 2);
            "SystemConfig_V2_PhyDisk"
        }
        (12, 2) => {
            o.u64("StartOffset", 0x0000_0000_3290_0000);
            o.u64("PartitionSize", 0x0000_0073_C6B0_0000);
            o.u32("DiskNumber", 0);
            o.u32("Size", 0x1A8);
            o.u32("DriveType", 3);
            o.wchars("DriveLetterString", "C:", 4);
            o.u32("Pad1", 0);
            o.u32("PartitionNumber", 3);
            o.u32("SectorsPerCluster", 8);
            o.u32("BytesPerSector", 512);
            o.u32("Pad2", 0);
            o.i64("NumberOfFreeClusters", 61_534_207);
            o.i64("TotalNumberOfClusters", 121_498_367);
            o.wchars("FileSystem", "NTFS", 16);
            o.u32("VolumeExt", 0);
            o.u32("Pad3", 0);
            "SystemConfig_V2_LogDisk"
        }
        (13, 2) => {
            o.u64("PhysicalAddr", 0x0000_5E1A_44C2_B0A4);
            o.u32("PhysicalAddrLen", 6);
            o.u32("Ipv4Index", 12);
            o.u32("Ipv6Index", 12);
            o.wstr("NICDescription", "Intel(R) Ethernet Connection (7) I219-V");
            o.wstr("IpAddresses", "192.168.1.37; fe80::1c3d:7a22:0:5");
            o.wstr("DnsServerAddresses", "192.168.1.1");
            "SystemConfig_V2_NIC"
        }
        (15, 2) | (15, 3) => {
            let p = &w.procs[2];
            o.u32("ProcessId", p.pid);
            // SERVICE_RUNNING
            o.u32("ServiceState", 4);
            o.u32("SubProcessTag", 0x11);
            o.wstr("ServiceName", "EventLog");
            o.wstr("DisplayName", "Windows Event Log");
            o.wstr("ProcessName", "svchost.exe");
            if version == 3 {
                o.wstr("LoadOrderGroup", "Event Log");
                o.wstr("SvchostGroup", "LocalServiceNetworkRestricted");
                "SystemConfig_V3_Services"
            } else {
                "SystemConfig_V2_Services"
            }
        }
        (16, 2) => {
            o.u8("S1", 0);
            o.u8("S2", 0);
            o.u8("S3", 1);
            o.u8("S4", 1);
            o.u8("S5", 1);
            o.u8("Pad1", 0);
            o.u8("Pad2", 0);
            o.u8("Pad3", 0);
            "SystemConfig_V2_Power"
        }
        (22, 2) | (22, 3) => {
            let id = "PCI\\VEN_8086&DEV_15BC&SUBSYS_86721043&REV_10\\3&11583659&0&FE";
            let desc = "Intel(R) Ethernet Connection (7) I219-V";
            let friendly = "Ethernet";
            o.u32("IDLength", id.len() as u32);
            o.u32("DescriptionLength", desc.len() as u32);
            o.u32("FriendlyNameLength", friendly.len() as u32);
            o.wstr("DeviceID", id);
            o.wstr("DeviceDescription", desc);
            o.wstr("FriendlyName", friendly);
            if version == 3 {
                o.wstr("PdoName", "\\Device\\NTPNP_PCI0012");
                "SystemConfig_V3_PnP"
            } else {
                "SystemConfig_V2_PnP"
            }
        }
        (28, 2) => {
            o.u32("MachineDPI", 96);
            o.u32("UserDPI", 120);
            "SystemConfig_V2_DPI"
        }
        _ => panic!("SystemConfig type {ty} v{version}"),
    };
    o.done(
        PayloadHeader::System,
        0x0B00 | u16::from(ty),
        version,
        class,
    )
}

/// Every (hook-kind, type, version) the mix draws from: (writer, type, version).
#[derive(Clone, Copy, Debug)]
enum Kind {
    Process,
    Thread,
    Image,
    DiskIo,
    FileIo,
    Tcp,
    Udp,
    Registry,
    PageFault,
    PerfInfo,
    SystemConfig,
}

const MIX: &[(Kind, &[u8], &[u8])] = &[
    (Kind::Process, &[1, 2, 3, 4, 39], &[2, 3, 4]),
    (Kind::Thread, &[1, 2, 3, 4], &[2, 3]),
    (Kind::Image, &[10, 2, 3, 4], &[3]),
    (Kind::DiskIo, &[10, 11, 12, 13, 14, 15], &[3]),
    (
        Kind::FileIo,
        &[
            0, 32, 35, 36, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77,
        ],
        &[2, 3],
    ),
    (
        Kind::Tcp,
        &[
            10, 11, 12, 13, 14, 15, 16, 17, 18, 26, 27, 28, 29, 30, 31, 32, 34,
        ],
        &[2],
    ),
    (Kind::Udp, &[10, 11, 17, 26, 27], &[2]),
    (
        Kind::Registry,
        &[
            10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29,
        ],
        &[2],
    ),
    (Kind::PageFault, &[10, 11, 12, 13, 14, 15, 32, 98, 99], &[2]),
    (Kind::PerfInfo, &[46, 51, 52, 66, 68, 69, 70, 67, 50], &[2]),
    (
        Kind::SystemConfig,
        &[10, 11, 12, 13, 15, 16, 22, 28],
        &[2, 3],
    ),
];

fn write(w: &World, rng: &mut Rng, kind: Kind, ty: u8, version: u8) -> Option<PayloadRec> {
    Some(match kind {
        Kind::Process => process(w, rng, ty, version),
        Kind::Thread => thread(w, rng, ty, version),
        Kind::Image => image(w, rng, ty),
        Kind::DiskIo => disk_io(w, rng, ty),
        Kind::FileIo => file_io(w, rng, ty, version),
        Kind::Tcp => net(w, rng, false, ty),
        Kind::Udp => net(w, rng, true, ty),
        Kind::Registry => registry(w, rng, ty),
        Kind::PageFault => page_fault(w, rng, ty),
        Kind::PerfInfo => perf_info(w, rng, ty),
        Kind::SystemConfig => {
            // Version 3 only for Services and PnP (the MOF's SystemConfig_V3 classes).
            if version == 3 && ty != 15 && ty != 22 {
                return None;
            }
            system_config(w, rng, ty, version)
        }
    })
}

/// Every (class writer, type, version) combination once, in MIX order: the records a buffer
/// plan must hold at least once.
pub(crate) fn every_class(w: &World, rng: &mut Rng) -> Vec<PayloadRec> {
    let mut out = Vec::new();
    for &(kind, types, versions) in MIX {
        for &v in versions {
            for &t in types {
                if let Some(mut r) = write(w, rng, kind, t, v) {
                    set_ids(w, rng, &mut r);
                    out.push(r);
                }
            }
        }
    }
    out
}

/// Every class of the mix once (as [`payload_plan`]'s first buffer starts), for the header
/// kinds and pointers of `x64`, with the SYSTEM headers' ThreadId / ProcessId set.
pub fn every_class_records(x64: bool, seed: u64) -> Vec<PayloadRec> {
    every_class(&World::standard(x64), &mut Rng::new(seed))
}

/// `n` records drawn from the mix (weighted towards the frequent kinds: file, disk, profile).
pub(crate) fn drawn(w: &World, rng: &mut Rng, n: usize) -> Vec<PayloadRec> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let (kind, types, versions) = MIX[pick(rng, MIX.len())];
        let t = types[pick(rng, types.len())];
        let v = versions[pick(rng, versions.len())];
        if let Some(mut r) = write(w, rng, kind, t, v) {
            set_ids(w, rng, &mut r);
            out.push(r);
        }
    }
    out
}

/// The SYSTEM header's ThreadId / ProcessId: a thread of the process the event names when it
/// names one (ProcessId / PID), else a thread of the forged list.
fn set_ids(w: &World, rng: &mut Rng, r: &mut PayloadRec) {
    if r.header == PayloadHeader::PerfInfo {
        return;
    }
    let named = r.fields.iter().find_map(|(k, v)| match (k.as_str(), v) {
        ("ProcessId" | "PID", Val::U(p)) if *p != 0 => Some(*p as u32),
        _ => None,
    });
    let p = match named.and_then(|pid| w.procs.iter().find(|p| p.pid == pid)) {
        Some(p) => p,
        None => w.proc(rng),
    };
    r.pid = p.pid;
    r.tid = p.tids[pick(rng, p.tids.len())];
}

// ------------------------------------------------------------------------------------------
// Buffers and configurations

/// The slot of the session whose buffers get the payloads: the NT Kernel Logger (slot 0 of
/// the standard sessions).
pub const PAYLOAD_SLOT: u32 = 0;

/// The NT Kernel Logger's buffers with realistic payloads (`x64`: the 64-bit header kinds and
/// pointers, else the 32-bit ones): CPU 0's current buffer holds every class of the mix once
/// and more drawn records, CPUs 1-3 their current buffers of drawn records, and a flushed
/// buffer (0xFF filler after the records) on CPU 0's dirty chain. Seeded, reproducible.
pub fn payload_plan(x64: bool, seed: u64) -> Vec<crate::etw::buffers::BufferSpec> {
    use crate::etw::buffers::BufferSpec;
    use crate::etw::wmi_buffer::{RecSpec, STATE_FLUSH, STATE_GENERAL_LOGGING};
    let w = World::standard(x64);
    let mut rng = Rng::new(0x9A71_0AD5 ^ seed ^ u64::from(x64));
    let recs = |v: Vec<PayloadRec>| -> Vec<RecSpec> {
        v.into_iter()
            .map(|r| RecSpec::Payload(Box::new(r)))
            .collect()
    };
    let mut first = every_class(&w, &mut rng);
    first.extend(drawn(&w, &mut rng, 120));
    let mut b0 = BufferSpec::new(STATE_GENERAL_LOGGING, 0, 202, recs(first));
    b0.per_cpu = Some(0);
    b0.fast_ref_tag = 0x3;
    b0.next_buffer = Some(4);
    let mut plan = vec![b0];
    for cpu in 1..4u32 {
        let mut b = BufferSpec::new(
            STATE_GENERAL_LOGGING,
            cpu,
            202 + u64::from(cpu),
            recs(drawn(&w, &mut rng, 150)),
        );
        b.per_cpu = Some(cpu);
        plan.push(b);
    }
    let mut flushed = BufferSpec::new(STATE_FLUSH, 0, 201, recs(drawn(&w, &mut rng, 200)));
    flushed.fill_ff = true;
    plan.push(flushed);
    plan
}

/// Every record with a payload of slot `slot`'s plan in `spec`, with the buffer it is in:
/// (buffer index in the plan, record index in the buffer, record).
pub fn payload_records(spec: &crate::EtwSpec, slot: u32) -> Vec<(usize, usize, &PayloadRec)> {
    let mut out = Vec::new();
    for (bi, b) in spec.buffers.get(&slot).into_iter().flatten().enumerate() {
        for (ri, r) in b.records.iter().enumerate() {
            if let crate::etw::wmi_buffer::RecSpec::Payload(p) = r {
                out.push((bi, ri, &**p));
            }
        }
    }
    out
}

impl crate::EtwSpec {
    /// [`crate::EtwSpec::with_buffers`], then the NT Kernel Logger's buffers replaced by
    /// [`payload_plan`] (records with realistic payloads of every class of this module, in the
    /// header kinds of `x64`).
    pub fn with_payload_buffers(self, build: u32, x64: bool, seed: u64) -> crate::EtwSpec {
        let mut spec = self.with_buffers(build);
        let plan = payload_plan(x64, seed);
        if let Some(crate::SlotSpec::Session(s)) = spec.slots.get_mut(&PAYLOAD_SLOT) {
            s.number_of_buffers = plan.len() as u32;
            assert!(s.number_of_buffers <= s.maximum_buffers);
        }
        spec.buffers.insert(PAYLOAD_SLOT, plan);
        spec
    }
}

/// Flushed buffers of `buffer_size` bytes with realistic payloads (no per-CPU current
/// buffer: for the x86 variation dumps, whose CPU count is drawn): the first buffers hold every
/// class once, the rest drawn records; each buffer filled to about three quarters.
pub fn flushed_payload_plan(
    x64: bool,
    seed: u64,
    buffer_size: u32,
    count: usize,
    cpus: u32,
) -> Vec<crate::etw::buffers::BufferSpec> {
    use crate::etw::buffers::BufferSpec;
    use crate::etw::wmi_buffer::{align8, RecSpec, STATE_FLUSH};
    let w = World::standard(x64);
    let mut rng = Rng::new(0x9A71_0AD6 ^ seed ^ u64::from(x64));
    let mut pending: Vec<PayloadRec> = every_class(&w, &mut rng);
    pending.reverse();
    let room = (buffer_size as usize - 0x48) * 3 / 4;
    (0..count)
        .map(|i| {
            let mut used = 0;
            let mut recs = Vec::new();
            loop {
                let r = pending
                    .pop()
                    .unwrap_or_else(|| drawn(&w, &mut rng, 1).remove(0));
                let n = align8(r.size());
                if used + n > room {
                    pending.push(r);
                    break;
                }
                used += n;
                recs.push(RecSpec::Payload(Box::new(r)));
            }
            let cpu = i as u32 % cpus.max(1);
            let mut b = BufferSpec::new(STATE_FLUSH, cpu, 300 + i as u64, recs);
            b.fill_ff = i % 2 == 0;
            b
        })
        .collect()
}

/// The slots of `spec` whose buffers hold records with payloads.
pub fn payload_slots(spec: &crate::EtwSpec) -> Vec<u32> {
    spec.buffers
        .iter()
        .filter(|(_, plan)| {
            plan.iter().any(|b| {
                b.records
                    .iter()
                    .any(|r| matches!(r, crate::etw::wmi_buffer::RecSpec::Payload(_)))
            })
        })
        .map(|(&s, _)| s)
        .collect()
}

impl crate::Config {
    /// An x86 dump with payload buffers: `x86_fixture` in variation mode (`seed`; the only mode
    /// in which the forge places x86 buffers with data), the first drawn session that records
    /// no context switches given [`flushed_payload_plan`] buffers (32-bit header kinds and
    /// pointers; at least 64 KiB each, as many as the session links).
    pub fn payloads_etw_x86(x86_fixture: &std::path::Path, seed: u64) -> crate::Config {
        let mut c = crate::Config::from_fixture(x86_fixture).with_variation(seed);
        assert!(!c.arch.is_x64(), "payloads_etw_x86: an x86 fixture");
        let cpus = c.cpus;
        let spec = c.etw.as_mut().expect("variation spec");
        let v = spec.variation.as_ref().expect("varied");
        let slot = *spec
            .slots
            .iter()
            .find(|(s, content)| {
                **s < 64
                    && !v.switch_sessions.contains(s)
                    && matches!(content, crate::SlotSpec::Session(_))
            })
            .map(|(s, _)| s)
            .expect("a session without switches");
        // As many buffers as the drawn session links on GlobalList.
        let count = v.sessions[&slot].linked_buffers as usize;
        let Some(crate::SlotSpec::Session(s)) = spec.slots.get_mut(&slot) else {
            unreachable!()
        };
        s.buffer_size = s.buffer_size.max(0x1_0000);
        let plan = flushed_payload_plan(false, seed, s.buffer_size, count, cpus);
        spec.buffers.insert(slot, plan);
        c
    }

    /// A dump whose NT Kernel Logger buffers hold realistic payloads of every class of
    /// [`crate::payloads`] (`forge --payloads`): the x64 fixture in `dir` with the standard
    /// processes (whose PIDs and TIDs the payloads name) and the standard ETW sessions and
    /// buffers, the NT Kernel Logger's replaced by [`payload_plan`].
    pub fn payloads_etw(dir: &std::path::Path, seed: u64) -> crate::Config {
        let c = crate::Config::from_fixture(dir);
        assert!(c.arch.is_x64(), "payloads_etw: x64 (x86: payloads_etw_x86)");
        let spec = crate::EtwSpec::standard(c.build).with_payload_buffers(c.build, true, seed);
        c.with_etw(spec).with_processes()
    }
}

/// The dumps of `forge --payloads`: (stem, config): the x64 19041 fixture with the standard
/// processes ([`crate::Config::payloads_etw`]) and the x86 19569 fixture in variation mode
/// ([`crate::Config::payloads_etw_x86`]).
pub fn payload_set() -> Vec<(&'static str, crate::Config)> {
    let root = crate::default_fixtures_root();
    vec![
        (
            "payloads-x64",
            crate::Config::payloads_etw(&root.join("x64-19041"), 1),
        ),
        (
            "payloads-x86",
            crate::Config::payloads_etw_x86(&root.join("x86-19569"), 3),
        ),
    ]
}
