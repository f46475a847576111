//! Where the libraries' diagnostics go. They report through `tracing`; this
//! writes their events on stderr the way `tl` writes its own lines: the
//! message alone, after `warning: ` or `error: ` at those levels, with no
//! timestamps or targets. Our crates report from info up by default and from
//! debug up with `-v` (per-request lines of `tl serve`, kernel compiles);
//! other crates only warnings and errors.

use std::fmt;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

/// The crates whose events `-v` turns up to debug.
const OUR_CRATES: &[&str] = &[
    "tl_cli",
    "tl_cuda",
    "tl_engine",
    "tl_gguf",
    "tl_lang",
    "tl_server",
    "tl_syntax",
    "tl_tokenizer",
];

/// Installs the stderr subscriber for the whole process.
pub fn init(verbose: bool) {
    let ours = if verbose {
        LevelFilter::DEBUG
    } else {
        LevelFilter::INFO
    };
    let filter = Targets::new()
        .with_default(LevelFilter::WARN)
        .with_targets(OUR_CRATES.iter().map(|&name| (name, ours)));
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .event_format(Plain)
        .with_filter(filter);
    // Fails only if a subscriber is already installed, which main does not do.
    let _ = tracing_subscriber::registry().with(layer).try_init();
}

/// One line per event: its level's prefix, the message, then any other
/// fields as `name=value`.
struct Plain;

impl<S, N> FormatEvent<S, N> for Plain
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        context: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        match *event.metadata().level() {
            Level::ERROR => write!(writer, "error: ")?,
            Level::WARN => write!(writer, "warning: ")?,
            _ => {}
        }
        context.format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}
