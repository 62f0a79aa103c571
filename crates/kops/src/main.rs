//! The `kops` binary: parses the command line, calls one kops-ops function,
//! prints the result. The only place that prints or exits.

mod cli;
mod commands;
mod editor;
mod more_commands;
mod output;
mod pki_commands;
mod roll_commands;
mod toolbox_commands;

use clap::Parser;

/// The version this binary reports.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

fn main() {
    let cli = cli::Cli::parse();
    init_tracing(cli.global.verbosity);
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
    let result = runtime.block_on(commands::run(cli));
    match result {
        Ok(code) => std::process::exit(code),
        Err(err) => {
            eprintln!("Error: {}", render_error(&err));
            std::process::exit(1);
        }
    }
}

/// The error and its causes, one per line; `hint:` lines stay as written.
fn render_error(err: &anyhow::Error) -> String {
    let mut text = err.to_string();
    for cause in err.chain().skip(1) {
        let c = cause.to_string();
        if !text.contains(&c) {
            text.push_str(&format!("\ncaused by: {c}"));
        }
    }
    text
}

fn init_tracing(verbosity: u8) {
    let default = match verbosity {
        0 => "warn",
        1..=2 => "info",
        3..=5 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}
