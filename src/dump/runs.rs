//! DumpType 1 (full): the PHYSICAL_MEMORY_DESCRIPTOR in the header lists runs of physical
//! pages; page data is stored run after run right after the header (crash-dump-format.md §1.2).

use super::format::{self, Format};
use super::header::{DumpHeader, DumpType, PAGE_FILL, PHYSICAL_MEMORY_BLOCK_SIZE};
use super::DumpError;
use crate::addr::{Pfn, PAGE_SIZE};
use crate::bytes::LeBytes;
use crate::warning::{Warning, WarningKind};

/// One run: `count` pages from `base`, stored from file page index `file_page`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    pub base: Pfn,
    pub count: u64,
    pub file_page: u64,
}

/// The run list of a full dump, sorted by base PFN.
#[derive(Clone, Debug)]
pub struct RunList {
    runs: Vec<Run>,
    data_offset: u64,
    total_pages: u64,
    /// The NumberOfPages field, which should equal the sum of the run lengths.
    pub declared_pages: u64,
}

impl RunList {
    /// Parse the descriptor. `file` is the whole dump.
    pub fn parse(file: &[u8], header: &DumpHeader) -> Result<RunList, DumpError> {
        let wide = header.arch.is_64bit();
        let off = header.physical_memory_block_offset;
        let block = file
            .bytes_at(off, PHYSICAL_MEMORY_BLOCK_SIZE)
            .ok_or_else(|| {
                DumpError::BadRunList("PhysicalMemoryBlock is outside the file".into())
            })?;
        let nruns = block.u32_at(0).unwrap_or(0);
        if nruns == PAGE_FILL {
            return Err(DumpError::BadRunList(format!(
                "NumberOfRuns at file offset {off:#x} holds the \"PAGE\" fill: this full dump has no run list"
            )));
        }
        let (pages_off, runs_off, run_size) = if wide { (8, 16, 16) } else { (4, 8, 8) };
        let declared_pages = if wide {
            block.u64_at(pages_off).unwrap_or(0)
        } else {
            u64::from(block.u32_at(pages_off).unwrap_or(0))
        };
        let max_runs = (PHYSICAL_MEMORY_BLOCK_SIZE - runs_off) / run_size;
        if nruns as usize > max_runs {
            return Err(DumpError::BadRunList(format!(
                "NumberOfRuns at file offset {off:#x} is {nruns}, but at most {max_runs} runs fit in the {PHYSICAL_MEMORY_BLOCK_SIZE}-byte PhysicalMemoryBlock"
            )));
        }
        let mut raw = Vec::with_capacity(nruns as usize);
        for i in 0..nruns as usize {
            let r = runs_off + i * run_size;
            let (base, count) = if wide {
                (
                    block.u64_at(r).unwrap_or(0),
                    block.u64_at(r + 8).unwrap_or(0),
                )
            } else {
                (
                    u64::from(block.u32_at(r).unwrap_or(0)),
                    u64::from(block.u32_at(r + 4).unwrap_or(0)),
                )
            };
            if base.checked_add(count).is_none_or(|end| end > (1 << 52)) {
                return Err(DumpError::BadRunList(format!(
                    "run {i} (file offset {:#x}) has BasePage {base:#x} and PageCount {count:#x}: beyond any physical address",
                    off + r
                )));
            }
            raw.push((i, base, count));
        }
        // Pages are stored in descriptor order; file page index follows that order.
        let mut runs = Vec::with_capacity(raw.len());
        let mut file_page = 0u64;
        for &(_, base, count) in &raw {
            runs.push(Run {
                base: Pfn::new(base),
                count,
                file_page,
            });
            file_page = file_page
                .checked_add(count)
                .ok_or_else(|| DumpError::BadRunList("page counts overflow".into()))?;
        }
        let total_pages = file_page;
        runs.retain(|r| r.count > 0);
        runs.sort_by_key(|r| r.base);
        for w in runs.windows(2) {
            if w[0].base.get() + w[0].count > w[1].base.get() {
                return Err(DumpError::BadRunList(format!(
                    "runs overlap: PFNs {:#x}+{:#x} and {:#x}+{:#x}",
                    w[0].base.get(),
                    w[0].count,
                    w[1].base.get(),
                    w[1].count
                )));
            }
        }
        Ok(RunList {
            runs,
            data_offset: header.header_size,
            total_pages,
            declared_pages,
        })
    }

    /// File offset of the page, if a run holds it.
    pub fn file_offset(&self, pfn: Pfn) -> Option<u64> {
        let i = self
            .runs
            .partition_point(|r| r.base <= pfn)
            .checked_sub(1)?;
        let r = &self.runs[i];
        let idx = pfn.get() - r.base.get();
        (idx < r.count).then(|| self.data_offset + (r.file_page + idx) * PAGE_SIZE)
    }

    /// File offset one past the last stored page (may overflow for crafted lists → None).
    pub fn data_end(&self) -> Option<u64> {
        self.total_pages
            .checked_mul(PAGE_SIZE)?
            .checked_add(self.data_offset)
    }

    /// File offset of a run's first page.
    pub fn run_offset(&self, r: &Run) -> Option<u64> {
        r.file_page
            .checked_mul(PAGE_SIZE)?
            .checked_add(self.data_offset)
    }

    pub fn runs(&self) -> &[Run] {
        &self.runs
    }

    pub fn total_pages(&self) -> u64 {
        self.total_pages
    }
}

impl super::Container for RunList {
    fn page_offset(&self, _file: &[u8], pfn: Pfn) -> Option<u64> {
        self.file_offset(pfn)
    }

    fn physical_runs(&self, file: &[u8]) -> Vec<(u64, u64)> {
        let len = file.len() as u64;
        let mut out = Vec::new();
        for run in self.runs() {
            let n = super::container::held(len, self.run_offset(run), run.count);
            if n > 0 {
                out.push((run.base.get(), n));
            }
        }
        out
    }

    fn stored_pages(&self) -> u64 {
        self.total_pages()
    }

    fn storage(&self) -> super::Storage {
        super::Storage {
            kind: "physical (runs)",
            runs: Some(self.runs().len()),
            ..Default::default()
        }
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// DumpType 1: a full dump, physical memory runs after the header.
pub(crate) const FULL_DUMP: Format = Format {
    name: "full crash dump",
    probe: |i| i.dump_type() == Some(DumpType::FULL),
    open: |input| {
        let header = format::dump_header(&input)?;
        let runs = RunList::parse(input.bytes(), &header)?;
        let mut warnings = Vec::new();
        if runs.declared_pages != runs.total_pages() {
            warnings.push(Warning::new(WarningKind::Anomaly, format!(
                "PhysicalMemoryBlock.NumberOfPages is {:#x} but the runs hold {:#x} pages; the runs are used",
                runs.declared_pages,
                runs.total_pages()
            )));
        }
        let end = runs.data_end();
        let what = format!(
            "the page data of {} runs ({:#x} pages)",
            runs.runs().len(),
            runs.total_pages()
        );
        format::crash_dump(input, header, Box::new(runs), end, what, warnings)
    },
};
