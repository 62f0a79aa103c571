//! The lines `update cluster --yes` prints on stderr while it applies: one
//! per task that created, changed, skipped or failed something, and the
//! tasks waiting to retry.
//!
//! Retries are normal on AWS (eventual consistency: a role not yet usable
//! by EC2, a subnet not yet visible), so at the default verbosity they must
//! not flood the output: on a terminal they share one status line, redrawn
//! in place and erased once no task waits (a retry that then succeeds
//! leaves no trace); elsewhere (a pipe, a CI log, where a line cannot be
//! redrawn) they print nothing, and a task that fails for good says why in
//! its error. From `-v 1` each retry prints one short line.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Mutex;

use kops_engine::{Outcome, Progress, ProgressEvent, TaskKey};

/// The longest status line, so that it never wraps (a wrapped line cannot
/// be redrawn in place) on a common 100-column terminal.
const STATUS_WIDTH: usize = 99;
/// The longest retry line at `-v 1`.
const LINE_WIDTH: usize = 160;
/// Erases the current terminal line and returns to its start.
const ERASE_LINE: &str = "\r\x1b[2K";

/// Prints task progress to `out` (stderr in the binary).
pub struct ProgressLines<W: Write + Send> {
    verbosity: u8,
    /// `out` is a terminal, where a line can be redrawn.
    terminal: bool,
    state: Mutex<State<W>>,
}

struct State<W> {
    out: W,
    /// The tasks waiting to retry: attempt that failed and short reason.
    waiting: BTreeMap<TaskKey, (u32, String)>,
    /// The task that retried last, named on the status line.
    latest: Option<TaskKey>,
    /// A status line is on screen (no newline after it).
    drawn: bool,
}

impl ProgressLines<std::io::Stderr> {
    /// Progress on stderr, for `-v verbosity`.
    pub fn stderr(verbosity: u8) -> Self {
        use std::io::IsTerminal;
        let err = std::io::stderr();
        let terminal = err.is_terminal();
        Self::new(err, verbosity, terminal)
    }
}

impl<W: Write + Send> ProgressLines<W> {
    pub fn new(out: W, verbosity: u8, terminal: bool) -> Self {
        Self {
            verbosity,
            terminal,
            state: Mutex::new(State {
                out,
                waiting: BTreeMap::new(),
                latest: None,
                drawn: false,
            }),
        }
    }
}

/// The first line of `text`, at most `width` characters (`…` when cut).
fn shorten(text: &str, width: usize) -> String {
    let line = text.lines().next().unwrap_or("").trim_end();
    if line.chars().count() <= width {
        return line.to_string();
    }
    let mut cut: String = line.chars().take(width.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// The reason of a retry as a line names it: its first line, without the
/// resource the key already names (`CreateRole on `x`: ...` → `CreateRole:
/// ...`).
fn reason_of(key: &TaskKey, reason: &str) -> String {
    let first = reason.lines().next().unwrap_or("").trim();
    first.replacen(&format!(" on `{}`", key.name), "", 1)
}

impl<W: Write + Send> State<W> {
    fn erase(&mut self) {
        if self.drawn {
            let _ = write!(self.out, "{ERASE_LINE}");
            self.drawn = false;
        }
    }

    /// Redraws the status line, or erases it when no task waits.
    fn redraw(&mut self) {
        self.erase();
        let latest = self
            .latest
            .as_ref()
            .and_then(|k| self.waiting.get_key_value(k))
            .or_else(|| self.waiting.iter().next_back());
        let Some((key, (attempt, reason))) = latest else {
            return;
        };
        let others = self.waiting.len() - 1;
        let mut line = format!("  waiting  {key}: {reason} (attempt {attempt})");
        if others > 0 {
            line = format!(
                "  waiting  {} tasks; {key}: {reason} (attempt {attempt})",
                others + 1
            );
        }
        let line = shorten(&line, STATUS_WIDTH);
        let _ = write!(self.out, "{line}");
        let _ = self.out.flush();
        self.drawn = true;
    }

    /// A line of its own, above the status line.
    fn line(&mut self, text: &str) {
        self.erase();
        let _ = writeln!(self.out, "{text}");
    }
}

impl<W: Write + Send> Progress for ProgressLines<W> {
    fn event(&self, event: &ProgressEvent<'_>) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        match event {
            ProgressEvent::Retrying {
                key,
                attempt,
                reason,
                delay,
                ..
            } => {
                if self.verbosity >= 1 {
                    let was_drawn = state.drawn;
                    let line = format!(
                        "  retry    {key} (attempt {attempt}, next in {:.1}s): {}",
                        delay.as_secs_f64(),
                        reason_of(key, reason)
                    );
                    state.line(&shorten(&line, LINE_WIDTH));
                    if was_drawn {
                        state.redraw();
                    }
                    return;
                }
                state
                    .waiting
                    .insert((*key).clone(), (*attempt, reason_of(key, reason)));
                state.latest = Some((*key).clone());
                if self.terminal {
                    state.redraw();
                }
            }
            ProgressEvent::Finished { report } => {
                let retried = state.waiting.remove(&report.key).is_some();
                let what = match &report.outcome {
                    Outcome::Created { .. } => Some("created"),
                    Outcome::Modified { .. } => Some("modified"),
                    Outcome::Failed { .. } => Some("FAILED"),
                    Outcome::Skipped { .. } => Some("skipped"),
                    // Unchanged objects and dry-run outcomes make no line.
                    _ => None,
                };
                let Some(what) = what else {
                    if retried && self.terminal {
                        state.redraw();
                    }
                    return;
                };
                // A failure says once how often it was tried; the error
                // printed at the end says why.
                let tries = match (&report.outcome, report.attempts) {
                    (Outcome::Failed { .. }, n) if n > 1 => format!(" after {n} attempts"),
                    _ => String::new(),
                };
                state.line(&format!(
                    "  {what:8} {}{tries} ({:.1}s)",
                    report.key,
                    report.elapsed.as_secs_f64()
                ));
                if self.terminal && !state.waiting.is_empty() {
                    state.redraw();
                }
            }
            _ => {}
        }
    }
}

impl<W: Write + Send> Drop for ProgressLines<W> {
    /// Leaves no half-drawn line for the next output.
    fn drop(&mut self) {
        if let Ok(state) = self.state.get_mut() {
            state.erase();
            let _ = state.out.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use kops_engine::{Operation, TaskReport};

    use super::*;

    fn key(name: &str) -> TaskKey {
        TaskKey::new("IAMRole", name)
    }

    fn retry(p: &impl Progress, name: &str, attempt: u32) {
        p.event(&ProgressEvent::Retrying {
            key: &key(name),
            attempt,
            operation: Operation::Apply,
            reason: &format!("CreateRole on `{name}`: Throttling: Rate exceeded\nhint: wait"),
            delay: Duration::from_millis(1500),
        });
    }

    fn finish(p: &impl Progress, name: &str, outcome: Outcome) {
        p.event(&ProgressEvent::Finished {
            report: &TaskReport {
                key: key(name),
                outcome,
                attempts: 3,
                started: Duration::ZERO,
                elapsed: Duration::from_millis(2000),
            },
        });
    }

    fn created() -> Outcome {
        Outcome::Created {
            changes: Default::default(),
        }
    }

    /// A writer the test reads after the progress is dropped.
    #[derive(Clone, Default)]
    struct Buf(std::sync::Arc<Mutex<Vec<u8>>>);

    impl Write for Buf {
        fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(data);
            Ok(data.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn run(verbosity: u8, terminal: bool, events: impl Fn(&ProgressLines<Buf>)) -> String {
        let buf = Buf::default();
        let p = ProgressLines::new(buf.clone(), verbosity, terminal);
        events(&p);
        drop(p);
        let out = buf.0.lock().unwrap().clone();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn retries_then_success_leave_only_the_result_at_v0() {
        let events = |p: &ProgressLines<Buf>| {
            retry(p, "a", 1);
            retry(p, "a", 2);
            retry(p, "a", 3);
            finish(p, "a", created());
        };
        // Not a terminal: nothing about the retries.
        assert_eq!(run(0, false, events), "  created  IAMRole/a (2.0s)\n");
        // A terminal: one line redrawn per retry, erased before the result.
        let out = run(0, true, events);
        assert_eq!(out.matches('\n').count(), 1, "{out:?}");
        assert!(out.ends_with(&format!("{ERASE_LINE}  created  IAMRole/a (2.0s)\n")));
        assert!(
            out.contains("  waiting  IAMRole/a: CreateRole: Throttling: Rate exceeded (attempt 3)"),
            "{out:?}"
        );
        assert!(!out.contains("hint"), "{out:?}");
    }

    #[test]
    fn a_failure_after_retries_is_one_line_with_its_attempts_at_v0() {
        let failed = || Outcome::Failed {
            operation: Operation::Apply,
            message: "gave up".into(),
        };
        for terminal in [false, true] {
            let out = run(0, terminal, |p| {
                retry(p, "a", 1);
                retry(p, "a", 2);
                finish(p, "a", failed());
            });
            let lines: Vec<&str> = out
                .lines()
                .map(|l| l.rsplit(ERASE_LINE).next().unwrap())
                .filter(|l| !l.is_empty())
                .collect();
            assert_eq!(
                lines,
                ["  FAILED   IAMRole/a after 3 attempts (2.0s)"],
                "{out:?}"
            );
        }
    }

    #[test]
    fn an_unchanged_task_after_retries_erases_the_status_line() {
        let out = run(0, true, |p| {
            retry(p, "a", 1);
            finish(p, "a", Outcome::Unchanged);
        });
        assert!(out.ends_with(ERASE_LINE), "{out:?}");
        assert!(!out.contains('\n'), "{out:?}");
    }

    #[test]
    fn several_waiting_tasks_share_the_status_line() {
        let out = run(0, true, |p| {
            retry(p, "a", 1);
            retry(p, "b", 1);
            finish(p, "c", created());
            finish(p, "a", created());
            finish(p, "b", created());
        });
        assert!(out.contains("  waiting  2 tasks; IAMRole/b: "), "{out:?}");
        // A result printed while tasks wait goes above the status line,
        // which is drawn again after it.
        let after_c = out.split("IAMRole/c (2.0s)\n").nth(1).unwrap();
        assert!(after_c.starts_with("  waiting  2 tasks"), "{out:?}");
        let lines: Vec<&str> = out
            .lines()
            .map(|l| l.rsplit(ERASE_LINE).next().unwrap())
            .collect();
        assert_eq!(
            lines,
            [
                "  created  IAMRole/c (2.0s)",
                "  created  IAMRole/a (2.0s)",
                "  created  IAMRole/b (2.0s)"
            ]
        );
        // No line is wider than the status width.
        assert!(out
            .split(['\n', '\r'])
            .all(|l| l.trim_start_matches("\x1b[2K").chars().count() <= STATUS_WIDTH));
    }

    #[test]
    fn each_retry_is_one_short_line_at_v1() {
        let out = run(1, false, |p| {
            retry(p, "a", 1);
            retry(p, "a", 2);
            finish(
                p,
                "a",
                Outcome::Failed {
                    operation: Operation::Apply,
                    message: "gave up".into(),
                },
            );
        });
        assert_eq!(
            out,
            "  retry    IAMRole/a (attempt 1, next in 1.5s): CreateRole: Throttling: Rate exceeded\n\
             \x20 retry    IAMRole/a (attempt 2, next in 1.5s): CreateRole: Throttling: Rate exceeded\n\
             \x20 FAILED   IAMRole/a after 3 attempts (2.0s)\n"
        );
    }

    #[test]
    fn long_retry_lines_are_cut() {
        let name = "n".repeat(300);
        let out = run(1, false, |p| retry(p, &name, 1));
        assert_eq!(out.lines().count(), 1);
        assert_eq!(out.trim_end().chars().count(), LINE_WIDTH, "{out}");
        assert!(out.trim_end().ends_with('…'));
    }

    #[test]
    fn long_reasons_are_cut() {
        assert_eq!(shorten("abcdef", 4), "abc…");
        assert_eq!(shorten("ab\ncd", 4), "ab");
        assert_eq!(shorten("", 4), "");
    }
}
