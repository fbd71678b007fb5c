//! `cswitch --svg` looked at as pixels (issue 16): forge variation dumps with 2, 6 and 16 CPUs
//! (processes and switch TIDs from the forge) are charted, rasterised with resvg, and checked:
//! every CPU lane holds the colours of the processes that ran on it, the legend's swatches are
//! those colours (busiest first, distinct), unknown spans are hatched, the picture has a
//! viewBox and a title with the UTC range; with no drawable switch it says "no data".
//! ETWDUMP_SVG_DIR=DIR keeps the SVG and PNG files to look at.

mod common;

use etwdump::dump::{DumpFile, OpenOptions};
use etwdump::kernel::context::{KernelContext, SymbolOptions};
use etwdump::render::svg::{render, Chart, UNKNOWN_FILL};
use etwdump_forge::{forge, Config};
use std::collections::BTreeSet;

/// A variation config of the 19041 fixture with `cpus` CPUs: the first seed that draws that
/// many, else the first seed's config with the count set (the forge lays out that many KPRCBs).
fn config(cpus: u32) -> Config {
    let fx = common::fixture("x64-19041");
    for seed in 1..200 {
        let c = Config::from_fixture(&fx).with_variation(seed);
        if c.cpus == cpus && c.processes {
            return c;
        }
    }
    let mut c = Config::from_fixture(&fx).with_variation(3);
    c.cpus = cpus;
    c
}

fn rgb(hex: &str) -> [u8; 3] {
    let v = u32::from_str_radix(hex.trim_start_matches('#'), 16).unwrap();
    [(v >> 16) as u8, (v >> 8) as u8, v as u8]
}

fn raster(svg: &str) -> resvg::tiny_skia::Pixmap {
    // Text with the system's fonts when it has any (the lanes and swatches need none).
    let mut opts = resvg::usvg::Options::default();
    opts.fontdb_mut().load_system_fonts();
    opts.fontdb_mut().set_sans_serif_family("DejaVu Sans");
    let tree = resvg::usvg::Tree::from_str(svg, &opts).unwrap();
    let size = tree.size().to_int_size();
    let mut p = resvg::tiny_skia::Pixmap::new(size.width(), size.height()).unwrap();
    resvg::render(
        &tree,
        resvg::tiny_skia::Transform::default(),
        &mut p.as_mut(),
    );
    p
}

/// The colours in a horizontal strip of the picture (y from `y0` to `y1`).
fn colours(p: &resvg::tiny_skia::Pixmap, y0: u32, y1: u32) -> BTreeSet<[u8; 3]> {
    let mut s = BTreeSet::new();
    for y in y0..y1.min(p.height()) {
        for x in 70..p.width() - 20 {
            let c = p.pixel(x, y).unwrap();
            s.insert([c.red(), c.green(), c.blue()]);
        }
    }
    s
}

#[test]
fn the_chart_as_pixels_for_2_6_and_16_cpus() {
    let keep = std::env::var_os("ETWDUMP_SVG_DIR").map(std::path::PathBuf::from);
    for cpus in [2u32, 6, 16] {
        let c = config(cpus);
        let f = forge(&c);
        let d = DumpFile::from_bytes(f.to_bytes(), OpenOptions::default()).unwrap();
        let opts = SymbolOptions {
            pdb: Some(common::pdb_of("x64-19041")),
            ..SymbolOptions::default()
        };
        let ctx = KernelContext::open(&d, &opts).unwrap();
        let rep = etwdump::report::cswitch::collect(&ctx, None);
        let name = format!("var-{cpus}cpu.dmp");
        let drawn = render(
            &rep.rows,
            &Chart {
                dump_time: c.system_time,
                dump: &name,
            },
        );
        let svg = &drawn.svg;
        let lanes: BTreeSet<u64> = rep
            .rows
            .iter()
            .filter(|r| r.time.is_some() && r.time_flag.is_none())
            .filter_map(|r| r.cpu)
            .collect();
        assert!(lanes.len() >= 2, "{cpus} CPUs: lanes {lanes:?}");
        assert!(svg.contains(" viewBox=\"0 0 1200 "), "{cpus}: viewBox");
        assert!(
            svg.contains(&format!(">{name}: context switches on {} CPU", lanes.len())),
            "{cpus}: title"
        );
        assert!(svg.contains(" UTC</text>"), "{cpus}: UTC axis ends");
        // The legend: distinct colours, busiest first, names from the process list.
        let legend: Vec<&str> = drawn.legend.iter().map(|(_, c)| *c).collect();
        let distinct: BTreeSet<&str> = legend.iter().copied().collect();
        assert_eq!(
            distinct.len(),
            legend.len(),
            "{cpus}: legend colours distinct"
        );
        assert!(
            drawn
                .legend
                .iter()
                .any(|(n, _)| n.contains(".exe") || n == "System"),
            "{cpus}: {:?}",
            drawn.legend
        );
        let p = raster(svg);
        if let Some(dir) = &keep {
            std::fs::create_dir_all(dir).unwrap();
            std::fs::write(dir.join(format!("cswitch-{cpus}cpu.svg")), svg).unwrap();
            p.save_png(dir.join(format!("cswitch-{cpus}cpu.png")))
                .unwrap();
        }
        // Lanes: each CPU's strip shows at least one legend colour or the hatching.
        let legend_rgb: BTreeSet<[u8; 3]> = legend.iter().map(|c| rgb(c)).collect();
        for i in 0..lanes.len() as u32 {
            let y = 48 + 22 * i;
            let seen = colours(&p, y + 4, y + 18);
            assert!(
                seen.iter().any(|c| legend_rgb.contains(c)) || seen.contains(&[0x99, 0x99, 0x99]),
                "{cpus} CPUs: lane {i} shows no process colour"
            );
        }
        // The three busiest processes' colours are painted in the lanes (a process that ran
        // for less than a pixel's time is only in the legend).
        let lanes_px = colours(&p, 48, 48 + 22 * lanes.len() as u32);
        for c in legend.iter().take(3) {
            assert!(
                lanes_px.contains(&rgb(c)),
                "{cpus} CPUs: legend colour {c} not in the lanes"
            );
        }
        // The busiest colours are far apart (no two of the first eight within a small
        // distance in RGB).
        let first: Vec<[u8; 3]> = legend.iter().take(8).map(|c| rgb(c)).collect();
        for (i, a) in first.iter().enumerate() {
            for b in &first[i + 1..] {
                let d: i32 = a
                    .iter()
                    .zip(b)
                    .map(|(x, y)| (i32::from(*x) - i32::from(*y)).pow(2))
                    .sum();
                assert!(d > 40 * 40, "{cpus}: {a:?} and {b:?} too close");
            }
        }
        println!(
            "{cpus} CPUs: {} lanes, {} spans, {} legend entries, {}x{} px",
            lanes.len(),
            drawn.spans,
            drawn.legend.len(),
            p.width(),
            p.height()
        );
    }
}

/// No drawable switch: the picture says "no data" (and the CLI warns).
#[test]
fn no_data_is_said() {
    let drawn = render(
        &[],
        &Chart {
            dump_time: 132_583_451_029_877_657,
            dump: "empty.dmp",
        },
    );
    assert_eq!(drawn.spans, 0);
    assert!(drawn
        .svg
        .contains(">empty.dmp: no context switch with a UTC time to draw</text>"));
    assert!(drawn.svg.contains("No data: the dump gave no switch"));
    assert!(
        drawn.svg.contains(UNKNOWN_FILL),
        "the legend keeps the unknown key"
    );
    raster(&drawn.svg);
}
