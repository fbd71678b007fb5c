//! `collect`'s own files: `collect.json`, `warnings.jsonl` and `index.html` (a static page:
//! HTML and inline CSS, no script, nothing fetched; its Content-Security-Policy forbids
//! scripts and every resource but its own files), and the lines `collect` prints.
//!
//! Every text from the input on the page (session, log file, process and file names,
//! warnings, errors) goes through [`html`]: escaped for a terminal as everywhere else, then
//! its markup characters as character references. Links are to etwdump's own file names only,
//! percent-encoded ([`url_path`]).

use super::output::Render;
use super::overview::{switch_time, thread};
use super::text::{html, json_terminal_safe, url_path};
use crate::report::collect::{Artefact, CollectedWarning, Collection, FileEntry, Status, Summary};
use crate::report::extract::Manifest;
use crate::report::overview::Overview;
use crate::report::RowFormat;
use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::Path;

/// Warnings listed on the page at most (all are in `warnings.jsonl` and `collect.json`).
pub const MAX_PAGE_WARNINGS: usize = 1000;

/// The policy of the page: nothing but its inline style and its own directory's images.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'none'; \
     style-src 'unsafe-inline'; img-src 'self'; base-uri 'none'; form-action 'none'";

/// `warnings.jsonl`: one JSON object per warning (its fields and `artefacts`), terminal-safe.
/// Returns the lines written.
pub fn warnings_jsonl(out: &mut dyn Write, w: &[CollectedWarning]) -> io::Result<u64> {
    for x in w {
        let mut line = serde_json::to_vec(x).map_err(io::Error::other)?;
        json_terminal_safe(&mut line);
        line.push(b'\n');
        out.write_all(&line)?;
    }
    Ok(w.len() as u64)
}

/// A collection as `collect` reports it: JSON is `collect.json`; the table, what it prints
/// (one line per artefact, then the page).
pub struct Collected<'a> {
    pub dir: &'a Path,
    pub collection: &'a Collection,
}

impl Render for Collected<'_> {
    fn render(&self, out: &mut dyn Write, format: RowFormat) -> io::Result<()> {
        if format == RowFormat::Json {
            return super::output::json(out, self.collection);
        }
        let mut s = String::new();
        for a in &self.collection.artefacts {
            let files: Vec<String> = a
                .files
                .iter()
                .map(|f| format!("{} ({} bytes)", f.path, f.bytes))
                .collect();
            let _ = write!(s, "{:<9} ", a.name);
            match (&a.status, &a.error) {
                (Status::Failed, e) => {
                    let _ = write!(s, "FAILED: {}", e.as_deref().unwrap_or("?"));
                    if !files.is_empty() {
                        let _ = write!(s, "; written: {}", files.join(", "));
                    }
                }
                (Status::Ok, _) => s.push_str(&files.join(", ")),
            }
            s.push('\n');
        }
        let _ = writeln!(s, "{}", self.dir.join("index.html").display());
        super::output::table(out, &s)
    }
}

/// What the page shows: the collection, and the models the summary's tables come from
/// (each absent when its artefact failed).
pub struct Index<'a> {
    pub collection: &'a Collection,
    pub overview: Option<&'a Overview>,
    /// The extraction's manifest (a session's .etl file).
    pub extract: Option<&'a Manifest>,
}

const STYLE: &str = "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;\
margin:1.5em auto;max-width:1280px;padding:0 1em;color:#1b1b1b;background:#fff}\
h1{font-size:1.6em;margin:0 0 .2em}h2{font-size:1.2em;margin-top:1.8em;border-bottom:1px solid #ccc}\
table{border-collapse:collapse;margin:.5em 0}th,td{border:1px solid #d4d4d4;padding:.2em .5em;\
text-align:left;vertical-align:top}th{background:#f3f3f3}td.n{text-align:right;\
font-variant-numeric:tabular-nums}code,.m{font-family:ui-monospace,Menlo,Consolas,monospace;\
font-size:.92em}.ok{color:#0a6b2d;font-weight:600}.failed{color:#b00020;font-weight:600}\
.warning{color:#8a4b00;font-weight:600}.note{color:#555}.h{font-size:.8em;word-break:break-all}\
.sub{color:#555;margin:0}img.chart{max-width:100%;border:1px solid #d4d4d4}";

/// The page.
pub fn index_html(i: &Index<'_>) -> String {
    let c = i.collection;
    let mut o = String::with_capacity(64 << 10);
    let title = Path::new(&c.dump)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| c.dump.clone());
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"{CONTENT_SECURITY_POLICY}\">\n\
         <meta name=\"referrer\" content=\"no-referrer\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>etwdump collect: {}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n\
         <h1>etwdump collect</h1>\n<p class=\"sub\"><span class=\"m\" id=\"dump\">{}</span> \
         &middot; etwdump {} &middot; <a href=\"collect.json\">collect.json</a> (the manifest) \
         &middot; <a href=\"warnings.jsonl\">warnings.jsonl</a></p>\n",
        html(&title),
        html(&c.dump),
        html(c.etwdump_version)
    );
    summary(&mut o, &c.summary);
    artefacts(&mut o, &c.artefacts);
    if let Some(ov) = i.overview {
        sessions(&mut o, ov, i.extract);
        switches(&mut o, ov, c);
    }
    warnings(&mut o, &c.warnings);
    o.push_str("</body>\n</html>\n");
    o
}

/// A number or `-` (null: its artefact failed).
fn num(v: Option<u64>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

fn summary(o: &mut String, s: &Summary) {
    let mut rows: Vec<(&str, &str, String)> = Vec::new();
    if let Some(d) = &s.dump {
        rows.push(("kind", "Dump", format!("{} ({})", d.kind, d.arch)));
        rows.push(("build", "Windows build", d.build.to_string()));
        rows.push(("processors", "Processors", d.processors.to_string()));
        rows.push(("system-time", "Taken (UTC)", d.system_time.clone()));
        rows.push(("symbols", "Symbols", d.symbols.clone()));
    }
    if let Some(p) = &s.symbols_path {
        rows.push(("symbols-path", "Symbol file", p.clone()));
    }
    for (id, label, v) in [
        ("sessions", "ETW sessions", s.sessions),
        ("buffers", "Trace buffers", s.buffers),
        ("etl-files", ".etl files extracted", s.etl_files),
        ("etl-records", "Records in them", s.etl_records),
        ("switches", "Context switches", s.switches),
        ("events", "Events (records)", s.events),
        ("providers", "Providers", s.providers),
        ("findings", "Tamper-check findings", s.findings),
        ("scan-objects", "Objects found by the scan", s.scan_objects),
        ("carved-files", "Carved .etl files", s.carved_files),
    ] {
        rows.push((id, label, num(v)));
    }
    rows.push((
        "artefacts",
        "Artefacts",
        format!("{} ({} failed)", s.artefacts, s.failed),
    ));
    rows.push((
        "warnings",
        "Warnings",
        format!("{} warnings, {} notes", s.warnings, s.notes),
    ));
    o.push_str("<h2 id=\"summary\">Summary</h2>\n<table id=\"summary-table\">\n");
    for (id, label, v) in rows {
        let _ = writeln!(
            o,
            "<tr><th>{label}</th><td id=\"sum-{id}\">{}</td></tr>",
            html(&v)
        );
    }
    o.push_str("</table>\n");
}

/// A link to one of our files.
fn link(path: &str) -> String {
    format!(
        "<a href=\"{}\" class=\"m\">{}</a>",
        html(&url_path(path)),
        html(path)
    )
}

fn artefacts(o: &mut String, all: &[Artefact]) {
    o.push_str(
        "<h2 id=\"artefacts\">Artefacts</h2>\n<table id=\"artefacts-table\">\n<thead><tr>\
         <th>artefact</th><th>file</th><th>rows</th><th>bytes</th><th>SHA-256</th>\
         <th>status</th></tr></thead>\n<tbody>\n",
    );
    for a in all {
        let span = a.files.len().max(1);
        let status = match a.status {
            Status::Ok => "<span class=\"ok\">ok</span>".to_string(),
            Status::Failed => format!(
                "<span class=\"failed\">failed</span>: {}",
                html(a.error.as_deref().unwrap_or("?"))
            ),
        };
        let head = format!(
            "<td rowspan=\"{span}\" id=\"art-{}\"><b>{}</b><br>{}<br><code>{}</code></td>",
            a.name,
            a.name,
            html(a.title),
            html(a.command)
        );
        let tail = format!(
            "<td rowspan=\"{span}\" class=\"status-{}\">{status}</td>",
            if a.status == Status::Ok {
                "ok"
            } else {
                "failed"
            }
        );
        if a.files.is_empty() {
            let _ = writeln!(
                o,
                "<tr>{head}<td>-</td><td></td><td></td><td></td>{tail}</tr>"
            );
        }
        for (k, f) in a.files.iter().enumerate() {
            let _ = writeln!(
                o,
                "<tr>{}{}{}</tr>",
                if k == 0 { head.as_str() } else { "" },
                file_cells(f),
                if k == 0 { tail.as_str() } else { "" }
            );
        }
    }
    o.push_str("</tbody>\n</table>\n");
}

fn file_cells(f: &FileEntry) -> String {
    format!(
        "<td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"h m\">{}</td>",
        link(&f.path),
        num(f.rows),
        f.bytes,
        html(&f.sha256)
    )
}

fn sessions(o: &mut String, ov: &Overview, extract: Option<&Manifest>) {
    let _ = write!(
        o,
        "<h2 id=\"sessions\">ETW sessions ({})</h2>\n<table id=\"sessions-table\">\n\
         <thead><tr><th>id</th><th>name</th><th>clock</th><th>buffer size</th>\
         <th>buffers</th><th>lost</th><th>started (UTC)</th><th>log file</th>\
         <th>.etl file</th></tr></thead>\n<tbody>\n",
        ov.sessions.len()
    );
    for s in &ov.sessions {
        let file = extract
            .and_then(|m| m.sessions.iter().find(|f| Some(f.logger_id) == s.logger_id))
            .map_or_else(|| "-".to_string(), |f| link(&format!("etl/{}", f.file)));
        let _ = writeln!(
            o,
            "<tr><td class=\"n\">{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td><td>{file}</td></tr>",
            num(s.logger_id),
            html(&crate::text::shown_or(s.name.as_ref(), "(unknown)")),
            html(s.clock.as_deref().unwrap_or("-")),
            s.buffer_size
                .map_or_else(|| "-".to_string(), |b| format!("{b:#x}")),
            s.buffers_found,
            num(s.events_lost),
            html(s.start_time.as_deref().unwrap_or("-")),
            html(&crate::text::shown_or(s.log_file.as_ref(), "-")),
        );
    }
    o.push_str("</tbody>\n</table>\n");
}

fn switches(o: &mut String, ov: &Overview, c: &Collection) {
    let sources: Vec<String> = ov
        .switches_by_source
        .iter()
        .map(|(k, v)| format!("{v} {k}"))
        .collect();
    o.push_str("<h2 id=\"switches\">Context switches</h2>\n");
    if sources.is_empty() {
        o.push_str("<p id=\"switches-none\">None found (the warnings say why).</p>\n");
        return;
    }
    let _ = writeln!(
        o,
        "<p>{} switches (records: {}); the last before the dump, per CPU:</p>",
        ov.switches,
        html(&sources.join(", "))
    );
    let chart = c.artefacts.iter().any(|a| {
        a.name == "cswitch"
            && a.status == Status::Ok
            && a.files.iter().any(|f| f.path == "cswitch.svg")
    });
    o.push_str(
        "<table id=\"switches-table\">\n<thead><tr><th>CPU</th><th>time (UTC)</th>\
         <th>from</th><th>to</th><th>wait reason</th><th>source</th></tr></thead>\n<tbody>\n",
    );
    for (cpu, rows) in &ov.last_switches {
        for r in rows {
            let _ = writeln!(
                o,
                "<tr><td class=\"n\">{}</td><td class=\"m\">{}</td><td>{}</td><td>{}</td>\
                 <td>{}</td><td>{}</td></tr>",
                if *cpu == u64::MAX {
                    "?".to_string()
                } else {
                    cpu.to_string()
                },
                html(&switch_time(r)),
                html(&thread(Some(r.old_tid), &r.old_process)),
                html(&thread(r.new_tid, &r.new_process)),
                html(&crate::text::shown_or(r.old_wait_reason.as_ref(), "")),
                html(&r.source_label())
            );
        }
    }
    o.push_str("</tbody>\n</table>\n");
    if chart {
        o.push_str(
            "<p><a href=\"cswitch.svg\"><img class=\"chart\" src=\"cswitch.svg\" \
             alt=\"the per-CPU lane chart of the context switches (cswitch.svg)\"></a></p>\n",
        );
    }
}

fn warnings(o: &mut String, all: &[CollectedWarning]) {
    let _ = writeln!(
        o,
        "<h2 id=\"warnings\">Warnings and notes ({})</h2>",
        all.len()
    );
    if all.is_empty() {
        o.push_str("<p>None.</p>\n");
        return;
    }
    o.push_str(
        "<table id=\"warnings-table\">\n<thead><tr><th>level</th><th>kind</th>\
         <th>artefacts</th><th>concerns</th><th>message</th></tr></thead>\n<tbody>\n",
    );
    for x in all.iter().take(MAX_PAGE_WARNINGS) {
        let w = &x.warning;
        let level = if w.is_note() { "note" } else { "warning" };
        let mut at = Vec::new();
        if let Some(l) = w.logger_id {
            at.push(format!("logger {l}"));
        }
        if let Some(s) = w.slot {
            at.push(format!("slot {s}"));
        }
        if let Some(c) = w.cpu {
            at.push(format!("CPU {c}"));
        }
        if let Some(a) = w.address {
            at.push(a.to_string());
        }
        if let Some(f) = &w.field {
            at.push(f.clone());
        }
        let kind = serde_json::to_value(w.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let _ = writeln!(
            o,
            "<tr><td class=\"{level}\">{level}</td><td>{}</td><td>{}</td>\
             <td class=\"m\">{}</td><td>{}</td></tr>",
            html(&kind),
            html(&x.artefacts.join(", ")),
            html(&at.join(", ")),
            html(&w.message)
        );
    }
    o.push_str("</tbody>\n</table>\n");
    if all.len() > MAX_PAGE_WARNINGS {
        let _ = writeln!(
            o,
            "<p id=\"warnings-more\">{} more in <a href=\"warnings.jsonl\">warnings.jsonl</a>.</p>",
            all.len() - MAX_PAGE_WARNINGS
        );
    }
}
