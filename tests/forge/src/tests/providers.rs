//! Providers, GetCpuClock and tampering, read back from the FILE BYTES with the tests' own page
//! walker (`Walk`) at the offsets of the fixture's types.h and the RVAs of its symbols.json:
//! the GUID table and every list on it (Flink / Blink both ways, unused heads empty), every
//! `_ETW_GUID_ENTRY` (GUID, RefCount, RegListHead, EnableInfo, the aggregate, SiloState, pool
//! tag), every `_ETW_REG_ENTRY` (back links, EnableMask against the enabled slots, Process /
//! Callback / CallbackContext, Dbg flags), every `Etw*RegHandle` global -> registration ->
//! GUID entry; and every tampered variant against its clean twin.

use std::collections::{BTreeMap, BTreeSet};

use super::{fixture_dir, fixture_dirs, hexv, symbols_json, Walk};
use crate::kernel::types_h::TypesH;
use crate::util::{get_u32, get_u64, guid_from_str};
use crate::{
    forge, providers_config, CheckId, Config, EtwSpec, ExpectedProvider, ExpectedSlot, Forged,
    TableShape, TamperKind, TamperSpec,
};

const GE: &str = "_ETW_GUID_ENTRY";
const RE: &str = "_ETW_REG_ENTRY";
const TEI: &str = "_TRACE_ENABLE_INFO";
const CTX: &str = "_WMI_LOGGER_CONTEXT";

/// The dump read back: the walker, the fixture's layouts and symbols.
struct Mem<'a> {
    w: Walk<'a>,
    t: TypesH,
    x64: bool,
    ptr: u64,
    /// symbols.json `symbols` (undecorated name -> RVA) and the image base.
    rvas: BTreeMap<String, u64>,
    base: u64,
    /// .text (rva, virtual size).
    text: (u64, u64),
}

impl<'a> Mem<'a> {
    fn new(f: &Forged, file: &'a [u8]) -> Mem<'a> {
        let fx = f.config.fixture.as_ref().expect("fixture");
        let j = symbols_json(&fx.dir);
        let rvas = j["symbols"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), hexv(v)))
            .collect();
        let text = j["sections"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == ".text")
            .map(|s| (hexv(&s["rva"]), hexv(&s["virtual_size"])))
            .unwrap();
        let x64 = f.config.arch.is_x64();
        Mem {
            w: Walk::new(file),
            t: TypesH::load(&fx.dir).unwrap(),
            x64,
            ptr: if x64 { 8 } else { 4 },
            rvas,
            base: f.config.kernel_base,
            text,
        }
    }

    fn sym(&self, name: &str) -> Option<u64> {
        self.rvas.get(name).map(|r| self.base + r)
    }

    fn ptr(&self, va: u64) -> u64 {
        let b = self.w.read(va, self.ptr as usize).unwrap();
        if self.x64 {
            get_u64(&b, 0)
        } else {
            u64::from(get_u32(&b, 0))
        }
    }

    fn bytes(&self, va: u64, n: usize) -> Vec<u8> {
        self.w
            .read(va, n)
            .unwrap_or_else(|e| panic!("{va:#x}: unreadable at {e:#x}"))
    }

    fn off(&self, agg: &str, field: &str) -> u64 {
        self.t
            .offset_of(agg, field)
            .unwrap_or_else(|| panic!("{agg}.{field}"))
    }

    /// The scalar `field` of the `agg` at `va`, by its declared size.
    fn field(&self, va: u64, agg: &str, field: &str) -> u64 {
        let n = self.t.field_size(agg, field).unwrap() as usize;
        let b = self.bytes(va + self.off(agg, field), n);
        let mut v = [0u8; 8];
        v[..n].copy_from_slice(&b);
        u64::from_le_bytes(v)
    }

    /// (Flink, Blink) of the LIST_ENTRY at `va`.
    fn links(&self, va: u64) -> (u64, u64) {
        (self.ptr(va), self.ptr(va + self.ptr))
    }

    /// The entries of the list at `head` (Flink order), checking Blink both ways.
    fn walk_list(&self, head: u64) -> Vec<u64> {
        let (first, last) = self.links(head);
        let mut out = Vec::new();
        let (mut prev, mut cur) = (head, first);
        while cur != head {
            assert!(out.len() < 4096, "list at {head:#x} does not return");
            assert_eq!(self.links(cur).1, prev, "Blink of {cur:#x}");
            out.push(cur);
            prev = cur;
            cur = self.links(cur).0;
        }
        assert_eq!(last, prev, "head {head:#x} Blink");
        out
    }

    /// The pool tag of the small allocation at `va`.
    fn tag(&self, va: u64) -> [u8; 4] {
        let hdr = if self.x64 { 16 } else { 8 };
        self.bytes(va - hdr + 4, 4).try_into().unwrap()
    }

    fn in_text(&self, va: u64) -> bool {
        (self.base + self.text.0..self.base + self.text.0 + self.text.1).contains(&va)
    }
}

/// The bucket of a GUID, computed here (XOR of the four little-endian DWORDs, low 6 bits).
fn xor_bucket(g: &[u8; 16]) -> u32 {
    (0..4).fold(0, |a, i| a ^ get_u32(g, 4 * i)) & 63
}

/// The `_TRACE_ENABLE_INFO` at `va`: (IsEnabled, Level, LoggerId, Any, All, EnableProperty).
fn tei(m: &Mem, va: u64) -> (u32, u8, u16, u64, u64, u32) {
    (
        m.field(va, TEI, "IsEnabled") as u32,
        m.field(va, TEI, "Level") as u8,
        m.field(va, TEI, "LoggerId") as u16,
        m.field(va, TEI, "MatchAnyKeyword"),
        m.field(va, TEI, "MatchAllKeyword"),
        m.field(va, TEI, "EnableProperty") as u32,
    )
}

/// The GUID table's location found independently: the global (7601 / 9600) or the host silo
/// state's `EtwpGuidHashTable`.
fn table_va(m: &Mem) -> (u64, bool) {
    match m.sym("EtwpGuidHashTable") {
        Some(va) => (va, true),
        None => {
            let silo = m.ptr(m.sym("EtwpHostSiloState").unwrap());
            (
                silo + m.off("_ETW_SILODRIVERSTATE", "EtwpGuidHashTable"),
                false,
            )
        }
    }
}

/// Everything of the providers: table, lists, entries, registrations, handles. `clean`: also
/// the invariants a clean kernel keeps (aggregate = f(slots), slots by live sessions, every
/// handle names a kernel registration of its provider).
fn check_providers(f: &Forged, file: &[u8], clean: bool) {
    let e = f.etw.as_ref().unwrap();
    let m = Mem::new(f, file);
    let name = &f.config.fixture.as_ref().unwrap().name;
    let tb = e.guid_table.as_ref().expect("guid table");
    let (va, global) = table_va(&m);
    assert_eq!((tb.va, tb.global), (va, global), "{name}: table");
    let (stride, lists) = if global {
        match tb.shape {
            TableShape::ListHeads => (2 * m.ptr, 1),
            TableShape::Buckets => (7 * m.ptr, 3),
        }
    } else {
        assert_eq!(tb.shape, TableShape::Buckets);
        let l =
            m.t.member("_ETW_HASH_BUCKET", "ListHead")
                .unwrap()
                .count
                .unwrap();
        (m.t.size_of("_ETW_HASH_BUCKET").unwrap(), l as u32)
    };
    assert_eq!(
        (tb.stride, tb.lists, tb.buckets),
        (stride, lists, 64),
        "{name}"
    );
    // Every head: an empty list or a ring of GUID entries.
    let link = m.off(GE, "GuidList");
    let mut on_table: BTreeMap<u64, (u32, u32, u64)> = BTreeMap::new();
    for bucket in 0..64u32 {
        if tb.shape == TableShape::Buckets {
            assert_eq!(
                m.ptr(va + u64::from(bucket) * stride + 6 * m.ptr),
                0,
                "lock"
            );
        }
        for list in 0..lists {
            let head = va + u64::from(bucket) * stride + u64::from(list) * 2 * m.ptr;
            for ent in m.walk_list(head) {
                on_table.insert(ent - link, (bucket, list, head));
            }
        }
    }
    let expected: BTreeSet<u64> = e.providers.iter().map(|p| p.guid_entry_va).collect();
    assert_eq!(
        on_table.keys().copied().collect::<BTreeSet<_>>(),
        expected,
        "{name}: the entries on the table are the providers placed"
    );
    let silo = (!global).then(|| m.ptr(m.sym("EtwpHostSiloState").unwrap()));
    for p in &e.providers {
        let (bucket, list, head) = on_table[&p.guid_entry_va];
        assert_eq!(
            (p.bucket, p.list_head_va),
            (bucket, head),
            "{name} {}",
            p.name
        );
        let want_list = if tb.shape == TableShape::ListHeads {
            0
        } else {
            p.guid_type
        };
        assert_eq!(list, want_list, "{name} {}: list of its type", p.name);
        if tb.rule == crate::BucketRule::XorHash {
            assert_eq!(
                bucket,
                xor_bucket(&guid_from_str(&p.guid)),
                "{name} {}",
                p.name
            );
        }
        check_entry(&m, p, silo, name, clean);
        let live = |id: u16| matches!(e.slots.get(usize::from(id)), Some(ExpectedSlot::Session(_)));
        if clean {
            for s in &p.enable_slots {
                assert!(
                    live(s.logger_id),
                    "{name} {}: LoggerId {}",
                    p.name,
                    s.logger_id
                );
            }
        }
    }
    check_handles(f, &m, clean);
}

/// One GUID entry and its registrations.
fn check_entry(m: &Mem, p: &ExpectedProvider, silo: Option<u64>, name: &str, clean: bool) {
    let ge = p.guid_entry_va;
    let what = format!("{name} {} ({})", p.name, p.guid);
    assert_eq!(&m.tag(ge), b"EtwG", "{what}");
    let guid = guid_from_str(&p.guid);
    assert_eq!(m.bytes(ge + m.off(GE, "Guid"), 16), guid, "{what}");
    let refs = m.field(ge, GE, "RefCount");
    assert!(
        refs >= p.registrations.len() as u64 && refs == p.ref_count,
        "{what}"
    );
    if m.t.has_field(GE, "SiloState") {
        assert_eq!(Some(m.field(ge, GE, "SiloState")), silo, "{what}");
    }
    for l in m.t.members_of_type(GE, "struct _LIST_ENTRY") {
        if l != "GuidList" && l != "RegListHead" {
            let at = ge + m.off(GE, &l);
            assert_eq!(m.links(at), (at, at), "{what}: {l} empty");
        }
    }
    // EnableInfo[0..8]: the enabled slots, zero elsewhere.
    let size = m.t.size_of(TEI).unwrap();
    let mut enabled = 0u8;
    let mut on = Vec::new();
    for i in 0..8u64 {
        let at = ge + m.off(GE, "EnableInfo") + i * size;
        let v = tei(m, at);
        match p.enable_slots.iter().find(|s| s.index == Some(i as u8)) {
            Some(s) => {
                let want = (
                    s.is_enabled,
                    s.level,
                    s.logger_id,
                    s.match_any,
                    s.match_all,
                    s.enable_property,
                );
                assert_eq!(v, want, "{what}: EnableInfo[{i}]");
                if v.0 != 0 {
                    enabled |= 1 << i;
                    on.push(v);
                }
            }
            None => assert_eq!(
                m.bytes(at, size as usize),
                vec![0; size as usize],
                "{what}: [{i}]"
            ),
        }
    }
    let agg = tei(m, ge + m.off(GE, "ProviderEnableInfo"));
    let a = &p.aggregate;
    assert_eq!(
        agg,
        (
            a.is_enabled,
            a.level,
            a.logger_id,
            a.match_any,
            a.match_all,
            a.enable_property
        ),
        "{what}: ProviderEnableInfo"
    );
    if clean {
        // The aggregate of the forge's reading: any enabled, max level, OR of Any, AND of All.
        assert_eq!(agg.0, u32::from(!on.is_empty()), "{what}");
        assert_eq!(agg.1, on.iter().map(|v| v.1).max().unwrap_or(0), "{what}");
        assert_eq!(agg.3, on.iter().fold(0, |x, v| x | v.3), "{what}");
    }
    // RegListHead -> the registrations, in order.
    let rl = m.off(RE, "RegList");
    let regs: Vec<u64> = m
        .walk_list(ge + m.off(GE, "RegListHead"))
        .into_iter()
        .map(|v| v - rl)
        .collect();
    let want: Vec<u64> = p.registrations.iter().map(|r| r.va).collect();
    assert_eq!(regs, want, "{what}: RegListHead");
    for r in &p.registrations {
        let at = r.va;
        assert_eq!(&m.tag(at), b"EtwR", "{what}");
        assert_eq!(m.field(at, RE, "GuidEntry"), ge, "{what}");
        assert_eq!(m.field(at, RE, "Index"), u64::from(r.index), "{what}");
        let mask = m.field(at, RE, "EnableMask") as u8;
        assert_eq!(mask, r.enable_mask, "{what}: EnableMask");
        assert_eq!(
            mask & !enabled,
            0,
            "{what}: EnableMask {mask:#x} names a disabled slot"
        );
        for l in m.t.members_of_type(RE, "struct _LIST_ENTRY") {
            if l != "RegList" {
                let v = at + m.off(RE, &l);
                assert_eq!(m.links(v), (v, v), "{what}: {l}");
            }
        }
        if let Some(bf) = m.t.bitfield(RE, "DbgKernelRegistration") {
            let flags = m.field(at, RE, "Flags");
            assert_eq!(Some(flags as u16), r.flags, "{what}");
            assert_eq!(
                (flags >> bf.position) & 1 == 1,
                r.kernel,
                "{what}: DbgKernelRegistration"
            );
            let user = m.t.bitfield(RE, "DbgUserRegistration").unwrap();
            assert_eq!((flags >> user.position) & 1 == 1, !r.kernel, "{what}");
        }
        if r.kernel {
            let cb = m.field(at, RE, "Callback");
            assert!(m.in_text(cb), "{what}: Callback {cb:#x} outside .text");
            let ctx = m.field(at, RE, "CallbackContext");
            assert_eq!(Some(cb), r.callback);
            assert_eq!(Some(ctx), r.callback_context);
            assert_eq!(m.bytes(ctx, 16), guid, "{what}: the context block");
        } else {
            // Process shares its offset with CallbackContext (9600+) or Callback (7601).
            let ep = m.field(at, RE, "Process");
            assert_eq!(Some(ep), r.eprocess, "{what}: Process");
        }
    }
}

/// Every `Etw*RegHandle` public of symbols.json: the global's value, and (clean) the chain
/// handle -> kernel registration -> GUID entry with the handle's GUID.
fn check_handles(f: &Forged, m: &Mem, clean: bool) {
    let e = f.etw.as_ref().unwrap();
    let names: Vec<&String> = m
        .rvas
        .keys()
        .filter(|n| n.starts_with("Etw") && n.ends_with("RegHandle"))
        .collect();
    assert_eq!(
        names.len(),
        e.reg_handles.len(),
        "every handle public is listed"
    );
    let fx = f.config.fixture.as_ref().unwrap();
    let extra = &symbols_json(&fx.dir)["extra_globals"]["reg_handles"];
    assert_eq!(
        extra.as_array().unwrap().len(),
        names.len(),
        "symbols.json extra_globals"
    );
    for h in &e.reg_handles {
        let va = m.sym(&h.name).unwrap();
        assert_eq!(va, h.va);
        let v = m.ptr(va);
        assert_eq!(v, h.value, "{}", h.name);
        if !clean {
            continue;
        }
        assert!(
            h.guid.is_some(),
            "{}: every current handle has a public GUID",
            h.name
        );
        if v == 0 {
            // Its provider was not placed (varied sets): no registration names it.
            assert_eq!(h.reg_entry, None);
            let named = e.providers.iter().flat_map(|p| &p.registrations);
            assert!(named
                .clone()
                .all(|r| r.handle.as_deref() != Some(h.name.as_str())));
            continue;
        }
        assert_eq!(
            h.reg_entry,
            Some(v),
            "{}: a clean handle names its registration",
            h.name
        );
        let ge = m.field(v, RE, "GuidEntry");
        let p = e.providers.iter().find(|p| p.guid_entry_va == ge).unwrap();
        let reg = p.registrations.iter().find(|r| r.va == v).unwrap();
        assert!(reg.kernel && reg.handle.as_deref() == Some(h.name.as_str()));
        assert_eq!(
            m.bytes(ge + m.off(GE, "Guid"), 16),
            guid_from_str(h.guid.as_deref().unwrap()),
            "{}",
            h.name
        );
    }
}

/// Every fixture with the standard providers (processes and consumers on x64): the whole
/// structure reads back, clean, with no findings.
#[test]
fn standard_providers_read_back_on_every_fixture() {
    for d in fixture_dirs() {
        let cfg = providers_config(&d);
        let f = forge(&cfg);
        let e = f.etw.as_ref().unwrap();
        let name = &cfg.fixture.as_ref().unwrap().name;
        assert!(e.findings.is_empty(), "{name}: a clean dump");
        check_providers(&f, &f.to_bytes(), true);
        // What the standard set holds per era.
        let kernel = e
            .providers
            .iter()
            .filter(|p| p.registrations.iter().all(|r| r.kernel));
        assert_eq!(
            kernel.count(),
            e.reg_handles.len(),
            "{name}: a provider per handle"
        );
        assert!(
            e.reg_handles.iter().all(|h| h.value != 0),
            "{name}: every handle set"
        );
        let ti = e
            .providers
            .iter()
            .any(|p| p.name == "Microsoft-Windows-Threat-Intelligence");
        assert_eq!(
            ti,
            f.symbols.contains_key("EtwThreatIntProvRegHandle"),
            "{name}"
        );
        if cfg.processes {
            let rpc = e
                .providers
                .iter()
                .find(|p| p.name == "Microsoft-Windows-RPC")
                .unwrap();
            let pids: Vec<Option<u64>> = rpc.registrations.iter().map(|r| r.pid).collect();
            assert_eq!(pids, [Some(0x44C), Some(0x12E4)], "{name}: two processes");
            assert_eq!(rpc.enable_slots.len(), 2);
            assert_eq!(
                rpc.registrations[1].enable_mask, 1,
                "explorer: LwtNetLog only"
            );
            assert!(
                e.providers.iter().any(|p| p.guid_type == 1),
                "{name}: notification"
            );
            let unenabled = e
                .providers
                .iter()
                .filter(|p| p.enable_slots.is_empty())
                .count();
            // Without kernel handles (x64-26100) only the user-mode providers are there.
            let want = if e.reg_handles.is_empty() { 1 } else { 3 };
            assert!(unenabled >= want, "{name}: providers no session enables");
        }
        // 7601 / 9600: the global table, buckets by default; 1607+: the silo state's.
        let tb = e.guid_table.as_ref().unwrap();
        assert_eq!(
            tb.global,
            f.symbols.contains_key("EtwpGuidHashTable"),
            "{name}"
        );
        assert_eq!(tb.shape, TableShape::Buckets, "{name}");
    }
}

/// The list-head shape of the 7601 / 9600 table, chosen in the spec.
#[test]
fn list_head_table_shape_on_7601_and_9600() {
    for n in ["x64-7601", "x64-9600"] {
        let mut cfg = providers_config(&fixture_dir(n));
        let etw = cfg.etw.take().unwrap();
        cfg.etw = Some(etw.with_provider_spec(crate::ProvidersSpec {
            set: crate::ProviderSet::Standard,
            table_shape: Some(TableShape::ListHeads),
        }));
        let f = forge(&cfg);
        let e = f.etw.as_ref().unwrap();
        assert_eq!(e.guid_table.as_ref().unwrap().shape, TableShape::ListHeads);
        assert!(
            e.providers.iter().all(|p| p.guid_type == 0),
            "one list: no notification entry"
        );
        check_providers(&f, &f.to_bytes(), true);
    }
}

/// Variation mode with providers: seeds 0..8 on every fixture; on 7601 / 9600 both table shapes
/// and both bucket rules occur.
#[test]
fn varied_providers_read_back() {
    let mut seen: BTreeMap<String, BTreeSet<(TableShape, crate::BucketRule)>> = BTreeMap::new();
    for d in fixture_dirs() {
        for seed in 0..8u64 {
            let cfg = Config::from_fixture(&d)
                .with_variation(seed)
                .with_providers();
            let f = forge(&cfg);
            let e = f.etw.as_ref().unwrap();
            assert!(e.findings.is_empty());
            check_providers(&f, &f.to_bytes(), true);
            let tb = e.guid_table.as_ref().unwrap();
            seen.entry(cfg.fixture.as_ref().unwrap().name.clone())
                .or_default()
                .insert((tb.shape, tb.rule));
            for p in &e.providers {
                assert!(p.enable_slots.len() <= 8);
            }
        }
    }
    for n in ["x64-7601", "x64-9600"] {
        let shapes: BTreeSet<TableShape> = seen[n].iter().map(|s| s.0).collect();
        let rules: BTreeSet<crate::BucketRule> = seen[n].iter().map(|s| s.1).collect();
        assert_eq!(shapes.len(), 2, "{n}: {:?}", seen[n]);
        assert_eq!(rules.len(), 2, "{n}: {:?}", seen[n]);
    }
}

/// Without providers nothing of them is written: the table stays zero, every handle NULL, no
/// findings (every existing spec, the sample).
#[test]
fn no_providers_leaves_the_table_and_handles_zero() {
    for d in fixture_dirs() {
        let f = forge(&Config::from_fixture(&d).with_standard_etw());
        let e = f.etw.as_ref().unwrap();
        assert!(e.providers.is_empty() && e.guid_table.is_none() && e.reg_handles.is_empty());
        assert!(e.findings.is_empty());
        let file = f.to_bytes();
        let m = Mem::new(&f, &file);
        let (va, global) = table_va(&m);
        let size = if global {
            64 * 7 * m.ptr
        } else {
            64 * m.t.size_of("_ETW_HASH_BUCKET").unwrap()
        };
        assert!(m.bytes(va, size as usize).iter().all(|&b| b == 0));
        for (n, _) in m.rvas.iter().filter(|(n, _)| n.ends_with("RegHandle")) {
            assert_eq!(m.ptr(m.sym(n).unwrap()), 0, "{n}");
        }
    }
    let s = forge(&Config::sample_etw());
    assert!(s.etw.as_ref().unwrap().findings.is_empty());
}

/// The VAs (page granular, below 4 MiB ranges) both twins map, compared through the files: every
/// differing byte lies in the finding's `changed` ranges, every range has one; pages only the
/// tampered twin maps hold nothing outside them.
fn diff_twins(clean: &Forged, cf: &[u8], bad: &Forged, bf: &[u8], changed: &[(u64, usize)]) {
    let (wc, wb) = (Walk::new(cf), Walk::new(bf));
    let inside = |va: u64| changed.iter().any(|&(s, n)| va >= s && va < s + n as u64);
    let mut hit = vec![false; changed.len()];
    let mut mark = |va: u64| {
        for (i, &(s, n)) in changed.iter().enumerate() {
            if va >= s && va < s + n as u64 {
                hit[i] = true;
            }
        }
    };
    let pages = |f: &Forged| -> BTreeSet<u64> {
        f.vmap
            .ranges()
            .filter(|&(_, size)| size <= 4 << 20)
            .flat_map(|(va, size)| (va..va + size).step_by(0x1000))
            .collect()
    };
    let (pc, pb) = (pages(clean), pages(bad));
    for &pg in &pc {
        let (a, b) = (wc.read(pg, 0x1000), wb.read(pg, 0x1000));
        match (a, b) {
            (Ok(a), Ok(b)) => {
                for i in 0..0x1000usize {
                    if a[i] != b[i] {
                        let va = pg + i as u64;
                        assert!(inside(va), "byte {va:#x} differs outside the finding");
                        mark(va);
                    }
                }
            }
            (a, b) => assert_eq!(a.is_ok(), b.is_ok(), "page {pg:#x} readability"),
        }
    }
    for &pg in pb.difference(&pc) {
        let b = wb.read(pg, 0x1000).unwrap();
        for (i, &x) in b.iter().enumerate() {
            let va = pg + i as u64;
            if x != 0 {
                assert!(inside(va), "late byte {va:#x} outside the finding");
                mark(va);
            }
        }
    }
    assert!(
        hit.iter().all(|&h| h),
        "every changed range differs: {changed:x?} {hit:?}"
    );
}

/// Every tampered variant of every fixture: exactly its finding, differing from its clean twin
/// exactly where the finding says, and the finding's facts read back.
#[test]
fn tampered_variants_differ_from_their_clean_twins_where_the_findings_say() {
    let mut kinds_seen = BTreeSet::new();
    for d in fixture_dirs() {
        let clean_cfg = providers_config(&d);
        let clean = forge(&clean_cfg);
        let cf = clean.to_bytes();
        for k in TamperKind::ALL {
            if !k.applies_to(&clean_cfg) {
                continue;
            }
            let mut cfg = clean_cfg.clone();
            cfg.etw = cfg.etw.map(|e| e.with_tampering(TamperSpec::one(k)));
            let bad = forge(&cfg);
            let bf = bad.to_bytes();
            let e = bad.etw.as_ref().unwrap();
            assert_eq!(e.findings.len(), 1);
            let fd = &e.findings[0];
            assert_eq!(fd.check, k.check());
            diff_twins(&clean, &cf, &bad, &bf, &fd.changed);
            check_providers(&bad, &bf, false);
            check_finding(&bad, &bf, k, fd.address);
            kinds_seen.insert(k);
        }
    }
    assert_eq!(kinds_seen.len(), TamperKind::ALL.len());
}

/// Clock indexes 4..=0xFF on every integer-era fixture (19041+): the dump differs from its
/// clean twin in GetCpuClock only, which holds the index; refused on pointer-era fixtures.
#[test]
fn clock_index_variants_change_get_cpu_clock_only() {
    let mut applied = 0;
    for d in fixture_dirs() {
        let clean_cfg = providers_config(&d);
        if !TamperKind::ClockIndex(4).applies_to(&clean_cfg) {
            assert!(clean_cfg.build < 19041);
            continue;
        }
        let clean = forge(&clean_cfg);
        let cf = clean.to_bytes();
        for v in [4u8, 0x2A, 0xFF] {
            let k = TamperKind::ClockIndex(v);
            let mut cfg = clean_cfg.clone();
            cfg.etw = cfg.etw.map(|e| e.with_tampering(TamperSpec::one(k)));
            let bad = forge(&cfg);
            let bf = bad.to_bytes();
            let e = bad.etw.as_ref().unwrap();
            assert_eq!(e.findings.len(), 1);
            let fd = &e.findings[0];
            assert_eq!(fd.check, CheckId::ClockHook);
            diff_twins(&clean, &cf, &bad, &bf, &fd.changed);
            check_finding(&bad, &bf, k, fd.address);
            applied += 1;
        }
    }
    assert_eq!(applied, 15, "19041, 20348, 22000, 26100 and x86-19569");
}

/// The facts of one finding, read from the tampered dump.
fn check_finding(f: &Forged, file: &[u8], k: TamperKind, address: u64) {
    let e = f.etw.as_ref().unwrap();
    let m = Mem::new(f, file);
    let ctx_of = |va: u64| {
        e.sessions()
            .find(|s| s.context_va == va)
            .unwrap_or_else(|| panic!("{va:#x} is a session"))
    };
    match k {
        TamperKind::RegHandleNull => {
            assert_eq!(m.ptr(address), 0);
            let h = e.reg_handles.iter().find(|h| h.va == address).unwrap();
            // The provider's kernel registration is still on its GUID entry.
            let p = e
                .providers
                .iter()
                .find(|p| Some(&p.guid) == h.guid.as_ref())
                .unwrap();
            assert!(p.registrations.iter().any(|r| r.kernel));
        }
        TamperKind::RegHandleInvalid => {
            let v = m.ptr(address);
            assert!(
                v != 0
                    && e.providers
                        .iter()
                        .all(|p| p.registrations.iter().all(|r| r.va != v))
            );
            let ge = m.field(v, RE, "GuidEntry");
            assert!(
                e.providers.iter().all(|p| p.guid_entry_va != ge),
                "random GuidEntry"
            );
        }
        TamperKind::ProviderEnableState => {
            let pei = address + m.off(GE, "ProviderEnableInfo");
            assert_eq!(m.field(pei, TEI, "IsEnabled"), 0);
            let p = e
                .providers
                .iter()
                .find(|p| p.guid_entry_va == address)
                .unwrap();
            let s = &p.enable_slots[0];
            assert!(matches!(
                e.slots[usize::from(s.logger_id)],
                ExpectedSlot::Session(_)
            ));
        }
        TamperKind::EnableUnknownLogger => {
            let p = e
                .providers
                .iter()
                .find(|p| p.guid_entry_va == address)
                .unwrap();
            let s = p.enable_slots.last().unwrap();
            assert!(matches!(
                e.slots[usize::from(s.logger_id)],
                ExpectedSlot::Free { .. }
            ));
            let at = address
                + m.off(GE, "EnableInfo")
                + m.t.size_of(TEI).unwrap() * u64::from(s.index.unwrap());
            assert_eq!(m.field(at, TEI, "LoggerId"), u64::from(s.logger_id));
        }
        TamperKind::ClockHook => {
            let s = ctx_of(address);
            let v = m.field(address, CTX, "GetCpuClock");
            assert_eq!(Some(v), s.get_cpu_clock);
            let image = f.config.kernel_base..f.config.kernel_base + 0x10_0000;
            assert!(!image.contains(&v), "outside the kernel image");
            assert!(v > 3, "not an index");
            assert_eq!(m.bytes(v, 1)[0], 0x0F, "rdtsc");
        }
        TamperKind::ClockIndex(x) => {
            let s = ctx_of(address);
            let v = m.field(address, CTX, "GetCpuClock");
            assert_eq!(v, u64::from(x));
            assert_eq!(Some(v), s.get_cpu_clock);
            assert!(v > 3, "an index the kernel never stores");
        }
        TamperKind::ConsumerMode => {
            let s = ctx_of(address);
            let mode = m.field(address, CTX, "LoggerMode") as u32;
            assert_eq!(mode & crate::EVENT_TRACE_REAL_TIME_MODE, 0);
            assert!(!m.walk_list(address + m.off(CTX, "Consumers")).is_empty());
            assert_eq!(mode, s.logger_mode);
        }
        // Checked against their clean twins through each process's PML4 in user_images.rs.
        TamperKind::WritePatch(_) => unreachable!("not in TamperKind::ALL"),
    }
}

/// A spec the forge refuses: a user-mode registration without processes, an EnableInfo for a
/// LoggerId no live session has.
#[test]
#[should_panic(expected = "needs that process")]
fn user_registration_needs_the_process() {
    let d = fixture_dir("x64-19041");
    let spec = EtwSpec::standard(19041).with_provider_spec(crate::ProvidersSpec {
        set: crate::ProviderSet::List(vec![crate::ProviderSpec {
            name: "x".into(),
            guid: [1; 16],
            guid_type: 0,
            registrations: vec![crate::RegistrationSpec {
                registrant: crate::Registrant::User { pid: 0x44C },
                enable_mask: None,
            }],
            enables: Vec::new(),
            bucket: None,
        }]),
        table_shape: None,
    });
    forge(&Config::from_fixture(&d).with_etw(spec));
}

#[test]
#[should_panic(expected = "which is no live session")]
fn enable_info_needs_a_live_session() {
    let d = fixture_dir("x64-14393");
    let spec = EtwSpec::standard(14393).with_provider_spec(crate::ProvidersSpec {
        set: crate::ProviderSet::List(vec![crate::ProviderSpec {
            name: "x".into(),
            guid: [2; 16],
            guid_type: 0,
            registrations: Vec::new(),
            enables: vec![crate::EnableSpec {
                logger_id: 1,
                level: 4,
                match_any: 0,
                match_all: 0,
                enable_property: 0,
            }],
            bucket: None,
        }]),
        table_shape: None,
    });
    forge(&Config::from_fixture(&d).with_etw(spec));
}

/// Prints what the standard providers and the tampered variants hold per fixture
/// (`cargo test -p etwdump-forge providers_summary -- --ignored --nocapture`).
#[test]
#[ignore]
fn providers_summary() {
    for (name, cfg) in crate::tamper_scenarios(&crate::default_fixtures_root()) {
        let f = forge(&cfg);
        let e = f.etw.as_ref().unwrap();
        let tb = e.guid_table.as_ref().unwrap();
        let regs: usize = e.providers.iter().map(|p| p.registrations.len()).sum();
        let enabled = e
            .providers
            .iter()
            .filter(|p| !p.enable_slots.is_empty())
            .count();
        println!(
            "{name}: table {:#x} {} {} x {} lists, {} providers ({} enabled), {} registrations, {} handles",
            tb.va,
            if tb.global { "global" } else { "silo" },
            tb.shape.name(),
            tb.lists,
            e.providers.len(),
            enabled,
            regs,
            e.reg_handles.len()
        );
        for fd in &e.findings {
            println!(
                "    {} @ {:#x}: {} changed {:x?}",
                fd.check, fd.address, fd.detail, fd.changed
            );
        }
    }
}
