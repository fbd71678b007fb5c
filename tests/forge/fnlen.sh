#!/bin/sh
# List the forge's functions longer than N lines (default 150), longest first:
#   tests/forge/fnlen.sh [N]
# Relies on rustfmt's layout (run `cargo fmt` first): a `fn` item starting at indentation I
# ends at the next line that is exactly I spaces and `}`. Counts the lines from the `fn` line
# (attributes and doc comments not counted) to the closing brace, inclusive.
# Covers src/, tests/ and examples/ of tests/forge. Exit status 1 when any function is longer.
max=${1:-150}
dir=$(dirname "$0")
find "$dir/src" "$dir/tests" "$dir/examples" -name '*.rs' 2>/dev/null | sort | while read -r f; do
    awk -v max="$max" -v file="$f" '
    function report(i) {
        n = NR - start[i] + 1
        if (n > max) printf "%6d %s:%d %s\n", n, file, start[i], name[i]
    }
    {
        # Close open functions whose closing brace is this line.
        for (i = depth; i >= 1; i--) {
            if ($0 == ind[i] "}") { report(i); depth = i - 1; break }
        }
        if (match($0, /^ *((pub(\([a-z]+\))? )?(const |unsafe |async |extern "C" )*)fn [A-Za-z_0-9]+/)) {
            line = $0
            if (line ~ /;$/ || line ~ /\{\}$/ || line ~ /\}$/) next
            sp = line; sub(/[^ ].*/, "", sp)
            nm = line; sub(/^ *((pub(\([a-z]+\))? )?(const |unsafe |async |extern "C" )*)fn /, "", nm)
            sub(/[^A-Za-z_0-9].*/, "", nm)
            depth++; ind[depth] = sp; start[depth] = NR; name[depth] = nm
        }
    }' "$f"
done | sort -rn | { out=$(cat); [ -n "$out" ] && { echo "$out"; exit 1; }; echo "no function over $max lines"; exit 0; }
