//! The module graph (issue 12): each top-level module of the library may use only modules of
//! its own or a lower layer. The layers, lowest first, are those of docs/architecture.md.
//! No two files of src/ import each other, directly or through others (issue 28 step 6).
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

/// The top-level modules each top-level module's files name: the file-level import graph
/// ([`file_graph`]) with each file taken as its top-level module.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let top = |f: &str| {
        let first = f.split('/').next().unwrap_or(f);
        first.trim_end_matches(".rs").to_string()
    };
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (f, uses) in file_graph() {
        let m = top(&f);
        if m == "lib" || m == "main" || m == "cli" {
            continue; // the crate root and the binary (main.rs, cli/) may use everything
        }
        let e = g.entry(m.clone()).or_default();
        e.extend(
            uses.iter()
                .map(|u| top(u))
                .filter(|u| *u != m && u != "lib"),
        );
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
        ("report/cswitch/mod.rs", "EtwSource::open"),
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
    // The text is held privately (shared or static), reached only through `raw()`.
    assert!(text.contains("pub struct Untrusted(Text);"));
    assert!(text.contains("\nenum Text {") && !text.contains("pub enum Text"));
    assert!(!text.contains("impl std::ops::Deref for Untrusted"));
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
        // Type, field and structure names from a PDB or an ISF file.
        ("symbols/layout.rs", "pub name: Untrusted,"),
        (
            "symbols/layout.rs",
            "        name: Untrusted,\n        size: u64,\n        signed: bool,",
        ),
        (
            "symbols/layout.rs",
            "    Struct {\n        name: Untrusted,",
        ),
        ("symbols/layout.rs", "    Union {\n        name: Untrusted,"),
        ("symbols/layout.rs", "    Enum {\n        name: Untrusted,"),
        (
            "kernel/view.rs",
            "MissingField { ty: Untrusted, field: String }",
        ),
        (
            "report/symbols.rs",
            "pub fields: BTreeMap<Untrusted, FieldInfo>,",
        ),
        (
            "report/symbols.rs",
            "pub symbols: BTreeMap<Untrusted, String>,",
        ),
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
            "report/cswitch/mod.rs",
            "pub old_process: Option<crate::text::Untrusted>,",
        ),
        (
            "report/cswitch/mod.rs",
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

/// The source of a file with comments, string and character literals blanked (newlines kept),
/// so that paths and braces are only those of the code.
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let blank = |c: u8| if c == b'\n' { b'\n' } else { b' ' };
    let mut i = 0;
    while i < b.len() {
        let rest = &b[i..];
        if rest.starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                out.push(b' ');
                i += 1;
            }
        } else if rest.starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    out.extend(b"  ");
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    out.extend(b"  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
        } else if (rest.starts_with(b"r#") || rest.starts_with(b"r\"") || rest.starts_with(b"br"))
            && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'))
            && rest.iter().find(|&&c| c != b'b' && c != b'r' && c != b'#') == Some(&b'"')
        {
            // A raw string: r#"..."# (any number of #).
            let start = rest.iter().position(|&c| c == b'"').unwrap();
            let hashes = rest[..start].iter().filter(|&&c| c == b'#').count();
            let mut close = vec![b'"'];
            close.extend(std::iter::repeat_n(b'#', hashes));
            out.extend(std::iter::repeat_n(b' ', start + 1));
            i += start + 1;
            while i < b.len() && !b[i..].starts_with(&close) {
                out.push(blank(b[i]));
                i += 1;
            }
            out.extend(std::iter::repeat_n(b' ', close.len()));
            i += close.len();
        } else if b[i] == b'"' {
            out.push(b' ');
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    out.push(b' ');
                    i += 1;
                }
                if i < b.len() {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
            out.push(b' ');
            i += 1;
        } else if b[i] == b'\'' {
            // A character literal ('x', '\n', '\u{..}'); otherwise a lifetime.
            let end = if rest.get(1) == Some(&b'\\') {
                rest.iter().skip(2).position(|&c| c == b'\'').map(|p| p + 3)
            } else {
                let ch = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                (rest.get(1 + ch) == Some(&b'\'')).then_some(ch + 2)
            };
            let n = end.unwrap_or(1);
            out.extend(std::iter::repeat_n(b' ', n));
            i += n;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Tokens of code: identifiers, `::`, and single punctuation characters.
fn tokens(code: &str) -> Vec<&str> {
    let mut t = Vec::new();
    let mut i = 0;
    let b = code.as_bytes();
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_alphanumeric() || c == b'_' {
            let s = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            t.push(&code[s..i]);
        } else if code[i..].starts_with("::") {
            t.push("::");
            i += 2;
        } else if c.is_ascii_whitespace() || !c.is_ascii() {
            i += 1;
        } else {
            t.push(&code[i..i + 1]);
            i += 1;
        }
    }
    t
}

/// The paths of a path or use tree starting at `t[*i]` (after `crate::` or `super::`), each
/// appended to `prefix`: `a::b::{c, d::{e, self}}` gives a::b::c, a::b::d::e, a::b::d.
fn use_tree(t: &[&str], i: &mut usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let mut path = prefix;
    loop {
        match t.get(*i) {
            Some(&"{") => {
                *i += 1;
                while *i < t.len() && t[*i] != "}" {
                    let at = *i;
                    use_tree(t, i, path.clone(), out);
                    if t.get(*i) == Some(&",") || *i == at {
                        *i += 1;
                    }
                }
                *i += 1;
                return;
            }
            Some(&"self") | Some(&"*") => {
                *i += 1;
            }
            Some(s) if s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') => {
                path.push(s.to_string());
                *i += 1;
            }
            _ => {}
        }
        if t.get(*i) == Some(&"::") {
            *i += 1;
            continue;
        }
        if t.get(*i) == Some(&"as") {
            *i += 2;
        }
        out.push(path);
        return;
    }
}

/// The file-level import graph of src/: a file imports another when it names an item of it
/// through `crate::` or `super::` (also inside `use` groups). A path resolves to the file of
/// its longest prefix that is a module with a file of its own (items of inline modules belong
/// to their file). A parent naming its child modules by their bare names is not an import.
fn file_graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    // Module path (["etw", "loggers"]) of each file.
    let module_of = |f: &Path| -> Vec<String> {
        let rel = f.strip_prefix(&src).unwrap();
        let mut parts: Vec<String> = rel
            .iter()
            .map(|c| c.to_str().unwrap().to_string())
            .collect();
        let last = parts.pop().unwrap();
        if last != "mod.rs" && last != "lib.rs" && last != "main.rs" {
            parts.push(last.trim_end_matches(".rs").to_string());
        }
        parts
    };
    let by_module: BTreeMap<Vec<String>, String> = files
        .iter()
        .filter(|f| !f.ends_with("main.rs"))
        .map(|f| {
            let rel = f.strip_prefix(&src).unwrap().display().to_string();
            (module_of(f), rel)
        })
        .collect();
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap().display().to_string();
        let own = module_of(f);
        let code = code_only(&std::fs::read_to_string(f).unwrap());
        let t = tokens(&code);
        let mut paths = Vec::new();
        // Inline modules open here: (name, brace depth inside it).
        let mut inline: Vec<usize> = Vec::new();
        let mut inline_names: Vec<String> = Vec::new();
        let mut depth = 0usize;
        let mut i = 0;
        while i < t.len() {
            match t[i] {
                "{" => depth += 1,
                "}" => {
                    if inline.last() == Some(&depth) {
                        inline.pop();
                        inline_names.pop();
                    }
                    depth = depth.saturating_sub(1);
                }
                "mod" if t.get(i + 2) == Some(&"{") => {
                    inline_names.push(t[i + 1].to_string());
                    inline.push(depth + 1);
                }
                "crate" | "super"
                    if t.get(i + 1) == Some(&"::") && (i == 0 || t[i - 1] != "::") =>
                {
                    let mut base: Vec<String> = own.clone();
                    base.extend(inline_names.iter().cloned());
                    let mut j = i;
                    if t[i] == "crate" {
                        base.clear();
                        j += 2;
                    } else {
                        while t.get(j) == Some(&"super") && t.get(j + 1) == Some(&"::") {
                            base.pop();
                            j += 2;
                        }
                    }
                    use_tree(&t, &mut j, base, &mut paths);
                    i = j;
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
        let uses = g.entry(rel.clone()).or_default();
        for p in paths {
            let target = (0..=p.len())
                .rev()
                .find_map(|n| by_module.get(&p[..n]))
                .unwrap();
            if *target != rel {
                uses.insert(target.clone());
            }
        }
    }
    g
}

/// Tarjan's strongly connected components of a graph given as adjacency lists.
struct Tarjan<'a> {
    edges: &'a [Vec<usize>],
    index: Vec<Option<usize>>,
    low: Vec<usize>,
    on_stack: Vec<bool>,
    stack: Vec<usize>,
    next: usize,
    components: Vec<Vec<usize>>,
}

impl Tarjan<'_> {
    fn components(edges: &[Vec<usize>]) -> Vec<Vec<usize>> {
        let n = edges.len();
        let mut t = Tarjan {
            edges,
            index: vec![None; n],
            low: vec![0; n],
            on_stack: vec![false; n],
            stack: Vec::new(),
            next: 0,
            components: Vec::new(),
        };
        for v in 0..n {
            if t.index[v].is_none() {
                t.visit(v);
            }
        }
        t.components
    }

    fn visit(&mut self, v: usize) {
        self.index[v] = Some(self.next);
        self.low[v] = self.next;
        self.next += 1;
        self.stack.push(v);
        self.on_stack[v] = true;
        for &w in &self.edges[v] {
            match self.index[w] {
                None => {
                    self.visit(w);
                    self.low[v] = self.low[v].min(self.low[w]);
                }
                Some(iw) if self.on_stack[w] => self.low[v] = self.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(self.low[v]) == self.index[v] {
            let mut comp = Vec::new();
            loop {
                let w = self.stack.pop().unwrap();
                self.on_stack[w] = false;
                comp.push(w);
                if w == v {
                    break;
                }
            }
            self.components.push(comp);
        }
    }
}

/// The import cycles of a graph: for each strongly connected component of more than one
/// file, one cycle through its first file (the shortest, found breadth-first), then all the
/// component's files.
fn cycles(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<(Vec<String>, Vec<String>)> {
    let names: Vec<&String> = g.keys().collect();
    let idx: BTreeMap<&String, usize> = names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let edges: Vec<Vec<usize>> = names
        .iter()
        .map(|n| g[*n].iter().filter_map(|m| idx.get(m).copied()).collect())
        .collect();
    let mut out = Vec::new();
    for comp in Tarjan::components(&edges)
        .into_iter()
        .filter(|c| c.len() > 1)
    {
        let inside: BTreeSet<usize> = comp.iter().copied().collect();
        let start = *comp.iter().min().unwrap();
        let mut prev = vec![usize::MAX; names.len()];
        let mut queue = std::collections::VecDeque::from([start]);
        let mut last = None;
        'bfs: while let Some(v) = queue.pop_front() {
            for &w in edges[v].iter().filter(|w| inside.contains(w)) {
                if w == start {
                    last = Some(v);
                    break 'bfs;
                }
                if prev[w] == usize::MAX {
                    prev[w] = v;
                    queue.push_back(w);
                }
            }
        }
        let mut cycle = Vec::new();
        let mut v = last.unwrap();
        while v != start {
            cycle.push(names[v].clone());
            v = prev[v];
        }
        cycle.push(names[start].clone());
        cycle.reverse();
        let mut all: Vec<String> = comp.iter().map(|&v| names[v].clone()).collect();
        all.sort();
        out.push((cycle, all));
    }
    out
}

/// The functions of src/ allowed past 150 lines, as (file under src/, function name): none.
const LONG_FUNCTIONS_ALLOWED: [(&str, &str); 0] = [];

/// The binary stays thin (issue 28): main.rs is the command list and the exit code, under 300
/// lines; each command is a unit in cli/, and no function anywhere in src/ runs past 150 lines
/// (a function is counted from its `fn` line to the line that closes its braces; an exception
/// would be named in [`LONG_FUNCTIONS_ALLOWED`], which is empty).
#[test]
fn the_binary_is_thin_and_its_functions_short() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let main = std::fs::read_to_string(src.join("main.rs")).unwrap();
    let n = main.lines().count();
    assert!(n < 300, "src/main.rs has {n} lines (at most 299)");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(
        files
            .iter()
            .filter(|f| f.starts_with(src.join("cli")))
            .count()
            > 10,
        "the commands live in src/cli/: {files:?}"
    );
    let mut long = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap().display().to_string();
        let text = std::fs::read_to_string(f).unwrap();
        for (name, start, lines) in functions(&text) {
            if lines > 150 && !LONG_FUNCTIONS_ALLOWED.contains(&(rel.as_str(), name.as_str())) {
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

/// No import cycle between files (issue 28 step 6): each pair of files depends one way, so
/// every file can be read knowing only the files below it.
#[test]
fn no_import_cycle_between_files() {
    let g = file_graph();
    for (f, uses) in &g {
        println!(
            "{f} imports: {}",
            uses.iter().cloned().collect::<Vec<_>>().join(", ")
        );
    }
    // The graph sees the imports it should (a use group, a multi-line use, super::).
    assert!(g["etw/tamper.rs"].contains("etw/loggers.rs"));
    assert!(g["symbols/builtin/buffer_header.rs"].contains("symbols/builtin/mod.rs"));
    assert!(g["symbols/builtin/buffer_header.rs"].contains("symbols/layout.rs"));
    let found = cycles(&g);
    let text: Vec<String> = found
        .iter()
        .map(|(cycle, all)| {
            format!(
                "{} -> {} (files of the cycle: {})",
                cycle.join(" -> "),
                cycle[0],
                all.join(", ")
            )
        })
        .collect();
    assert!(
        found.is_empty(),
        "import cycles between files:\n{}",
        text.join("\n")
    );
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

/// Each `Result<.., String>` of a file's code: (line, the type as written), found on the code
/// with comments and literals blanked; the error is the last top-level argument.
fn string_results(code: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let t = tokens(code);
    // The line of each token: tokens are slices of `code`, so their offsets give the lines.
    let line_of = |tok: &str| {
        let at = tok.as_ptr() as usize - code.as_ptr() as usize;
        code[..at].matches('\n').count() + 1
    };
    for i in 0..t.len() {
        if t[i] != "Result" || t.get(i + 1) != Some(&"<") {
            continue;
        }
        let (mut depth, mut j, mut last_arg) = (0i32, i + 1, i + 2);
        while j < t.len() {
            match t[j] {
                "<" => depth += 1,
                ">" if t[j - 1] != "-" => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                "(" | "[" => depth += 100,
                ")" | "]" => depth -= 100,
                "," if depth == 1 => last_arg = j + 1,
                _ => {}
            }
            j += 1;
        }
        let err: Vec<&str> = t[last_arg.min(j)..j].to_vec();
        if err == ["String"] || err == ["std", "::", "string", "::", "String"] {
            out.push((line_of(t[i]), t[i..=j.min(t.len() - 1)].concat()));
        }
    }
    out
}

/// Typed problems (issue 28 step 4): the dump, memory and ETW layers give no `Result<_,
/// String>` (errors are enums whose variants carry the data) and keep no warnings as text
/// (`Vec<String>`): their warnings are `warning::Warning`s (or typed enums), with a kind.
#[test]
fn dump_mem_and_etw_have_typed_problems() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    for d in ["dump", "mem", "etw"] {
        rust_files(&src.join(d), &mut files);
    }
    files.sort();
    assert!(files.len() > 20, "{files:?}");
    let mut bad = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap().display().to_string();
        let code = code_only(&std::fs::read_to_string(f).unwrap());
        for (line, ty) in string_results(&code) {
            bad.push(format!("{rel}:{line}: {ty}"));
        }
        for (i, l) in code.lines().enumerate() {
            let compact: String = l.split_whitespace().collect();
            if compact.contains("Vec<String>") && l.to_lowercase().contains("warn") {
                bad.push(format!("{rel}:{}: warnings as text: {}", i + 1, l.trim()));
            }
        }
    }
    assert!(bad.is_empty(), "untyped problems:\n{}", bad.join("\n"));
    // The scan finds what it should.
    let sample = "fn a() -> Result<Vec<u8>, String> {}\nfn b(f: &dyn Fn(u8) -> Result<u8, String>) {}\nfn c() -> Result<(u8, String), E> {}\nfn d() -> std::result::Result<(), std::string::String> {}\n";
    let found: Vec<usize> = string_results(sample).iter().map(|r| r.0).collect();
    assert_eq!(found, [1, 2, 4]);
    // The truncation of a dump is told by its kind, not by its text.
    let text = std::fs::read_to_string(src.join("dump/mod.rs")).unwrap();
    assert!(text.contains("pub fn truncation(&self) -> Option<&Warning>"));
    for f in ["kernel/context.rs", "cli/common.rs"] {
        let t = std::fs::read_to_string(src.join(f)).unwrap();
        assert!(!t.contains("starts_with(\"truncated dump"), "{f}");
    }
    // No text becomes a warning without a kind.
    let warning = std::fs::read_to_string(src.join("warning.rs")).unwrap();
    assert!(!warning.contains("From<String> for Warning"));
    assert!(!warning.contains("From<&str> for Warning"));
}

/// The places a name of `ident` (a whole identifier) is declared with type `ty` in `code`
/// (`ident: ty`, whitespace allowed around the colon; not a path `ident::`): as a parameter,
/// a struct field or a closure argument.
fn typed_as(code: &str, ident: &str, ty: &str) -> Vec<usize> {
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut found = Vec::new();
    for (at, _) in code.match_indices(ident) {
        let before = code[..at].chars().next_back();
        let rest = &code[at + ident.len()..];
        if before.is_some_and(is_ident) || rest.starts_with(is_ident) {
            continue;
        }
        let Some(rest) = rest.trim_start().strip_prefix(':') else {
            continue;
        };
        if rest.starts_with(':') {
            continue;
        }
        let rest = rest.trim_start();
        if rest.starts_with(ty) && !rest[ty.len()..].starts_with(is_ident) {
            found.push(code[..at].matches('\n').count() + 1);
        }
    }
    found
}

/// The architecture is an enum (issue 28 step 2): no `x64: bool` parameter, field or closure
/// argument is left in src/; code takes a `dump::Arch` (or a narrower enum naming what it
/// chooses, e.g. `symbols::TableFamily`, `addr::PointerWidth`).
#[test]
fn no_x64_bool_is_left() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut left = Vec::new();
    for f in &files {
        let code = code_only(&std::fs::read_to_string(f).unwrap());
        for line in typed_as(&code, "x64", "bool") {
            left.push(format!(
                "{}:{line}",
                f.strip_prefix(&src).unwrap().display()
            ));
        }
    }
    assert!(left.is_empty(), "x64: bool left at:\n{}", left.join("\n"));
    // The scan finds what it should, and only that.
    let sample = "fn f(x64: bool) {}\nstruct S {\nx64 :bool,\n}\nlet c = |x64: bool| x64;\n\
                  fn g(is_x64: bool, x64: Arch, x64x: bool) {}\nlet y = x64::bool;\n";
    assert_eq!(typed_as(sample, "x64", "bool"), [1, 3, 5]);
    assert_eq!(
        typed_as(
            &code_only("// fn f(x64: bool)\nlet s = \"x64: bool\";"),
            "x64",
            "bool"
        ),
        Vec::<usize>::new()
    );
}

/// No file-offset reads outside the containers (issue 28 step 2): above `src/dump/`, memory is
/// read as pages by PFN (`DumpFile::page`, `read_physical_bulk`, `prefetch_pages`), a triage
/// dump's blocks, saved KPRCB and blobs through its `TriageView`; no file outside
/// `src/dump/` calls the APIs that take a file offset or hand out the whole file (kept public
/// for tests and fuzzing only).
#[test]
fn no_file_offset_reads_outside_the_containers() {
    const FILE_OFFSET_APIS: [&str; 9] = [
        ".file_bytes(",
        ".whole_file(",
        ".page_file_offset(",
        ".read_file_at(",
        ".prefetch_file(",
        ".file_offset(",
        ".run_offset(",
        "SecondaryData::parse(",
        ".page_offset(file",
    ];
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut found = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap().display().to_string();
        if rel.starts_with("dump/") || rel.starts_with("dump\\") {
            continue;
        }
        let code = code_only(&std::fs::read_to_string(f).unwrap());
        for (i, l) in code.lines().enumerate() {
            let compact: String = l.split_whitespace().collect();
            for api in FILE_OFFSET_APIS {
                if compact.contains(api) {
                    found.push(format!("{rel}:{}: {api}", i + 1));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "file-offset reads outside src/dump/:\n{}",
        found.join("\n")
    );
    // The scan sees calls split over lines by rustfmt (`.file_bytes(` after a line break).
    let sample = code_only("let b = ctx\n    .dump\n    .file_bytes(o, n);\n// .whole_file()\n");
    let hits: Vec<usize> = sample
        .lines()
        .enumerate()
        .filter(|(_, l)| FILE_OFFSET_APIS.iter().any(|a| l.trim().contains(a)))
        .map(|(i, _)| i + 1)
        .collect();
    assert_eq!(hits, [3]);
    // The detection registry is the one place that picks a container.
    let dump_mod = std::fs::read_to_string(src.join("dump/mod.rs")).unwrap();
    for chain in [
        "is_elf(",
        "is_vmware_state(",
        "is_raw_candidate(",
        "DumpType::FULL",
    ] {
        assert!(
            !dump_mod.contains(chain),
            "dump/mod.rs detects formats itself: {chain}"
        );
    }
    let registry = std::fs::read_to_string(src.join("dump/registry.rs")).unwrap();
    assert!(registry.contains("pub(crate) static FORMATS: &[Format] = &["));
}
