//! A process's user-mode modules and their exports, read through the process's own address
//! space (`KPROCESS.DirectoryTableBase`): `EPROCESS.Peb` → `PEB.Ldr` →
//! `PEB_LDR_DATA.InLoadOrderModuleList` → `LDR_DATA_TABLE_ENTRY`s → a module's export table.
//!
//! Where the offsets come from: `EPROCESS.Peb` from the symbols. `_PEB` and `_PEB_LDR_DATA`
//! are in no layout the project has (the layout corpus keeps kernel types); the offsets used,
//! `PEB.Ldr` (+0x18 x64, +0x0C x86) and `PEB_LDR_DATA.InLoadOrderModuleList` (+0x10 x64,
//! +0x0C x86), are those every Windows version since NT 4 / XP x64 has, and the user-mode
//! `LDR_DATA_TABLE_ENTRY` starts like the kernel's `KLDR_DATA_TABLE_ENTRY`
//! ([`super::modules`]: DllBase +0x30, SizeOfImage +0x40, BaseDllName +0x58 on x64). Being
//! inferred, they are validated before anything is reported: the list must be a LIST_ENTRY
//! ring back to its head, and a module is used only when its DllBase holds an `MZ`/`PE`
//! header whose SizeOfImage is the entry's.

use super::context::KernelContext;
use super::modules::{self, LoadedModule};
use crate::addr::VirtAddr;
use crate::bytes::LeBytes;
use crate::dump::Arch;
use crate::mem::AddressSpace;

/// Most names of an export table looked at (ntdll exports about 2,500).
pub(crate) const MAX_EXPORT_NAMES: u32 = 1 << 16;
/// Longest export name compared.
const MAX_NAME: usize = 128;

/// `PEB.Ldr` and `PEB_LDR_DATA.InLoadOrderModuleList` (see the module's documentation).
fn peb_offsets(arch: Arch) -> (u64, u64) {
    match arch {
        Arch::X86 { .. } => (0x0C, 0x0C),
        Arch::X64 => (0x18, 0x10),
        Arch::Arm64 => (0x18, 0x10), // ARM64 takes the x64 offsets today
    }
}

/// The user-mode side of a process: its address space, PEB and loaded modules.
pub(crate) struct UserProcess<'d> {
    pub space: AddressSpace<'d>,
    pub modules: Vec<LoadedModule>,
}

/// Why a process's user-mode side cannot be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum UserError {
    /// EPROCESS.Peb is NULL: a process without user mode (System, Registry, minimal
    /// processes) — nothing is missing.
    NoPeb,
    /// Something that should be there could not be read or is not what it should be.
    Unreadable(String),
}

impl std::fmt::Display for UserError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UserError::NoPeb => write!(f, "no PEB (EPROCESS.Peb is NULL)"),
            UserError::Unreadable(s) => f.write_str(s),
        }
    }
}

impl From<String> for UserError {
    fn from(s: String) -> Self {
        UserError::Unreadable(s)
    }
}

/// The user-mode side of the process at `eprocess`, or why it cannot be read.
pub fn open<'d>(ctx: &KernelContext<'d>, eprocess: VirtAddr) -> Result<UserProcess<'d>, UserError> {
    let ep = ctx
        .symbols
        .layout("_EPROCESS")
        .ok_or_else(|| UserError::Unreadable("no _EPROCESS layout".into()))?;
    let peb = crate::kernel::view::View::new(&ctx.space, ep, eprocess)
        .ptr("Peb")
        .map_err(|e| e.to_string())?;
    if peb.is_null() {
        return Err(UserError::NoPeb);
    }
    let dtb = super::processes::directory_table_base(ctx, eprocess)?;
    let space = ctx.space.with_root(dtb);
    if !space.is_user(peb) {
        return Err(format!("EPROCESS.Peb {peb} is not a user-mode address").into());
    }
    let (ldr_off, list_off) = peb_offsets(space.arch());
    let ldr = space
        .read_ptr(peb.offset(ldr_off))
        .map_err(|e| format!("PEB.Ldr at {}: {e}", peb.offset(ldr_off)))?;
    if !space.is_user(ldr) {
        return Err(format!("PEB.Ldr {ldr} is not a user-mode address").into());
    }
    let head = ldr.offset(list_off);
    let list = modules::walk(&space, head)
        .map_err(|e| format!("PEB_LDR_DATA.InLoadOrderModuleList at {head}: {e}"))?;
    Ok(UserProcess {
        space,
        modules: list.modules,
    })
}

impl UserProcess<'_> {
    /// The module whose base name is `name` (ASCII case-insensitive) and whose DllBase holds a
    /// PE header of the entry's SizeOfImage.
    pub fn module(&self, name: &str) -> Result<&LoadedModule, String> {
        let m = self
            .modules
            .iter()
            .find(|m| {
                m.base_name
                    .as_ref()
                    .is_some_and(|n| n.raw().eq_ignore_ascii_case(name))
            })
            .ok_or_else(|| format!("{name} is not on the loader's module list"))?;
        let size = image_size(&self.space, m.base)?;
        if size != m.size {
            return Err(format!(
                "{name} at {}: the PE header's SizeOfImage {size:#x} is not the loader entry's {:#x}",
                m.base, m.size
            ));
        }
        Ok(m)
    }
}

/// The PE header page of the image at `base`: (e_lfanew, the page).
fn header(space: &AddressSpace<'_>, base: VirtAddr) -> Result<(usize, Vec<u8>), String> {
    let mut page = vec![0u8; 0x1000];
    space
        .read(base, &mut page)
        .map_err(|e| format!("PE header at {base}: {e}"))?;
    if page.get(..2) != Some(b"MZ".as_slice()) {
        return Err(format!("no MZ header at {base}"));
    }
    let lfanew = page.u32_at(0x3C).unwrap_or(0) as usize;
    if lfanew > 0x1000 - 0x108 || page.get(lfanew..lfanew + 4) != Some(b"PE\0\0".as_slice()) {
        return Err(format!("no PE signature at {base}+{lfanew:#x}"));
    }
    Ok((lfanew, page))
}

/// OptionalHeader.SizeOfImage of the image at `base`.
pub fn image_size(space: &AddressSpace<'_>, base: VirtAddr) -> Result<u32, String> {
    let (lf, page) = header(space, base)?;
    page.u32_at(lf + 24 + 56)
        .ok_or_else(|| "short PE header".into())
}

/// The physical pages that decide what [`exports`] returns for the image at `base` in
/// `space`: its header page's and its export directory's. Two processes whose image maps both
/// to the same frames (an image section's shared pages) have the same exports, so a caller can
/// resolve them once.
pub(crate) fn export_pages(space: &AddressSpace<'_>, base: VirtAddr) -> Option<(u64, u64)> {
    let (lf, page) = header(space, base).ok()?;
    let dd = match page.u16_at(lf + 24)? {
        0x20B => lf + 24 + 112,
        0x10B => lf + 24 + 96,
        _ => return None,
    };
    let dir = page.u32_at(dd)?;
    let hp = space.translate(base).ok()?.pa.get();
    let dp = space.translate(base.offset(dir.into())).ok()?.pa.get();
    Some((hp & !0xFFF, dp & !0xFFF))
}

/// The addresses of the named exports of the image at `base` (`None`: not exported, or
/// forwarded elsewhere). Every count and RVA is bounded by the image's SizeOfImage.
pub fn exports(
    space: &AddressSpace<'_>,
    base: VirtAddr,
    wanted: &[&str],
) -> Result<Vec<Option<VirtAddr>>, String> {
    let (lf, page) = header(space, base)?;
    let opt = lf + 24;
    let magic = page.u16_at(opt).unwrap_or(0);
    let size_of_image = page.u32_at(opt + 56).unwrap_or(0);
    // DataDirectory[0] (export): PE32+ at +112, PE32 at +96.
    let dd = match magic {
        0x20B => opt + 112,
        0x10B => opt + 96,
        m => return Err(format!("OptionalHeader.Magic {m:#x} at {base}")),
    };
    let (dir_rva, dir_size) = (
        page.u32_at(dd).unwrap_or(0),
        page.u32_at(dd + 4).unwrap_or(0),
    );
    let in_image = |rva: u32, len: u32| rva.checked_add(len).is_some_and(|e| e <= size_of_image);
    if dir_rva == 0 || !in_image(dir_rva, 40) {
        return Err(format!("no export directory in the image at {base}"));
    }
    let mut dir = [0u8; 40];
    space
        .read(base.offset(dir_rva.into()), &mut dir)
        .map_err(|e| format!("export directory at {}: {e}", base.offset(dir_rva.into())))?;
    let n_funcs = dir.u32_at(20).unwrap_or(0);
    let n_names = dir.u32_at(24).unwrap_or(0).min(MAX_EXPORT_NAMES);
    let (funcs, names, ords) = (
        dir.u32_at(28).unwrap_or(0),
        dir.u32_at(32).unwrap_or(0),
        dir.u32_at(36).unwrap_or(0),
    );
    if !in_image(names, n_names.saturating_mul(4)) || !in_image(ords, n_names.saturating_mul(2)) {
        return Err(format!(
            "export name tables of the image at {base} run past its SizeOfImage"
        ));
    }
    let mut name_rvas = vec![0u8; n_names as usize * 4];
    let mut ordinals = vec![0u8; n_names as usize * 2];
    space
        .read(base.offset(names.into()), &mut name_rvas)
        .map_err(|e| format!("AddressOfNames at {}: {e}", base.offset(names.into())))?;
    space
        .read(base.offset(ords.into()), &mut ordinals)
        .map_err(|e| format!("AddressOfNameOrdinals at {}: {e}", base.offset(ords.into())))?;
    let mut out = vec![None; wanted.len()];
    let mut left = wanted.len();
    for i in 0..n_names as usize {
        if left == 0 {
            break;
        }
        let rva = name_rvas.u32_at(i * 4).unwrap_or(0);
        if !in_image(rva, 1) {
            continue;
        }
        let mut nb = [0u8; MAX_NAME];
        let n = space.read_prefix(base.offset(rva.into()), &mut nb);
        let name = &nb[..nb[..n].iter().position(|&c| c == 0).unwrap_or(n)];
        let Some(k) = wanted.iter().position(|w| w.as_bytes() == name) else {
            continue;
        };
        if out[k].is_some() {
            continue;
        }
        let ord = u32::from(ordinals.u16_at(i * 2).unwrap_or(u16::MAX));
        if ord >= n_funcs || !in_image(funcs, (ord + 1).saturating_mul(4)) {
            continue;
        }
        let mut f = [0u8; 4];
        if space
            .read(base.offset(u64::from(funcs + ord * 4)), &mut f)
            .is_err()
        {
            continue;
        }
        let frva = u32::from_le_bytes(f);
        // A forwarder's RVA points into the export directory (a "dll.name" string).
        let forwarded = frva >= dir_rva && frva < dir_rva.saturating_add(dir_size);
        if frva != 0 && in_image(frva, 1) && !forwarded {
            out[k] = Some(base.offset(frva.into()));
            left -= 1;
        }
    }
    Ok(out)
}
