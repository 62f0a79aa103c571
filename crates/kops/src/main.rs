//! The `kops` binary: parses the command line, calls one kops-ops function,
//! prints the result. The only place that prints or exits.

mod args;
mod assets;
mod channel_versions;
mod cli;
mod commands;
mod config;
mod context;
mod editor;
mod kubeconfig;
mod live;
mod output;
mod progress;
mod tables;

use clap::Parser;

/// The version this binary reports.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

fn main() {
    let mut cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        // kops' `kops get CLUSTER`: `get all CLUSTER`.
        Err(e) if e.kind() == clap::error::ErrorKind::InvalidSubcommand => {
            match cli::get_cluster_shorthand(std::env::args_os().collect()) {
                Some(argv) => cli::Cli::try_parse_from(argv).unwrap_or_else(|_| e.exit()),
                None => e.exit(),
            }
        }
        Err(e) => e.exit(),
    };
    init_tracing(cli.global.verbosity);
    apply_config_file(&mut cli.global);
    // Checked before any command runs: a mistyped limit must not be
    // discovered half way through an apply.
    if let Err(e) = kops_aws::RateLimits::from_env() {
        eprintln!("Error: {e}");
        std::process::exit(1);
    }
    if let Err(e) = kops_ops::GceRateLimits::from_env() {
        eprintln!("Error: {e}");
        std::process::exit(1);
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("Error: cannot start the async runtime: {e}");
            std::process::exit(1);
        }
    };
    let result = runtime.block_on(cli::run(cli));
    match result {
        Ok(code) => std::process::exit(code),
        Err(err) => {
            eprintln!("Error: {}", render_error(&err));
            std::process::exit(1);
        }
    }
}

/// kops' precedence: `--state`, then KOPS_STATE_STORE (clap reads both),
/// then the config file's `kops_state_store`; trailing slashes dropped.
fn apply_config_file(global: &mut args::GlobalArgs) {
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let (file, warning) = config::load(global.config.as_deref(), home.as_deref());
    if let Some(w) = warning {
        eprintln!("Warning: {w}");
    }
    if global.state.as_deref().is_none_or(str::is_empty) {
        global.state = file.state_store.filter(|s| !s.is_empty());
    }
    if let Some(s) = &mut global.state {
        while s.ends_with('/') && !s.ends_with("://") {
            s.pop();
        }
    }
    global.config_lifecycle_overrides = file.lifecycle_overrides;
}

/// The longest line an error prints (the `Error: ` prefix included):
/// AWS errors are one line per cause, and a cause that is longer (a
/// resource listing, an odd SDK text) is cut rather than wrapped.
const MAX_ERROR_LINE: usize = 300;

/// The error and its causes, one per line; `hint:` lines stay as written.
/// No line is longer than [`MAX_ERROR_LINE`] with the `Error: ` prefix.
fn render_error(err: &anyhow::Error) -> String {
    let mut text = err.to_string();
    for cause in err.chain().skip(1) {
        let c = cause.to_string();
        if !text.contains(&c) {
            text.push_str(&format!("\ncaused by: {c}"));
        }
    }
    let room = MAX_ERROR_LINE - "Error: ".len();
    text.lines()
        .map(|line| {
            if line.chars().count() <= room {
                line.to_string()
            } else {
                let mut cut: String = line.chars().take(room - 1).collect();
                cut.push('…');
                cut
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The log filter of `-v <verbosity>` when `RUST_LOG` is not set. The AWS
/// SDK's own logs (`aws_config`, `aws_smithy_*`, `aws_sdk_*`: IMDS probes
/// when no credentials are set, each retry attempt) are shown only from
/// `-v 2`: below that, kops-rs' own one-line error says what failed.
fn tracing_directives(verbosity: u8) -> String {
    let level = match verbosity {
        0 => "warn",
        1..=2 => "info",
        3..=5 => "debug",
        _ => "trace",
    };
    if verbosity < 2 {
        // Target prefixes: `aws` covers every aws_* crate. kube-client logs
        // an ERROR for every failed request (a plan's version check when no
        // API server answers yet); kops-rs reports the failure itself.
        format!("{level},aws=off,kube_client=off")
    } else {
        level.to_string()
    }
}

fn init_tracing(verbosity: u8) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(tracing_directives(verbosity)));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aws_sdk_logs_only_from_v2() {
        assert_eq!(tracing_directives(0), "warn,aws=off,kube_client=off");
        assert_eq!(tracing_directives(1), "info,aws=off,kube_client=off");
        assert_eq!(tracing_directives(2), "info");
        assert_eq!(tracing_directives(4), "debug");
        // The directive is a target prefix: it hides every aws_* crate.
        let filter = tracing_subscriber::EnvFilter::new(tracing_directives(0));
        assert!(filter.to_string().contains("aws=off"), "{filter}");
    }

    #[test]
    fn no_error_line_is_longer_than_300_characters() {
        let long = format!("AWS DescribeVpcs on `{}` failed: x", "a".repeat(500));
        let err = anyhow::anyhow!("{long}\nhint: short");
        let text = render_error(&err);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(lines
            .iter()
            .all(|l| l.chars().count() + "Error: ".len() <= MAX_ERROR_LINE));
        assert!(lines[0].ends_with('…'));
        assert_eq!(lines[1], "hint: short");
    }
}
