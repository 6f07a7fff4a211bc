//! Progress bars (indicatif) on stderr for loading, training and
//! validation. indicatif draws nothing when stderr is not a terminal, and
//! [`Progress::hidden`] draws nothing at all (tests, benches, `--quiet`).

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Factory of progress bars, enabled or hidden.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    enabled: bool,
}

impl Progress {
    /// Bars on stderr (drawn only when it is a terminal).
    pub fn stderr() -> Self {
        Self { enabled: true }
    }

    /// No bars.
    pub fn hidden() -> Self {
        Self { enabled: false }
    }

    fn target(&self) -> ProgressDrawTarget {
        if self.enabled {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        }
    }

    /// A bar of `len` steps counting `unit`s, labelled `msg`.
    pub fn bar(&self, len: u64, msg: &str, unit: &str) -> ProgressBar {
        let pb = ProgressBar::with_draw_target(Some(len), self.target());
        let template = format!("{{msg:<12}} [{{bar:30}}] {{pos}}/{{len}} {unit} ({{elapsed}})");
        if let Ok(style) = ProgressStyle::with_template(&template) {
            pb.set_style(style.progress_chars("=> "));
        }
        pb.set_message(msg.to_string());
        pb
    }

    /// A spinner for a step of unknown length, labelled `msg`.
    pub fn spinner(&self, msg: &str) -> ProgressBar {
        let pb = ProgressBar::with_draw_target(None, self.target());
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
            pb.set_style(style);
        }
        pb.set_message(msg.to_string());
        if self.enabled {
            pb.enable_steady_tick(Duration::from_millis(120));
        }
        pb
    }
}
