//! Secondary dump data after a triage dump's SizeOfDump (crash-dump-format.md §1.3c; WDK
//! `_DUMP_BLOB_FILE_HEADER` / `_DUMP_BLOB_HEADER`): a file header `{"Dump" "Blob", u32
//! HeaderSize, u32 BuildNumber}`, then blobs `{u32 HeaderSize; GUID Tag; u32 DataSize; u32
//! PrePad; u32 PostPad}`, each followed by PrePad bytes, DataSize bytes of data and PostPad
//! bytes (measured on the real triage dump: 20 blobs end exactly at the end of the file).
//!
//! Every length comes from the file and is checked against it; a blob that does not fit ends
//! the walk with a warning naming its offset.

use crate::bytes::{guid_text, LeBytes};
use crate::warning::{Warning, WarningKind};
use serde::Serialize;

/// Most blobs accepted (real dumps: 20-40).
const MAX_BLOBS: usize = 4096;

/// One blob.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Blob {
    pub index: usize,
    /// The tag GUID, lower case, no braces.
    pub tag: String,
    pub header_offset: u64,
    pub data_offset: u64,
    pub data_size: u32,
    pub pre_pad: u32,
    pub post_pad: u32,
}

/// The secondary data region.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SecondaryData {
    /// File offset of the region (SizeOfDump).
    pub offset: u64,
    pub build_number: Option<u32>,
    pub blobs: Vec<Blob>,
    pub warnings: Vec<Warning>,
}

impl SecondaryData {
    /// Walk the region at `start` (SizeOfDump). An empty region (nothing after SizeOfDump) has
    /// no blobs and no warning.
    pub fn parse(file: &[u8], start: u64) -> SecondaryData {
        let mut out = SecondaryData {
            offset: start,
            ..SecondaryData::default()
        };
        let Ok(start) = usize::try_from(start) else {
            return out;
        };
        if start >= file.len() {
            return out;
        }
        if file.bytes_at(start, 8) != Some(b"DumpBlob") {
            out.warnings.push(Warning::new(
                WarningKind::Decode,
                format!("secondary data at file offset {start:#x}: no \"DumpBlob\" signature"),
            ));
            return out;
        }
        let Some(hsize) = file.u32_at(start + 8) else {
            out.warnings.push(Warning::new(
                WarningKind::Decode,
                format!(
                "secondary data at file offset {start:#x}: header cut off by the end of the file"
            ),
            ));
            return out;
        };
        out.build_number = file.u32_at(start + 12);
        if !(0x10..=0x1000).contains(&hsize) {
            out.warnings.push(Warning::new(
                WarningKind::Decode,
                format!(
                "secondary data at file offset {start:#x}: HeaderSize {hsize:#x} is implausible"
            ),
            ));
            return out;
        }
        let mut o = start as u64 + u64::from(hsize);
        let end = file.len() as u64;
        while o < end {
            if out.blobs.len() >= MAX_BLOBS {
                out.warnings.push(Warning::new(
                    WarningKind::Decode,
                    format!("secondary data: more than {MAX_BLOBS} blobs; stopped"),
                ));
                break;
            }
            let i = out.blobs.len();
            let at = o as usize;
            let (Some(hs), Some(tag), Some(size), Some(pre), Some(post)) = (
                file.u32_at(at),
                file.bytes_at(at + 4, 16),
                file.u32_at(at + 20),
                file.u32_at(at + 24),
                file.u32_at(at + 28),
            ) else {
                out.warnings.push(Warning::new(WarningKind::Decode, format!(
                    "blob {i} at file offset {o:#x}: header cut off by the end of the file ({end:#x})"
                )));
                break;
            };
            if !(0x20..=0x1000).contains(&hs) {
                out.warnings.push(Warning::new(
                    WarningKind::Decode,
                    format!(
                    "blob {i} at file offset {o:#x}: HeaderSize {hs:#x} is implausible; stopped"
                ),
                ));
                break;
            }
            let data = o + u64::from(hs) + u64::from(pre);
            let next = data + u64::from(size) + u64::from(post);
            if data + u64::from(size) > end {
                out.warnings.push(Warning::new(WarningKind::Decode, format!(
                    "blob {i} at file offset {o:#x}: DataSize {size:#x} (data at {data:#x}) runs past the end of the file ({end:#x}); its first {:#x} bytes are read, the walk stops",
                    end.saturating_sub(data)
                )));
                if data < end {
                    out.blobs.push(Blob {
                        index: i,
                        tag: guid_text(tag.try_into().unwrap_or(&[0; 16])),
                        header_offset: o,
                        data_offset: data,
                        data_size: (end - data) as u32,
                        pre_pad: pre,
                        post_pad: post,
                    });
                }
                break;
            }
            out.blobs.push(Blob {
                index: i,
                tag: guid_text(tag.try_into().unwrap_or(&[0; 16])),
                header_offset: o,
                data_offset: data,
                data_size: size,
                pre_pad: pre,
                post_pad: post,
            });
            o = next;
        }
        out
    }

    /// The first blob with `tag`.
    pub fn find(&self, tag: &str) -> Option<&Blob> {
        self.blobs.iter().find(|b| b.tag.eq_ignore_ascii_case(tag))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blob(tag: [u8; 16], data: &[u8], pre: u32, post: u32) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend(0x20u32.to_le_bytes());
        v.extend(tag);
        v.extend((data.len() as u32).to_le_bytes());
        v.extend(pre.to_le_bytes());
        v.extend(post.to_le_bytes());
        v.extend(vec![0xAA; pre as usize]);
        v.extend(data);
        v.extend(vec![0xBB; post as usize]);
        v
    }

    #[test]
    fn walks_blobs_and_reports_lies() {
        let mut f = vec![0u8; 0x40];
        f.extend(b"DumpBlob");
        f.extend(0x10u32.to_le_bytes());
        f.extend(0xF000_4A61u32.to_le_bytes());
        f.extend(blob([1; 16], b"hello", 3, 3));
        f.extend(blob([2; 16], b"", 0, 0));
        let s = SecondaryData::parse(&f, 0x40);
        assert!(s.warnings.is_empty(), "{:?}", s.warnings);
        assert_eq!(s.build_number, Some(0xF000_4A61));
        assert_eq!(s.blobs.len(), 2);
        assert_eq!(s.blobs[0].header_offset, 0x50);
        assert_eq!(s.blobs[0].data_offset, 0x50 + 0x20 + 3);
        assert_eq!(&f[s.blobs[0].data_offset as usize..][..5], b"hello");
        assert_eq!(s.blobs[1].header_offset, 0x50 + 0x20 + 3 + 5 + 3);
        assert_eq!(s.blobs[1].tag, "02020202-0202-0202-0202-020202020202");
        // A DataSize that lies.
        let mut g = f.clone();
        let o = 0x50 + 20;
        g[o..o + 4].copy_from_slice(&0x7FFF_FFFFu32.to_le_bytes());
        let s = SecondaryData::parse(&g, 0x40);
        assert_eq!(s.blobs.len(), 1);
        assert_eq!(s.blobs[0].data_size as usize, g.len() - 0x73);
        assert!(s.warnings[0]
            .message
            .contains("blob 0 at file offset 0x50: DataSize 0x7fffffff"));
        // Cut inside the second header.
        let s = SecondaryData::parse(&f[..f.len() - 4], 0x40);
        assert_eq!(s.blobs.len(), 1);
        assert!(
            s.warnings[0].message.contains("header cut off"),
            "{:?}",
            s.warnings
        );
        // Nothing after SizeOfDump; no signature.
        assert!(SecondaryData::parse(&f, f.len() as u64).warnings.is_empty());
        assert!(SecondaryData::parse(&f, 0).warnings[0]
            .message
            .contains("no \"DumpBlob\""));
    }
}
