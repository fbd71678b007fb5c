//! `etwdump events`: one row per ETW record, streamed.

use super::common::{finish, renderer, source, with_session};
use super::flags::{FilterArgs, KernelArgs, RowFormatArg, SessionArg};
use super::stdout::ThreadedStdout;
use etwdump::etw::source::EtwSource;
use etwdump::report::events::{self, EventRow};
use etwdump::report::filter::FilterStats;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    kernel: KernelArgs,
    #[command(flatten)]
    session: SessionArg,
    /// Read the buffers that nothing leads to any more (orphaned and stale copies, found
    /// by `scan`) instead of the live sessions'
    #[arg(long, conflicts_with = "session")]
    carved: bool,
    /// JSON Lines: keep records without a known time (by default they are left out, with a
    /// count: Timesketch cannot place a line without a time)
    #[arg(long)]
    keep_untimed: bool,
    #[command(flatten)]
    filter: FilterArgs,
    #[arg(long, value_enum, default_value = "table")]
    format: RowFormatArg,
}

pub fn run(a: Args, out: &mut ThreadedStdout) -> anyhow::Result<()> {
    let r = renderer(a.format);
    with_session(&a.kernel, &a.session, |ctx, session| {
        let dump_time = match (ctx.system_time(), ctx.system_time_flag()) {
            (_, Some((_, why))) => Err(format!("the dump's SystemTime cannot be right ({why})")),
            (Some(t), None) => Ok(t),
            (None, None) => Err("the dump has no SystemTime to count back from".to_string()),
        };
        let filter = a.filter.filter(dump_time)?;
        let mut stats = FilterStats::default();
        let mut rows = r
            .listing::<_, EventRow>(out, "events")?
            .keep_untimed(a.keep_untimed)
            // Rendered on other threads: a third less wall time on a 2-CPU machine
            // (docs/performance.md "Rendering"; context switches gain nothing).
            .parallel(0)
            .giving(ThreadedStdout::give_to);
        let src = if a.carved {
            source(ctx, true)
        } else {
            EtwSource::open(ctx, session)
        };
        let mut warnings = events::stream_from(ctx, src, &mut |e| {
            if filter.keeps(&e, &mut stats) {
                rows.row_owned(e)
            } else {
                Ok(())
            }
        })?;
        warnings.extend(stats.warnings("records"));
        warnings.extend(rows.untimed_warning()?);
        finish(r, rows, &warnings)
    })
}
