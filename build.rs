//! Build step: decompress the built-in corpus table (src/symbols/builtin/corpus.json.xz, 19 KB
//! in the repository) into OUT_DIR, so the binary embeds plain JSON and a run does not pay the
//! xz decompression (about 1.5 ms) on every start.

use std::io::Read;

fn main() {
    let src = "src/symbols/builtin/corpus.json.xz";
    println!("cargo:rerun-if-changed={src}");
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let xz = std::fs::read(src).unwrap_or_else(|e| panic!("{src}: {e}"));
    let mut json = Vec::new();
    xz2::read::XzDecoder::new(&xz[..])
        .take(16 << 20)
        .read_to_end(&mut json)
        .unwrap_or_else(|e| panic!("{src}: {e}"));
    std::fs::write(out.join("corpus.json"), json).expect("write corpus.json");
}
