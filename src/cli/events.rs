//! `etwdump events`: one row per ETW record, streamed.

use super::common::{finish, source, with_session};
use super::flags::{KernelArgs, RowFormatArg, SessionArg};
use etwdump::etw::source::EtwSource;
use etwdump::render::output::Renderer;
use etwdump::report::events::{self, EventRow};
use etwdump::report::filter::{self, EventFilter, FilterStats};
use std::io::Write;

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

/// Which records to list (all given filters must hold; a record whose value is not known
/// cannot be shown to match and is left out, counted in a warning).
#[derive(clap::Args)]
pub struct FilterArgs {
    /// Only records of these process ids (comma-separated or repeated)
    #[arg(long, value_delimiter = ',', value_name = "PID")]
    pid: Vec<u32>,
    /// Only records of these thread ids
    #[arg(long, value_delimiter = ',', value_name = "TID")]
    tid: Vec<u32>,
    /// Only records of these providers: a GUID or a name `providers` shows
    #[arg(long, value_name = "NAME|GUID")]
    provider: Vec<String>,
    /// Only records with these event ids (EVENT_HEADER) or message numbers (TRACE_MESSAGE)
    #[arg(long, value_delimiter = ',', value_name = "ID")]
    event_id: Vec<u16>,
    /// Only kernel records with these hook ids (0x0524, 1316) or names (CONTEXTSWAP)
    #[arg(long, value_delimiter = ',', value_name = "HOOK")]
    hook: Vec<String>,
    /// Only records at or after this UTC time (YYYY-MM-DD[THH:MM:SS[.fffffff]][Z])
    #[arg(long, value_name = "TIME", value_parser = etwdump::time::parse_utc)]
    since: Option<u64>,
    /// Only records at or before this UTC time
    #[arg(long, value_name = "TIME", value_parser = etwdump::time::parse_utc)]
    until: Option<u64>,
    /// Only records of the last DURATION before the dump's SystemTime (e.g. 250ms, 2s, 5m)
    #[arg(long, value_name = "DURATION", value_parser = etwdump::time::parse_duration,
          conflicts_with = "since")]
    last: Option<u64>,
}

impl FilterArgs {
    /// The library filter; `--last` counts back from `dump_time` (the dump's SystemTime, or
    /// why there is none to count from).
    fn filter(&self, dump_time: Result<u64, String>) -> anyhow::Result<EventFilter> {
        let mut providers = Vec::new();
        for p in &self.provider {
            providers.extend(filter::provider_guids(p)?);
        }
        let hooks = self
            .hook
            .iter()
            .map(|h| filter::hook_id(h))
            .collect::<Result<Vec<_>, _>>()?;
        let since = match (self.last, dump_time) {
            (None, _) => self.since,
            (Some(window), Ok(t)) => Some(t.saturating_sub(window)),
            (Some(_), Err(why)) => anyhow::bail!("--last: {why}; give --since instead"),
        };
        Ok(EventFilter {
            pids: self.pid.clone(),
            tids: self.tid.clone(),
            providers,
            event_ids: self.event_id.clone(),
            hooks,
            since,
            until: self.until,
        })
    }
}

pub fn run(a: Args, out: &mut dyn Write) -> anyhow::Result<()> {
    let r = Renderer::from(a.format);
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
            .keep_untimed(a.keep_untimed);
        let src = if a.carved {
            source(ctx, true)
        } else {
            EtwSource::open(ctx, session)
        };
        let mut warnings = events::stream_from(ctx, src, &mut |e| {
            if filter.keeps(e, &mut stats) {
                rows.row(e)
            } else {
                Ok(())
            }
        })?;
        warnings.extend(stats.warnings("records"));
        warnings.extend(rows.untimed_warning());
        finish(r, rows, &warnings)
    })
}
