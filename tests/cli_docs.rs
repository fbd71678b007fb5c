//! Shell completions and the manual page (issue 16) are generated from the same clap
//! definitions as `--help`: every command and each of its long options appears in them.

use std::process::Command;

fn etwdump(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_etwdump"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The commands `etwdump --help` lists (without `help`).
fn commands() -> Vec<String> {
    let help = etwdump(&["--help"]);
    let mut in_list = false;
    let mut v = Vec::new();
    for line in help.lines() {
        if line.starts_with("Commands:") {
            in_list = true;
            continue;
        }
        if in_list {
            let Some(name) = line
                .strip_prefix("  ")
                .and_then(|l| l.split_whitespace().next())
            else {
                break;
            };
            if name != "help" {
                v.push(name.to_string());
            }
        }
    }
    v
}

/// The long options `etwdump CMD --help` lists.
fn long_options(cmd: &str) -> Vec<String> {
    etwdump(&[cmd, "--help"])
        .lines()
        .filter_map(|l| {
            let t = l.trim_start();
            let t = t
                .strip_prefix("-")
                .and_then(|t| t.split_once(", ").map(|x| x.1))
                .unwrap_or(t);
            t.strip_prefix("--")
                .map(|o| o.split([' ', '=']).next().unwrap().to_string())
        })
        .filter(|o| o != "help")
        .collect()
}

#[test]
fn completions_name_every_command() {
    let cmds = commands();
    assert!(cmds.len() >= 12, "{cmds:?}");
    for shell in ["bash", "zsh", "fish", "powershell", "elvish"] {
        let script = etwdump(&["completions", shell]);
        for c in &cmds {
            assert!(script.contains(c.as_str()), "{shell}: no {c}");
        }
        // Every option of `cswitch` is completed.
        for o in long_options("cswitch") {
            assert!(script.contains(&o), "{shell}: no --{o}");
        }
    }
    // The bash script is valid bash.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("etwdump.bash");
    std::fs::write(&p, etwdump(&["completions", "bash"])).unwrap();
    let st = Command::new("bash").arg("-n").arg(&p).status().unwrap();
    assert!(st.success());
}

#[test]
fn manpage_has_every_command_and_option() {
    let man = etwdump(&["manpage"]);
    assert!(man.contains(".TH etwdump 1"));
    let cmds = commands();
    // One NAME section for the tool, one per command.
    assert_eq!(man.matches(".SH NAME").count(), 1 + cmds.len());
    for c in &cmds {
        assert!(
            man.contains(&format!("etwdump\\-{c}")),
            "no section for {c}"
        );
        for o in long_options(c) {
            let roff = format!("\\-\\-{}", o.replace('-', "\\-"));
            assert!(man.contains(&roff), "{c}: no {roff}");
        }
    }
}
