//! A physical-memory layout handed over by a host framework (`--layout FILE`): where each
//! run of physical memory lies in a file, and optionally the machine (architecture and
//! page-table root) the host found. The Volatility 3 plugins (plugins/volatility3) write one
//! for any image whose physical layer is a file placed by linear segments (raw, LiME, ELF
//! core, VMware, QEMU, ...), so that etwdump reads exactly the memory Volatility reads.
//!
//! The file is JSON, at most `MAX_LAYOUT_BYTES`:
//!
//! ```json
//! {"etwdump_layout": 1,
//!  "source": "volatility3 2.28.2: Elf64Layer over FileLayer",
//!  "ranges": [{"start": 0, "size": 655360, "file_offset": 4096}, ...],
//!  "arch": "x64", "dtb": 1744896}
//! ```
//!
//! `ranges` are physical runs (page aligned, not overlapping, at most
//! `image::MAX_RANGES`); `arch` is `x64`, `x86-pae` or `x86`, and
//! with `dtb` (the kernel's page-table root; for PAE the PDPT) replaces the search for them.
//! A given root is used only when KUSER_SHARED_DATA read through it looks like Windows
//! (checked by the caller, [`crate::kernel::discover::open_with_layout`]); otherwise the search runs
//! and a warning says why. Everything from the file is bounded before use.

use super::error::LayoutError;
use super::image::{ImageFormat, PhysImage, PhysRange, MAX_RANGES};
use super::Arch;
use crate::text::Untrusted;
use serde::Deserialize;

/// Largest layout file read (a 2^16-range layout is about 4 MiB of JSON).
pub(crate) const MAX_LAYOUT_BYTES: u64 = 16 << 20;
/// The layout format this build reads.
pub(crate) const LAYOUT_VERSION: u64 = 1;

/// A parsed, bounded layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Who made it (shown by `info`, escaped: text from the file).
    pub source: Untrusted,
    pub ranges: Vec<PhysRange>,
    /// The machine the host found, when it says.
    pub machine: Option<(Arch, u64)>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    etwdump_layout: u64,
    #[serde(default)]
    source: Option<String>,
    ranges: Vec<RawRange>,
    #[serde(default)]
    arch: Option<String>,
    #[serde(default)]
    dtb: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRange {
    start: u64,
    size: u64,
    file_offset: u64,
}

impl Layout {
    /// Parse a layout file's bytes; the error names the field that is wrong.
    pub fn parse(bytes: &[u8]) -> Result<Layout, LayoutError> {
        if bytes.len() as u64 > MAX_LAYOUT_BYTES {
            return Err(LayoutError::TooLarge {
                len: bytes.len(),
                max: MAX_LAYOUT_BYTES,
            });
        }
        let raw: Raw = serde_json::from_slice(bytes)
            .map_err(|e| LayoutError::NotJson(Untrusted::new(e.to_string()).truncated(200)))?;
        if raw.etwdump_layout != LAYOUT_VERSION {
            return Err(LayoutError::Version {
                found: raw.etwdump_layout,
                supported: LAYOUT_VERSION,
            });
        }
        if raw.ranges.len() > MAX_RANGES {
            return Err(LayoutError::TooManyRanges {
                count: raw.ranges.len(),
                max: MAX_RANGES,
            });
        }
        let machine = match (raw.arch.as_deref(), raw.dtb) {
            (None, None) => None,
            (Some(a), Some(dtb)) => {
                let arch = match a {
                    "x64" => Arch::X64,
                    "x86-pae" => Arch::X86 { pae: true },
                    "x86" => Arch::X86 { pae: false },
                    other => return Err(LayoutError::Arch(Untrusted::from(other).truncated(40))),
                };
                let align = if arch == (Arch::X86 { pae: true }) {
                    0x20
                } else {
                    0x1000
                };
                if dtb % align != 0 || dtb >= 1 << 52 {
                    return Err(LayoutError::Dtb { dtb, align });
                }
                Some((arch, dtb))
            }
            _ => return Err(LayoutError::Machine),
        };
        let source =
            Untrusted::new(raw.source.unwrap_or_else(|| "a layout file".into())).truncated(200);
        Ok(Layout {
            source,
            ranges: raw
                .ranges
                .into_iter()
                .map(|r| PhysRange {
                    start: r.start,
                    size: r.size,
                    file_offset: r.file_offset,
                })
                .collect(),
            machine,
        })
    }

    /// Read and parse a layout file, reading at most `MAX_LAYOUT_BYTES` + 1 bytes.
    pub fn read(path: &std::path::Path) -> Result<Layout, LayoutError> {
        use std::io::Read;
        let f = std::fs::File::open(path).map_err(|e| LayoutError::Io(e.to_string()))?;
        let mut bytes = Vec::new();
        f.take(MAX_LAYOUT_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| LayoutError::Io(e.to_string()))?;
        Layout::parse(&bytes)
    }
}

/// A host framework's layout (`--layout`): the ranges it gave over the file; no signature
/// is looked for (chosen by the caller, not detected).
pub(crate) fn open_hosted(
    input: super::format::Input<'_>,
    layout: &Layout,
) -> Result<super::format::Opened, super::DumpError> {
    let mut img = PhysImage::new(ImageFormat::Hosted, layout.ranges.clone()).map_err(|reason| {
        super::DumpError::BadImage {
            format: "layout",
            reason,
        }
    })?;
    img.metadata = Some(layout.source.clone());
    super::image::opened(input.backing, input.file, img, 0, input.opts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_bounds() {
        let l = Layout::parse(
            br#"{"etwdump_layout":1,"source":"t","ranges":[{"start":4096,"size":8192,"file_offset":0}],"arch":"x86-pae","dtb":4128}"#,
        )
        .unwrap();
        assert_eq!(
            l.ranges,
            vec![PhysRange {
                start: 4096,
                size: 8192,
                file_offset: 0
            }]
        );
        assert_eq!(l.machine, Some((Arch::X86 { pae: true }, 4128)));
        for (bad, says) in [
            (r#"{"etwdump_layout":2,"ranges":[]}"#, "etwdump_layout 2"),
            (
                r#"{"etwdump_layout":1,"ranges":[],"arch":"x64"}"#,
                "give both",
            ),
            (
                r#"{"etwdump_layout":1,"ranges":[],"arch":"x64","dtb":4097}"#,
                "dtb: 0x1001",
            ),
            (
                r#"{"etwdump_layout":1,"ranges":[],"arch":"arm\u001b","dtb":0}"#,
                "arm\\u{1b}",
            ),
            (
                r#"{"etwdump_layout":1,"ranges":[{"start":0,"size":1}],"x":0}"#,
                "not a layout",
            ),
        ] {
            let e = Layout::parse(bad.as_bytes()).unwrap_err();
            assert!(e.to_string().contains(says), "{bad}: {e}");
        }
        let many = format!(
            r#"{{"etwdump_layout":1,"ranges":[{}]}}"#,
            vec![r#"{"start":0,"size":0,"file_offset":0}"#; MAX_RANGES + 1].join(",")
        );
        assert_eq!(
            Layout::parse(many.as_bytes()).unwrap_err(),
            LayoutError::TooManyRanges {
                count: MAX_RANGES + 1,
                max: MAX_RANGES
            }
        );
    }
}
