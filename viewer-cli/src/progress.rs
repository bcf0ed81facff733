//! A progress bar on stderr for long runs, shown only when stderr is a terminal.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A byte-count progress bar; does nothing when stderr is not a terminal (pipes, CI logs).
pub struct Progress(Option<ProgressBar>);

impl Progress {
    /// A bar over `total` bytes (a spinner when the total is unknown), labelled `label`.
    pub fn bytes(total: Option<u64>, label: &str) -> Progress {
        if !std::io::stderr().is_terminal() {
            return Progress(None);
        }
        let bar = match total {
            Some(t) => ProgressBar::with_draw_target(Some(t), ProgressDrawTarget::stderr()),
            None => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()),
        };
        let template = if total.is_some() {
            "{msg} [{bar:40}] {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}"
        } else {
            "{msg} {spinner} {bytes} {binary_bytes_per_sec}"
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(label.to_owned());
        bar.enable_steady_tick(Duration::from_millis(200));
        Progress(Some(bar))
    }

    /// A handle for callbacks that outlive the borrow of `self` (the bar is reference-counted).
    pub fn setter(&self) -> impl FnMut(u64) + 'static {
        let bar = self.0.clone();
        move |pos| {
            if let Some(b) = &bar {
                b.set_position(pos);
            }
        }
    }

    /// Removes the bar from the terminal.
    pub fn finish(&self) {
        if let Some(b) = &self.0 {
            b.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}
