//! `etwdump manpage`: the manual page (roff).

use std::io::Write;

/// The main page, then one section per command (clap_mangen renders one command per page:
/// the commands' pages follow as sections of the same file).
pub fn run(cli: clap::Command, out: &mut dyn Write) -> anyhow::Result<()> {
    clap_mangen::Man::new(cli.clone()).render(out)?;
    for sub in cli.get_subcommands() {
        let name = format!("etwdump-{}", sub.get_name());
        let page = clap_mangen::Man::new(sub.clone().display_name(name.clone()).bin_name(name));
        page.render_name_section(out)?;
        page.render_synopsis_section(out)?;
        page.render_description_section(out)?;
        page.render_options_section(out)?;
    }
    Ok(())
}
