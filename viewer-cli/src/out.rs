//! The one output path of every subcommand: `--format human|json` ([`Format`]), standard output
//! ([`Out`]), and what happens when the reader of that output goes away ([`is_broken_pipe`]).
//!
//! A command writes through [`Out`] (or the `say!`/`put!` macros on any `Write`) and returns its
//! write errors like any other error. `main` is the one place that turns a closed pipe
//! (`jets tree big.jets | head -1`) into a quiet exit with status 141, what a shell reports for a
//! classic Unix filter stopped by SIGPIPE: nothing on stderr, and `set -o pipefail` scripts can
//! still tell that the output was cut short. Rust ignores SIGPIPE (so that `jets view` survives a
//! browser closing a socket), which turns every such write into an `EPIPE` error, never a signal.

use std::io::{self, BufWriter, StdoutLock, Write};

use anyhow::{Context, Result};

/// The exit status after a closed pipe: 128 + SIGPIPE, as a shell shows for a filter it stopped.
pub const BROKEN_PIPE_EXIT: u8 = 141;

/// How a command prints its results (`--format`). One enum for every command, so that the flag
/// means the same everywhere; a command that cannot write some format says so at run time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Text for people.
    #[default]
    Human,
    /// JSON for programs (each command documents its shape).
    Json,
}

/// Buffered, locked standard output. Call [`Out::finish`]: dropping it would swallow the error of
/// the last write.
pub struct Out(BufWriter<StdoutLock<'static>>);

impl Out {
    /// Standard output, locked for the life of the command.
    pub fn stdout() -> Out {
        Out(BufWriter::with_capacity(64 * 1024, io::stdout().lock()))
    }

    /// Writes `text` as it is.
    pub fn text(&mut self, text: &str) -> Result<()> {
        self.0.write_all(text.as_bytes()).context("writing to standard output")
    }

    /// Writes `value` as pretty-printed JSON and a newline.
    pub fn json(&mut self, value: &impl serde::Serialize) -> Result<()> {
        serde_json::to_writer_pretty(&mut self.0, value).context("writing to standard output")?;
        self.text("\n")
    }

    /// Flushes what is buffered (for output that must appear as it happens, `--follow`).
    pub fn flush(&mut self) -> Result<()> {
        self.0.flush().context("writing to standard output")
    }

    /// Flushes and reports the last write error.
    pub fn finish(mut self) -> Result<()> {
        self.flush()
    }
}

impl Write for Out {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// Whether `e` (or any error it wraps) is a write to a pipe whose reader has gone away.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        let io_kind = cause.downcast_ref::<io::Error>().map(io::Error::kind);
        // serde_json keeps the io::Error inside (its `source` skips it).
        let json_kind = cause.downcast_ref::<serde_json::Error>().and_then(|j| j.io_error_kind());
        io_kind == Some(io::ErrorKind::BrokenPipe) || json_kind == Some(io::ErrorKind::BrokenPipe)
    })
}

/// `e` and the errors it wraps, joined by ": " as `{e:#}` joins them, but each said once: a cause
/// whose text is already in what comes before it is left out. An error that spells its source
/// in its own message and returns it as its source too (as `thiserror` makes of a field named
/// `source`: `RunError::Trace`, `jets_read::Error`, ...) would otherwise be printed twice over:
/// `z/pipeline.jets: invalid argument: JETS_CAPTURE clause ...: invalid argument: JETS_CAPTURE
/// clause ...`.
///
/// ```text
/// jets: error: running bubble_sort(64) into z/pipeline.jets: z/pipeline.jets: invalid argument: ...
/// ```
pub fn error_chain(e: &anyhow::Error) -> String {
    let mut said = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if said.contains(&text) {
            continue;
        }
        if !said.is_empty() {
            said.push_str(": ");
        }
        said.push_str(&text);
    }
    said
}

/// `writeln!` to any `Write`; an error (a closed pipe included) ends the command through `?`.
macro_rules! say {
    ($o:expr, $($t:tt)*) => {
        writeln!($o, $($t)*).context("writing to standard output")?
    };
}

/// `write!` to any `Write`.
macro_rules! put {
    ($o:expr, $($t:tt)*) => {
        write!($o, $($t)*).context("writing to standard output")?
    };
}

#[cfg(test)]
mod tests {
    use super::error_chain;

    /// An error that spells its source in its message and returns it as its source too.
    #[derive(Debug)]
    struct Spelled {
        path: String,
        source: std::io::Error,
    }

    impl std::fmt::Display for Spelled {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "{}: {}", self.path, self.source)
        }
    }

    impl std::error::Error for Spelled {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.source)
        }
    }

    #[test]
    fn an_error_chain_says_each_cause_once() {
        let io = std::io::Error::other("disk on fire");
        let e = anyhow::Error::new(Spelled { path: "a.jets".into(), source: io })
            .context("writing the demo");
        assert_eq!(format!("{e:#}"), "writing the demo: a.jets: disk on fire: disk on fire");
        assert_eq!(error_chain(&e), "writing the demo: a.jets: disk on fire");
        // Causes that say something new are all kept.
        let e = anyhow::anyhow!("no such file").context("reading b.jets").context("jets stats");
        assert_eq!(error_chain(&e), "jets stats: reading b.jets: no such file");
    }
}
