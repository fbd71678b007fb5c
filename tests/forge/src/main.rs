//! `forge OUTDIR [--with-16g]`: write the standard set of synthetic dumps and manifest.json.
//! `forge --sample PATH`: write the small committed sample (x64 bitmap SDMP, type 5).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use etwdump_forge::{forge, BitmapSig, Config, Expect, Forged, Layout};
use serde_json::{json, Value};

fn hex_addr(v: u64) -> String {
    format!("{v:#x}")
}

fn hex_bytes(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The standard set: (file stem, config).
fn standard_set(with_16g: bool) -> Vec<(&'static str, Config)> {
    let mut v = vec![
        ("x64-full", Config::x64()),
        (
            "x64-bitmap-sdmp",
            Config {
                layout: Layout::Bitmap {
                    sig: BitmapSig::Sdmp,
                    dump_type: 5,
                },
                ..Config::x64()
            },
        ),
        (
            "x64-bitmap-fdmp-type6",
            Config {
                layout: Layout::Bitmap {
                    sig: BitmapSig::Fdmp,
                    dump_type: 6,
                },
                ..Config::x64()
            },
        ),
        (
            "x64-full-pcid",
            Config {
                dtb_low_bits: 0x2,
                ..Config::x64()
            },
        ),
        ("x86pae-full", Config::x86_pae()),
        ("x86-full", Config::x86_nonpae()),
    ];
    if with_16g {
        let big = 16u64 << 30;
        v.push((
            "x64-full-16g",
            Config {
                physical_memory_bytes: big,
                ..Config::x64()
            },
        ));
        v.push((
            "x64-bitmap-16g",
            Config {
                physical_memory_bytes: big,
                layout: Layout::Bitmap {
                    sig: BitmapSig::Sdmp,
                    dump_type: 5,
                },
                ..Config::x64()
            },
        ));
    }
    v
}

fn manifest_entry(file: &str, f: &Forged) -> Value {
    let probes: Vec<Value> = f
        .probes
        .iter()
        .map(|p| {
            let expect = match &p.expect {
                Expect::Bytes(b) => Value::String(hex_bytes(b)),
                Expect::Unreadable {
                    first_unreadable_va,
                } => {
                    // Extra key: the bytes before the first unreadable one.
                    let prefix_len = (first_unreadable_va - p.va) as usize;
                    let prefix = match f.expected_read(p.va, prefix_len) {
                        Expect::Bytes(b) => hex_bytes(&b),
                        Expect::Unreadable { .. } => unreachable!("prefix is readable"),
                    };
                    json!({"unreadable_at": hex_addr(*first_unreadable_va), "prefix": prefix})
                }
            };
            // Extra key: where the forge mapped the first byte (null: no translation).
            let pa = f.physical_address(p.va).map(hex_addr);
            json!({"name": p.name, "va": hex_addr(p.va), "len": p.len, "expect": expect, "pa": pa})
        })
        .collect();
    let modules: Vec<Value> = f
        .modules
        .iter()
        .map(|m| {
            json!({"base_name": m.base_name, "full_name": m.full_name,
                   "base": hex_addr(m.base), "size": hex_addr(m.size as u64)})
        })
        .collect();
    let c = &f.config;
    json!({
        "file": file,
        "arch": c.arch.name(),
        "dump_type": f.dump_type(),
        "layout": if c.layout.is_bitmap() { "bitmap" } else { "full" },
        "dtb": hex_addr(f.dtb),
        "kernel_base": hex_addr(c.kernel_base),
        "kdbg_va": hex_addr(f.kdbg_va),
        "kdbg_decoded": c.kdbg_decoded,
        "kuser_va": hex_addr(f.kuser_va),
        "ps_loaded_module_list": hex_addr(f.ps_loaded_module_list),
        "ps_active_process_head": hex_addr(f.ps_active_process_head),
        "pfn_database": hex_addr(f.pfn_database),
        "nt_build_lab": f.nt_build_lab,
        "build": c.build,
        "cpus": c.cpus,
        "bugcheck_code": hex_addr(c.bugcheck_code as u64),
        "pdb": {"name": c.pdb_name, "key": c.pdb_symbol_key(), "age": c.pdb_age},
        "physical_memory_bytes": c.physical_memory_bytes,
        "runs": f.runs.iter().map(|r| json!([hex_addr(r.0), hex_addr(r.1)])).collect::<Vec<_>>(),
        "stored_pages": f.stored_pages,
        "file_len": f.file_len(),
        "modules": modules,
        "probes": probes,
    })
}

fn write_set(outdir: &Path, with_16g: bool) -> std::io::Result<()> {
    std::fs::create_dir_all(outdir)?;
    let mut entries = Vec::new();
    for (stem, cfg) in standard_set(with_16g) {
        let f = forge(&cfg);
        let file = format!("{stem}.dmp");
        f.write_to(&outdir.join(&file))?;
        eprintln!(
            "wrote {file}: {} bytes, {} stored pages, {} probes",
            f.file_len(),
            f.stored_pages,
            f.probes.len()
        );
        entries.push(manifest_entry(&file, &f));
    }
    let text = serde_json::to_string_pretty(&Value::Array(entries)).expect("json");
    std::fs::write(outdir.join("manifest.json"), text + "\n")?;
    Ok(())
}

fn usage() -> ExitCode {
    eprintln!("usage: forge OUTDIR [--with-16g]\n       forge --sample PATH");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.as_slice() {
        [flag, path] if flag == "--sample" => {
            let f = forge(&Config::sample());
            let path = PathBuf::from(path);
            f.write_to(&path).map(|()| {
                eprintln!(
                    "wrote {}: {} bytes, {} stored pages",
                    path.display(),
                    f.file_len(),
                    f.stored_pages
                )
            })
        }
        [dir] if !dir.starts_with('-') => write_set(Path::new(dir), false),
        [dir, flag] if flag == "--with-16g" => write_set(Path::new(dir), true),
        _ => return usage(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("forge: {e}");
            ExitCode::FAILURE
        }
    }
}
