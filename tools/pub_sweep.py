#!/usr/bin/env python3
"""Make pub(crate) every pub item of the library that nothing outside it names, keeping
re-exported items and those public interfaces need; iterate with cargo check.
usage: tools/pub_sweep.py REPO [NAME...]  (NAMEs stay pub: the extension points; CARGO_TARGET_DIR
honoured). Run from a clean tree; review the diff; then cargo fmt and the tests."""
import os, re, sys, subprocess, json
repo = sys.argv[1]
KEEP = set(sys.argv[2:])
ext_dirs = ['src/main.rs', 'src/cli', 'tests', 'benches', 'crates', 'fuzz/src', 'fuzz/fuzz_targets', 'examples', 'plugins']
def ext_words():
    txt = []
    for d in ext_dirs:
        p = os.path.join(repo, d)
        if os.path.isfile(p): txt.append(open(p).read())
        for root, _, files in os.walk(p):
            if '/target' in root: continue
            for f in files:
                if f.endswith('.rs'): txt.append(open(os.path.join(root, f)).read())
    return set(re.findall(r'[A-Za-z_][A-Za-z0-9_]*', '\n'.join(txt)))
words = ext_words()
item = re.compile(r'^(\s*)pub (fn|struct|enum|trait|const|static|type|mod) (?:async )?(?:unsafe )?([A-Za-z_][A-Za-z0-9_]*)')
changed = {}  # name -> [(path, lineno)]
for root, _, files in os.walk(os.path.join(repo, 'src')):
    if root.startswith(os.path.join(repo, 'src/cli')): continue
    for f in files:
        if not f.endswith('.rs'): continue
        path = os.path.join(root, f)
        if path.endswith('src/main.rs'): continue
        lines = open(path).read().split('\n')
        hit = False
        for i, l in enumerate(lines):
            m = item.match(l)
            if m and m.group(3) not in words and m.group(3) not in KEEP:
                lines[i] = l.replace('pub ', 'pub(crate) ', 1)
                changed.setdefault(m.group(3), []).append((path, i))
                hit = True
        if hit: open(path, 'w').write('\n'.join(lines))
def revert(name):
    for path, i in changed.pop(name, []):
        lines = open(path).read().split('\n')
        lines[i] = lines[i].replace('pub(crate) ', 'pub ', 1)
        open(path, 'w').write('\n'.join(lines))
print(f"made pub(crate): {sum(len(v) for v in changed.values())} items", file=sys.stderr)
for round_ in range(12):
    r = subprocess.run(['cargo', 'check', '--workspace', '--all-targets', '--message-format', 'json'],
                       cwd=repo, capture_output=True, text=True)
    names = set()
    for line in r.stdout.splitlines():
        try: msg = json.loads(line)
        except ValueError: continue
        if msg.get('reason') != 'compiler-message': continue
        m = msg['message']
        text = m.get('message', '')
        code = (m.get('code') or {}).get('code', '')
        if code in ('E0364', 'E0365', 'E0603', 'E0624', 'E0616') or 'private' in text or 'more private' in text:
            for n in re.findall(r'`(?:[A-Za-z_0-9]+::)*([A-Za-z_][A-Za-z0-9_]*)(?:<[^`]*>)?`', text):
                if n in changed: names.add(n)
    if not names:
        break
    print(f"round {round_}: reverting {len(names)}: {sorted(names)}", file=sys.stderr)
    for n in names: revert(n)
print(f"kept pub(crate): {sum(len(v) for v in changed.values())} items", file=sys.stderr)
r = subprocess.run(['cargo', 'check', '--workspace', '--all-targets', '--message-format', 'short'],
                   cwd=repo, capture_output=True, text=True)
print('\n'.join(l for l in r.stderr.splitlines() if re.match(r'^(src|tests|crates|benches|examples)/', l)))
