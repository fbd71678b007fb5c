//! The module graph (issue 12): each top-level module of the library may use only modules of
//! its own or a lower layer. The layers, lowest first, are those of README "Architecture".
//! `cargo test --test architecture -- --nocapture` prints who uses whom.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Layers, lowest first; modules in one layer do not use each other.
const LAYERS: &[&[&str]] = &[
    &["addr", "bytes", "time"],
    &["text"],
    &["warning"],
    &["dump"],
    &["mem"],
    &["symbols"],
    &["kernel"],
    &["etl"],
    &["decode"],
    &["etw"],
    &["report"],
    &["render"],
];

fn layer_of(m: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&m))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The top-level modules each module's source names (`crate::x`, and `super::x` in a
/// top-level module's own file, where `super` is the crate root).
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(&src).unwrap();
        let parts: Vec<&str> = rel.iter().map(|c| c.to_str().unwrap()).collect();
        let (module, top_file) = match parts.as_slice() {
            [file] => (file.trim_end_matches(".rs").to_string(), true),
            [dir, "mod.rs"] => (dir.to_string(), true),
            [dir, ..] => (dir.to_string(), false),
            [] => continue,
        };
        if module == "lib" || module == "main" || module == "cli" {
            continue; // the crate root and the binary (main.rs, cli/) may use everything
        }
        let text = std::fs::read_to_string(&f).unwrap();
        let uses = g.entry(module.clone()).or_default();
        for line in text.lines() {
            let code = line.split("//").next().unwrap_or("");
            for (prefix, ok) in [("crate::", true), ("super::", top_file)] {
                if !ok {
                    continue;
                }
                for (i, _) in code.match_indices(prefix) {
                    // `super::super::` and the like are inside the module.
                    let rest = &code[i + prefix.len()..];
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    if !name.is_empty() && name != module && layer_of(&name).is_some() {
                        uses.insert(name);
                    }
                }
            }
        }
    }
    g
}

#[test]
fn no_module_uses_a_module_of_a_higher_layer() {
    let g = graph();
    let mut bad = Vec::new();
    for (m, uses) in &g {
        let lm = layer_of(m).unwrap_or_else(|| panic!("module {m} is in no layer: add it"));
        println!(
            "{m} (layer {lm}) uses: {}",
            uses.iter().cloned().collect::<Vec<_>>().join(", ")
        );
        for u in uses {
            let lu = layer_of(u).unwrap();
            if lu >= lm {
                bad.push(format!("{m} (layer {lm}) uses {u} (layer {lu})"));
            }
        }
    }
    assert!(bad.is_empty(), "layering violations:\n{}", bad.join("\n"));
    // Every layer is present (the table names real modules).
    for l in LAYERS {
        for m in *l {
            assert!(g.contains_key(*m), "no module {m}");
        }
    }
}

/// One home per fact: the WMI_BUFFER_HEADER offsets for raw bytes, the route tables and the
/// list walker each exist in one file.
#[test]
fn each_fact_has_one_home() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let defining = |needle: &str| -> Vec<String> {
        files
            .iter()
            .filter(|f| std::fs::read_to_string(f).unwrap().contains(needle))
            .map(|f| f.strip_prefix(&src).unwrap().display().to_string())
            .collect()
    };
    assert_eq!(defining("pub const BUFFER_HEADER_SIZE"), ["etl/header.rs"]);
    assert_eq!(defining("pub const SAVED_OFFSET"), ["etl/header.rs"]);
    assert_eq!(defining("pub struct BufferHeader"), ["etl/header.rs"]);
    assert_eq!(defining("pub const ETW_SUPPORT_ROUTES"), ["etw/routes.rs"]);
    assert_eq!(defining("pub fn resolve_logger_array"), ["etw/routes.rs"]);
    assert_eq!(defining("pub struct ListWalk"), ["mem/list.rs"]);
    // Address newtypes keep their number private: VirtAddr::new / get and the helpers
    // (offset, containing, fast_ref_object, is_kernel, ...), no arithmetic on `.0` elsewhere.
    let addr = std::fs::read_to_string(src.join("addr.rs")).unwrap();
    for t in ["VirtAddr", "PhysAddr", "Pfn"] {
        assert!(addr.contains(&format!("pub struct {t}(u64);")), "{t}");
    }
    // clap only in the binary (main.rs and its commands in cli/).
    let clap = defining("clap");
    assert!(clap.contains(&"main.rs".to_string()), "{clap:?}");
    assert!(
        clap.iter().all(|f| f == "main.rs" || f.starts_with("cli/")),
        "{clap:?}"
    );
    // No hand-written cycle check on a list outside the walker.
    assert_eq!(defining(".insert(cur)"), ["mem/list.rs"]);
}

/// Full and triage dumps share every command: the commands (`report/`) and the binary never
/// ask which kind of dump they read; the one place that chooses between a memory dump's
/// logger contexts and a triage dump's saved data is the ETW source (`etw/source.rs`).
/// (`report/info.rs` describes the dump file itself, triage blocks included.)
#[test]
fn commands_do_not_branch_on_the_dump_kind() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src.join("report"), &mut files);
    rust_files(&src.join("cli"), &mut files);
    files.push(src.join("main.rs"));
    let mut branching = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        if f.ends_with("report/info.rs") {
            continue;
        }
        if text.contains(".triage()") || text.contains("etw::triage") {
            branching.push(f.strip_prefix(&src).unwrap().display().to_string());
        }
    }
    assert!(branching.is_empty(), "{branching:?}");
    // Each command opens the source and nothing else that finds ETW data.
    for (cmd, needle) in [
        ("report/sessions.rs", "EtwSource::open_sessions"),
        ("report/buffers.rs", "EtwSource::open_units"),
        ("report/extract.rs", "EtwSource::open"),
        ("report/events.rs", "EtwSource::open"),
        ("report/cswitch.rs", "EtwSource::open"),
    ] {
        let text = std::fs::read_to_string(src.join(cmd)).unwrap();
        assert!(text.contains(needle), "{cmd} does not use {needle}");
        for other in [
            "find_buffers(",
            "list_sessions(",
            "find_pending(",
            "triage::read(",
        ] {
            assert!(!text.contains(other), "{cmd} calls {other} itself");
        }
    }
}

/// Text from the input has one type (issue 27): `text::Untrusted`, shown escaped, serialized
/// exactly, with no `Deref`/`AsRef<str>`/`Borrow<str>` to reach the raw text; input bytes
/// become text only through it; the printing layers never take its raw text; escaping has
/// one home; and the models carry it for every name read from the input.
#[test]
fn input_text_is_untrusted_and_escaped_in_one_place() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let read = |rel: &str| std::fs::read_to_string(src.join(rel)).unwrap();
    let text = read("text.rs");
    assert!(text.contains("pub struct Untrusted(String);"));
    for leak in [
        "Deref for Untrusted",
        "AsRef<str> for Untrusted",
        "Borrow<str> for Untrusted",
        "From<Untrusted> for String",
        "DerefMut for Untrusted",
    ] {
        assert!(!text.contains(leak), "text.rs: {leak}");
    }
    let mut bad = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap().display().to_string();
        let body = std::fs::read_to_string(f).unwrap();
        // Code before the unit tests (which may build strings freely).
        let code = body.split("#[cfg(test)]").next().unwrap_or("");
        let printing = rel.starts_with("render/") || rel == "main.rs" || rel.starts_with("cli/");
        for (i, line) in code.lines().enumerate() {
            let l = line.split("//").next().unwrap_or("");
            let at = format!("{rel}:{}", i + 1);
            // Bytes become text only through Untrusted (text.rs); the renderers and main turn
            // their own JSON bytes back into text.
            let decodes = [
                "String::from_utf8_lossy(",
                "String::from_utf16",
                "String::from_utf8(",
            ]
            .iter()
            .any(|d| l.contains(d));
            if decodes && rel != "text.rs" && !printing {
                bad.push(format!(
                    "{at}: decodes bytes outside text::Untrusted: {}",
                    l.trim()
                ));
            }
            // One home for escaping.
            if l.contains("escape_unicode") && rel != "text.rs" {
                bad.push(format!("{at}: escapes outside text.rs: {}", l.trim()));
            }
            // The printing layers show input text through Display (escaped) or JSON (exact),
            // never its raw form.
            if printing && (l.contains(".raw()") || l.contains(".into_raw()")) {
                bad.push(format!(
                    "{at}: raw input text in a printing layer: {}",
                    l.trim()
                ));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    // The names read from the input are carried as Untrusted in the models.
    for (file, decl) in [
        ("kernel/processes.rs", "pub name: Untrusted,"),
        ("kernel/processes.rs", "pub image: Option<Untrusted>,"),
        (
            "kernel/modules.rs",
            "pub full_name: Option<crate::text::Untrusted>,",
        ),
        (
            "kernel/modules.rs",
            "pub base_name: Option<crate::text::Untrusted>,",
        ),
        ("symbols/identity.rs", "pub name: Untrusted,"),
        ("etw/loggers.rs", "pub name: Option<Untrusted>,"),
        ("etw/loggers.rs", "pub log_file: Option<Untrusted>,"),
        (
            "etw/consumers.rs",
            "pub process: Option<crate::text::Untrusted>,",
        ),
        (
            "etw/providers.rs",
            "pub process: Option<crate::text::Untrusted>,",
        ),
        ("etw/triage.rs", "pub name: Untrusted,"),
        ("dump/triage.rs", "pub name: Untrusted,"),
        ("dump/layout.rs", "pub source: Untrusted,"),
        (
            "dump/image.rs",
            "pub metadata: Option<crate::text::Untrusted>,",
        ),
        (
            "report/cswitch.rs",
            "pub old_process: Option<crate::text::Untrusted>,",
        ),
        (
            "report/cswitch.rs",
            "pub new_process: Option<crate::text::Untrusted>,",
        ),
        (
            "report/info.rs",
            "pub first: Option<crate::text::Untrusted>,",
        ),
        (
            "report/info.rs",
            "pub build_lab: Option<crate::text::Untrusted>,",
        ),
        (
            "report/sessions.rs",
            "pub name: Option<crate::text::Untrusted>,",
        ),
        (
            "report/overview.rs",
            "pub name: Option<crate::text::Untrusted>,",
        ),
        (
            "report/scan.rs",
            "pub name: Option<crate::text::Untrusted>,",
        ),
        (
            "report/buffers.rs",
            "pub consumer_process: Option<crate::text::Untrusted>,",
        ),
        (
            "report/providers.rs",
            "pub session: Option<crate::text::Untrusted>,",
        ),
        (
            "symbols/server.rs",
            "Message { url: String, message: Untrusted },",
        ),
    ] {
        assert!(read(file).contains(decl), "{file}: {decl}");
    }
}

/// The binary stays thin (issue 28): main.rs is the command list and the exit code, under 300
/// lines; each command is a unit in cli/, and no function of main.rs or cli/ runs past 150
/// lines (a function is counted from its `fn` line to the line that closes its braces).
#[test]
fn the_binary_is_thin_and_its_functions_short() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let main = std::fs::read_to_string(src.join("main.rs")).unwrap();
    let n = main.lines().count();
    assert!(n < 300, "src/main.rs has {n} lines (at most 299)");
    let mut files = vec![src.join("main.rs")];
    rust_files(&src.join("cli"), &mut files);
    assert!(files.len() > 10, "the commands live in src/cli/: {files:?}");
    let mut long = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap().display().to_string();
        let text = std::fs::read_to_string(f).unwrap();
        for (name, start, lines) in functions(&text) {
            if lines > 150 {
                long.push(format!("{rel}:{start}: fn {name} has {lines} lines"));
            }
        }
    }
    assert!(long.is_empty(), "{}", long.join("\n"));
    // The scan counts what it should.
    let sample = "fn a() {\n    let s = \"}\";\n    // }\n    let c = '\\u{7d}';\n}\n\npub fn b(x: u8) -> u8 {\n    x\n}\n";
    assert_eq!(
        functions(sample),
        [("a".to_string(), 1, 5), ("b".to_string(), 7, 3)]
    );
}

/// Each `fn` item of `text`: (name, first line, lines up to its closing brace). Braces are
/// counted outside comments, strings and character literals; a `fn` without a body (a trait
/// method's declaration) is skipped.
fn functions(text: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let code = strip(line);
        let Some(at) = code.find("fn ").filter(|&at| {
            at == 0
                || !code.as_bytes()[at - 1].is_ascii_alphanumeric()
                    && code.as_bytes()[at - 1] != b'_'
        }) else {
            continue;
        };
        let name: String = code[at + 3..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            continue;
        }
        let mut depth = 0i64;
        let mut opened = false;
        for (j, l) in lines.iter().enumerate().skip(i) {
            let c = strip(l);
            // The signature ends at the body's `{` or at a `;` (no body).
            if !opened && depth == 0 && c.contains(';') && !c.contains('{') {
                break;
            }
            for ch in c.chars() {
                match ch {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            if opened && depth <= 0 {
                out.push((name.clone(), i + 1, j - i + 1));
                break;
            }
        }
    }
    out
}

/// A line's code without its comment, string and character literals.
fn strip(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => break,
            '"' => {
                while let Some(d) = chars.next() {
                    match d {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
            }
            '\'' => {
                // A character literal ('{', '\'') or a lifetime ('a): skip only the former.
                let rest: String = chars.clone().take(3).collect();
                if rest.starts_with('\\') {
                    chars.next();
                    for d in chars.by_ref() {
                        if d == '\'' {
                            break;
                        }
                    }
                } else if rest.chars().nth(1) == Some('\'') {
                    chars.nth(1);
                }
            }
            _ => out.push(c),
        }
    }
    out
}
