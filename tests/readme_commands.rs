//! Every `etwdump` command the README shows runs as shown (issue 31: "every README command
//! runs in a test"): each line of its ```sh blocks that starts with `etwdump`, with `$S` and
//! `$P` as the README defines them, output files in a scratch directory. Commands on a file the
//! repository cannot ship (`MEMORY.raw`) run on the sample instead, and `hiberfil.sys` is a
//! hibernation file the forge writes of the machine of the fixture `$P` names; `vol` and `cargo` lines
//! are the other tools' and the build's. The first look's output shown in the README is
//! checked against the real output line by line (the lines it shows, `...` standing for the
//! ones it leaves out).

mod common;

use common::etwdump;
use std::path::PathBuf;

const README: &str = include_str!("../README.md");
const SAMPLE: &str = "tests/data/sample-x64-etw.dmp";
const PDB: &str = "tests/fixtures/x64-19041/ntkrnlmp.pdb";

/// The README's fenced blocks of language `lang`, each as its lines.
fn blocks(lang: &str) -> Vec<Vec<&'static str>> {
    let mut out = Vec::new();
    let mut cur: Option<Vec<&str>> = None;
    for line in README.lines() {
        match (&mut cur, line.strip_prefix("```")) {
            (None, Some(l)) if l == lang => cur = Some(Vec::new()),
            (Some(_), Some("")) => out.push(cur.take().unwrap()),
            (Some(b), _) => b.push(line),
            _ => {}
        }
    }
    out
}

/// A README command line as arguments: comment cut, `$S`/`$P` expanded, shell redirection
/// (`> FILE`) turned into a file in `scratch`, paths of outputs moved into `scratch`.
fn args_of(line: &str, scratch: &std::path::Path) -> Option<(Vec<String>, Option<PathBuf>)> {
    let hiberfil = scratch.join("hiberfil.sys");
    let line = line.split(" #").next().unwrap().trim();
    let rest = line.strip_prefix("etwdump")?;
    let mut args = Vec::new();
    let mut redirect = None;
    let mut words = rest.split_whitespace().peekable();
    while let Some(w) = words.next() {
        match w {
            "$S" | "MEMORY.DMP" | "MEMORY.raw" => args.push(SAMPLE.to_string()),
            "hiberfil.sys" => args.push(hiberfil.to_string_lossy().into_owned()),
            "$P" => {
                args.push("--pdb".into());
                args.push(PDB.into());
            }
            ">" => redirect = words.next().map(|f| scratch.join(f)),
            "-o" | "--svg" => {
                args.push(w.into());
                let target = words.next().expect("an output path");
                args.push(scratch.join(target).to_string_lossy().into_owned());
            }
            _ => args.push(w.to_string()),
        }
    }
    Some((args, redirect))
}

#[test]
fn every_readme_command_runs_on_the_sample() {
    let scratch = std::env::temp_dir().join(format!("etwdump-readme-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).unwrap();
    let root = env!("CARGO_MANIFEST_DIR");
    std::env::set_current_dir(root).unwrap();
    // A hibernation file of a forged 19041 machine (the fixture whose PDB `$P` gives).
    let c = etwdump_forge::Config::from_fixture(&common::fixture("x64-19041")).with_standard_etw();
    etwdump_forge::forge(&c)
        .write_hiberfil(
            &scratch.join("hiberfil.sys"),
            &etwdump_forge::HiberSpec::new(
                etwdump_forge::HiberVersion::Win10_1809,
                etwdump_forge::HiberCodec::Huffman,
                1,
            ),
        )
        .unwrap();
    let mut ran = 0;
    let mut collected = None;
    for block in blocks("sh") {
        for line in block {
            let Some((args, redirect)) = args_of(line, &scratch) else {
                continue;
            };
            let a: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = etwdump(&a);
            assert!(
                out.status.success(),
                "README: `{line}` failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            if a.first() == Some(&"collect") {
                collected = Some(String::from_utf8_lossy(&out.stdout).into_owned());
            }
            // Help, install and man-page lines aside, every command prints or writes something.
            match redirect {
                Some(f) => std::fs::write(&f, &out.stdout).unwrap(),
                None => assert!(
                    !out.stdout.is_empty() || a.contains(&"--svg"),
                    "README: `{line}` printed nothing"
                ),
            }
            ran += 1;
        }
    }
    assert_eq!(
        ran, 16,
        "README commands found (update the count when the README changes)"
    );
    // What the -o and --svg lines promise exists.
    assert!(scratch.join("etl-out/manifest.json").is_file());
    assert!(scratch.join("carved/manifest.json").is_file());
    assert!(std::fs::read_to_string(scratch.join("cpus.svg"))
        .unwrap()
        .starts_with("<svg"));
    // collect: the lines the README shows are lines it prints (the page's path at the end).
    assert!(scratch.join("case1/collect.json").is_file());
    let printed = collected.expect("the README runs collect");
    let shown = blocks("text")
        .into_iter()
        .find(|b| b.iter().any(|l| l.starts_with("info      info.json")))
        .expect("the README shows collect's output");
    for l in shown.iter().filter(|l| **l != "...") {
        assert!(
            printed
                .lines()
                .any(|p| p == *l || p.ends_with(&format!("/{l}"))),
            "README: collect's line `{l}` is not in its output:\n{printed}"
        );
    }
    let _ = std::fs::remove_dir_all(&scratch);
}

#[test]
fn the_first_look_shows_what_the_sample_gives() {
    std::env::set_current_dir(env!("CARGO_MANIFEST_DIR")).unwrap();
    let out = etwdump(&["overview", SAMPLE, "--pdb", PDB]);
    assert!(out.status.success());
    let real = String::from_utf8(out.stdout).unwrap();
    let real: Vec<&str> = real.lines().collect();
    // The first ```text block is the overview's output; each shown line is a real line, in
    // order ("..." skips lines).
    let shown = &blocks("text")[0];
    let mut at = 0;
    for line in shown {
        if line.trim() == "..." {
            continue;
        }
        let found = real[at..]
            .iter()
            .position(|r| r == line)
            .unwrap_or_else(|| panic!("README shows a line the overview does not print: {line}"));
        at += found + 1;
    }
}
