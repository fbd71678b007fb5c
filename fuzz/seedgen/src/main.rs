//! Writes seed inputs for every fuzz target into OUT/<target>/ (default fuzz/work/seeds).
//! Inputs come from the test forge (dumps, triage dumps, ISF JSON, ETW buffers, pending CCSWAP
//! blocks, ETL files written by `extract`) and from the fixtures (PDBs). Deterministic.

use etwdump::etl::records;
use etwdump::dump::{DumpFile, OpenOptions};
use etwdump::etw::buffers::{find_buffers, read_buffer};
use etwdump::etw::ccswap::find_pending;
use etwdump::etw::loggers::list_sessions;
use etwdump::kernel::context::{KernelContext, SymbolOptions};
use etwdump_forge::{forge, forge_triage, triage_scenarios, BitmapSig, Config, EtwSpec, Layout};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

struct Out(PathBuf);

impl Out {
    fn put(&self, target: &str, name: &str, bytes: &[u8]) {
        let d = self.0.join(target);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(name), bytes).unwrap();
    }
}

fn bitmap(mut c: Config) -> Config {
    c.layout = Layout::Bitmap {
        sig: BitmapSig::Sdmp,
        dump_type: 5,
    };
    c
}

fn main() {
    let out = Out(std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("fuzz/work/seeds")));
    let fx = root().join("tests/fixtures");

    // ---- hiberfil: small hibernation files (the forge's, cut to a few sets per restore set) ----
    hiberfil_seeds(&out, &fx);

    // ---- dump_open: small dumps of every kind (the header plus a few pages) ----
    for (name, c) in [
        ("x64-full", Config::x64()),
        ("x64-bitmap", bitmap(Config::x64())),
        ("x86pae-full", Config::x86_pae()),
        ("x86nonpae-bitmap", bitmap(Config::x86_nonpae())),
    ] {
        let b = forge(&c).to_bytes();
        // Header + bitmap/run list + the first pages: the open succeeds with allow_truncated.
        out.put(
            "dump_open",
            &format!("{name}-head"),
            &b[..b.len().min(0x6000)],
        );
    }
    for (i, spec) in triage_scenarios().iter().enumerate() {
        if i == 0 {
            let t = forge_triage(spec);
            out.put("isf_load", "triage-isf.json", t.isf_json.as_bytes());
        }
        // The 11 scenarios with one or two CPUs: every CPU adds a 0xAF00-byte KPRCB block, so
        // the scenarios' own 4-16 CPUs make 250-820 KB dumps; with one CPU (two where the
        // scenario crashes on a CPU other than 0: it then crashes on CPU 1) they are 113-160 KB
        // with the same blocks, windows, blob and faults (fuzz/README.md, "Speed").
        let mut small = spec.clone();
        small.crash_cpu = small.crash_cpu.min(1);
        small.cpus = small.crash_cpu + 1;
        let t = forge_triage(&small);
        out.put("dump_open", &format!("triage-{i:02}"), &t.bytes);
    }

    // ---- isf_load: hand-written minimal ISF ----
    out.put(
        "isf_load",
        "minimal.json",
        br#"{"metadata":{"format":"6.2.0","windows":{"pdb":{"GUID":"5278AFF86C341677D7D7835C85B7B844","age":1,"database":"ntkrnlmp.pdb","machine_type":34404}}},
"base_types":{"unsigned long":{"kind":"int","size":4,"signed":false,"endian":"little"},"unsigned char":{"kind":"char","size":1,"signed":false,"endian":"little"},"pointer":{"kind":"int","size":8,"signed":false,"endian":"little"},"unsigned long long":{"kind":"int","size":8,"signed":false,"endian":"little"}},
"user_types":{"_LIST_ENTRY":{"kind":"struct","size":16,"fields":{"Flink":{"offset":0,"type":{"kind":"pointer","subtype":{"kind":"struct","name":"_LIST_ENTRY"}}},"Blink":{"offset":8,"type":{"kind":"pointer","subtype":{"kind":"struct","name":"_LIST_ENTRY"}}}}},
"_WMI_BUFFER_HEADER":{"kind":"struct","size":72,"fields":{"BufferSize":{"offset":0,"type":{"kind":"base","name":"unsigned long"}},"SavedOffset":{"offset":4,"type":{"kind":"base","name":"unsigned long"}},"State":{"offset":44,"type":{"kind":"enum","name":"_ETW_BUFFER_STATE"}},"Flags":{"offset":52,"type":{"kind":"bitfield","bit_position":0,"bit_length":3,"type":{"kind":"base","name":"unsigned long"}}},"Pad":{"offset":56,"type":{"kind":"array","count":4,"subtype":{"kind":"base","name":"unsigned char"}}},"GlobalEntry":{"offset":24,"type":{"kind":"union","name":"unnamed_1"}}}},
"unnamed_1":{"kind":"union","size":16,"fields":{"Entry":{"offset":0,"type":{"kind":"struct","name":"_LIST_ENTRY"}}}}},
"enums":{"_ETW_BUFFER_STATE":{"size":4,"base":"long","constants":{"EtwBufferStateFree":0,"EtwBufferStateGeneralLogging":1}},"_KWAIT_REASON":{"size":4,"base":"long","constants":{"Executive":0,"MaximumWaitReason":40}}},
"symbols":{"EtwpHostSiloState":{"address":12947464},"KdDebuggerDataBlock":{"address":12585760,"type":{"kind":"base","name":"pointer"}}}}"#,
    );

    // ---- pdb_load: the tiny PDBs of fuzz/corpus/pdb_load (fuzz/seedgen/tiny_pdb) are the
    // seeds; the 118-197 KB fixture PDBs only with FULL_PDB_SEEDS=1 (gen_seeds.sh) ----

    // ---- ETW data from forge dumps: records, etl_read, ccswap, cswitch, pipeline ----
    let dir = fx.join("x64-19041");
    let mut std_cfg = Config::from_fixture(&dir);
    std_cfg.etw = Some(
        EtwSpec::standard(std_cfg.build)
            .with_buffers(std_cfg.build)
            .with_pending_ccswap(),
    );
    let opts = SymbolOptions {
        pdb: Some(dir.join("ntkrnlmp.pdb")),
        ..SymbolOptions::default()
    };
    let mut nbuf = 0;
    let mut n0524 = 0;
    let mut n0525 = 0;
    for (tag, c) in [
        ("std", bitmap(std_cfg)),
        ("var", bitmap(Config::from_fixture(&dir).with_variation(7))),
    ] {
        let f = forge(&c);
        let d = DumpFile::from_bytes(f.to_bytes(), OpenOptions::default()).unwrap();
        let ctx = KernelContext::open(&d, &opts).unwrap();
        let list = list_sessions(&ctx);
        let array = list.array.clone().unwrap();
        for s in &list.sessions {
            for b in find_buffers(&ctx, &array, s).buffers {
                let Ok(buf) = read_buffer(&ctx, &b) else {
                    continue;
                };
                let valid = b.header.valid_bytes().unwrap_or(0) as usize;
                let valid = valid.min(buf.len());
                let cut = &buf[..valid.min(0x2000)];
                if nbuf < 6 {
                    let mut seed = Vec::new();
                    seed.extend_from_slice(&(cut.len() as u16).to_le_bytes());
                    seed.extend_from_slice(&0x48u16.to_le_bytes());
                    seed.push(0);
                    seed.extend_from_slice(cut);
                    out.put("records", &format!("{tag}-buf{nbuf}"), &seed);
                    // One ETL buffer: BufferSize = SavedOffset = the cut length.
                    let mut etl = cut.to_vec();
                    let n = (etl.len() as u32).to_le_bytes();
                    etl[0..4].copy_from_slice(&n);
                    etl[4..8].copy_from_slice(&n);
                    out.put("etl_read", &format!("{tag}-buf{nbuf}.etl"), &etl);
                    nbuf += 1;
                }
                for r in records::records(&buf, valid) {
                    let (Some(h), Some(p)) = (r.hook, r.perfinfo_payload(&buf)) else {
                        continue;
                    };
                    if h == 0x0524 && n0524 < 6 {
                        let mut seed = vec![r.version];
                        seed.extend_from_slice(p);
                        out.put("cswitch", &format!("{tag}-v{}-{n0524}", r.version), &seed);
                        n0524 += 1;
                    }
                    if h == 0x0525 && n0525 < 6 {
                        let mut seed = vec![0u8, 40];
                        seed.extend_from_slice(p);
                        out.put("ccswap", &format!("{tag}-batch{n0525}"), &seed);
                        n0525 += 1;
                    }
                }
            }
        }
        for (i, p) in find_pending(&ctx).blocks.iter().enumerate().take(4) {
            if let Ok(block) = ctx.space.read_vec(p.block, 0x400) {
                let mut seed = vec![0u8, 40];
                seed.extend_from_slice(&block);
                out.put("ccswap", &format!("{tag}-pending{i}"), &seed);
            }
        }
    }
    // pipeline: the two base dumps unchanged, every stage, unfiltered and limited to CPU 0 /
    // the first session (input: first byte = base | stage << 1, filter byte, ops).
    for first in 0u8..8 {
        for (filter, tag) in [(0xFFu8, "all"), (0, "one")] {
            out.put(
                "pipeline",
                &format!("base{}-stage{}-{tag}", first & 1, first >> 1),
                &[first, filter],
            );
        }
    }
    // base 0, cswitch: a u64 write at region 0 offset 0x10, a pointer from region 1 to
    // region 2
    out.put(
        "pipeline",
        "ops",
        &[
            0, 0xFF, 3, 0, 0, 0x10, 0, 0xFF, 0xFF, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 2, 0, 0x48,
            0,
        ],
    );

    // ---- translate: a valid chain per architecture ----
    // arch | dtb_sel | dtb_low u16 | nruns | (base u16, count u8)* | 4 × va u64 | patches
    // One run of 8 pages at PFN 0; DTB = page 0; tables: page 0 → 1 → 2 → 3 → data page 4.
    let va64: u64 = 0xFFFF_F800_0020_3000;
    let idx = |s: u32| ((va64 >> s) & 0x1FF) as u16;
    let mut t = vec![0u8, 0, 0, 0, 0];
    t.extend_from_slice(&0u16.to_le_bytes());
    t.push(7); // count 8
    for v in [va64, va64 + 0x1000, 0xFFFF_F800_0040_0000, 0] {
        t.extend_from_slice(&v.to_le_bytes());
    }
    for (page, e, target, flags) in [
        (0u8, idx(39), 1u8, 0x63u16),
        (1, idx(30), 2, 0x63),
        (2, idx(21), 3, 0x63),
        (3, idx(12), 4, 0x163),
        (3, idx(12) + 1, 5, 0x863),  // transition-looking with present
        (2, idx(21) + 1, 0, 0x20E3), // 2 MiB large page
    ] {
        t.push(page);
        t.extend_from_slice(&e.to_le_bytes());
        t.push(0); // op: pointer to stored page
        t.push(target);
        t.extend_from_slice(&flags.to_le_bytes());
    }
    out.put("translate", "x64-chain", &t);
    // PAE: PDPT (4 entries) in page 0, PD page 1, PT page 2, data page 3.
    let va32: u64 = 0x8040_3000;
    let mut t = vec![1u8, 0, 0, 0, 0];
    t.extend_from_slice(&0u16.to_le_bytes());
    t.push(7);
    for v in [va32, va32 + 0x1000, 0xFFFF_FFFF_8040_3000, 0] {
        t.extend_from_slice(&v.to_le_bytes());
    }
    for (page, e, target, flags) in [
        (0u8, ((va32 >> 30) & 3) as u16, 1u8, 0x01u16),
        (1, ((va32 >> 21) & 0x1FF) as u16, 2, 0x63),
        (2, ((va32 >> 12) & 0x1FF) as u16, 3, 0x63),
        (1, ((va32 >> 21) & 0x1FF) as u16 + 1, 0, 0x20E3),
    ] {
        t.push(page);
        t.extend_from_slice(&e.to_le_bytes());
        t.push(0);
        t.push(target);
        t.extend_from_slice(&flags.to_le_bytes());
    }
    out.put("translate", "pae-chain", &t);
    // non-PAE: PD page 0, PT page 1, data page 2, a 4 MiB page.
    let mut t = vec![2u8, 0, 0, 0, 0];
    t.extend_from_slice(&0u16.to_le_bytes());
    t.push(7);
    for v in [va32, va32 + 0x1000, 0xC040_0000, 0] {
        t.extend_from_slice(&v.to_le_bytes());
    }
    for (page, e, target, flags) in [
        (0u8, ((va32 >> 22) & 0x3FF) as u16, 1u8, 0x63u16),
        (1, ((va32 >> 12) & 0x3FF) as u16, 2, 0x63),
        (0, ((0xC040_0000u64 >> 22) & 0x3FF) as u16, 0, 0xE3),
    ] {
        t.push(page);
        t.extend_from_slice(&e.to_le_bytes());
        t.push(0);
        t.push(target);
        t.extend_from_slice(&flags.to_le_bytes());
    }
    out.put("translate", "nonpae-chain", &t);
    eprintln!("seeds written to {}", out.0.display());
}

/// Hibernation files of the forge's 19041 machine in several versions and codecs, cut to the
/// header page and the first 4 compression sets of each restore set (the header's page counts
/// and restore pages rewritten to match): 10-40 KB each, every part of the format present.
fn hiberfil_seeds(out: &Out, fx: &Path) {
    use etwdump_forge::{
        HiberCodec, HiberSignature, HiberSpec, HiberVariant, HiberVersion, RestoreSet,
    };
    let f = forge(&Config::from_fixture(&fx.join("x64-19041")).with_variation(3));
    let tmp = std::env::temp_dir().join(format!("etwdump-seedgen-hiber-{}", std::process::id()));
    for (i, (version, codec, signature)) in [
        (HiberVersion::Win10_1809, HiberCodec::Huffman, HiberSignature::Hibr),
        (HiberVersion::Win10_1809, HiberCodec::Lz77, HiberSignature::Wake),
        (HiberVersion::Win8, HiberCodec::Lz77, HiberSignature::Hibr),
        (HiberVersion::Win11_26100, HiberCodec::Huffman, HiberSignature::Hibr),
        (HiberVersion::Win10_1607, HiberCodec::Huffman, HiberSignature::Wiped),
    ]
    .into_iter()
    .enumerate()
    {
        let spec = HiberSpec {
            signature,
            variant: HiberVariant::FastStartup,
            ..HiberSpec::new(version, codec, 40 + i as u64)
        };
        let truth = f.write_hiberfil(&tmp, &spec).unwrap();
        let file = std::fs::read(&tmp).unwrap();
        let l = version.layout();
        let mut b = file[..4096].to_vec();
        let mut pages = [0u64; 2];
        for (k, which) in [RestoreSet::Boot, RestoreSet::Kernel].into_iter().enumerate() {
            b.resize(b.len().div_ceil(4096) * 4096, 0);
            let page = (b.len() / 4096) as u64;
            let at = if k == 0 { l.first_boot_restore_page } else { l.first_kernel_restore_page };
            if signature != HiberSignature::Wiped {
                b[at..at + 8].copy_from_slice(&page.to_le_bytes());
            }
            for set in truth.sets.iter().filter(|s| s.restore_set == which).take(4) {
                let end = set.data_offset() + u64::from(set.compressed_size);
                b.extend_from_slice(&file[set.offset as usize..end as usize]);
                pages[k] += u64::from(set.pages);
            }
        }
        if signature != HiberSignature::Wiped {
            b[0x58..0x60].copy_from_slice(&pages[0].to_le_bytes());
            b[l.kernel_pages_processed..l.kernel_pages_processed + 8]
                .copy_from_slice(&pages[1].to_le_bytes());
        }
        out.put(
            "hiberfil",
            &format!("{}-{}-{}", version.name(), codec.name(), signature.name()),
            &b,
        );
    }
    let _ = std::fs::remove_file(&tmp);
}
