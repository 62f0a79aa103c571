//! The flags every command shares (global flags, output formats, the
//! Kubernetes API flags) and the value parsers they use.

use clap::{Args, ValueEnum};

#[derive(Debug, Args, Clone, Default)]
pub struct GlobalArgs {
    /// Location of the state store (s3://bucket, file:///dir); overrides
    /// KOPS_STATE_STORE and the config file's kops_state_store.
    #[arg(long, global = true, env = "KOPS_STATE_STORE", value_name = "URL")]
    pub state: Option<String>,
    /// Name of the cluster; overrides KOPS_CLUSTER_NAME.
    #[arg(long, global = true, env = "KOPS_CLUSTER_NAME", value_name = "CLUSTER")]
    pub name: Option<String>,
    /// YAML config file (default $HOME/.kops.yaml, then $HOME/.kops/config).
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<std::path::PathBuf>,
    /// Log level (0-10); RUST_LOG overrides it.
    #[arg(
        short = 'v',
        long = "v",
        global = true,
        default_value_t = 0,
        value_name = "LEVEL"
    )]
    pub verbosity: u8,
    #[command(flatten)]
    pub logging: LoggingArgs,
    /// `lifecycle-overrides` of the config file (read at start).
    #[arg(skip)]
    pub config_lifecycle_overrides: Vec<String>,
}

/// kops' klog flags, which it accepts but hides: accepted here so scripts
/// that pass them run; logs go to stderr at the `-v` level whatever they say.
#[derive(Debug, Args, Clone, Default)]
pub struct LoggingArgs {
    /// Log to stderr as well as files (accepted; logs go to stderr).
    #[arg(long = "alsologtostderr", global = true, hide = true, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub alsologtostderr: Option<String>,
    /// Log to stderr instead of files (accepted; logs go to stderr).
    #[arg(long = "logtostderr", global = true, hide = true, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub logtostderr: Option<String>,
    /// Add the file directory to the header (accepted, no effect).
    #[arg(long = "add_dir_header", global = true, hide = true, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub add_dir_header: Option<String>,
    /// Emit a stack trace at file:line (accepted, no effect).
    #[arg(
        long = "log_backtrace_at",
        global = true,
        hide = true,
        value_name = "FILE:LINE"
    )]
    pub log_backtrace_at: Option<String>,
    /// Write log files in this directory (accepted; logs go to stderr).
    #[arg(long = "log_dir", global = true, hide = true, value_name = "DIR")]
    pub log_dir: Option<String>,
    /// Write logs to this file (accepted; logs go to stderr).
    #[arg(long = "log_file", global = true, hide = true, value_name = "FILE")]
    pub log_file: Option<String>,
    /// Maximum log file size in MB (accepted, no effect).
    #[arg(
        long = "log_file_max_size",
        global = true,
        hide = true,
        value_name = "MB"
    )]
    pub log_file_max_size: Option<String>,
    /// Write each severity to its own file only (accepted, no effect).
    #[arg(long = "one_output", global = true, hide = true, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub one_output: Option<String>,
    /// Leave out log headers (accepted, no effect).
    #[arg(long = "skip_headers", global = true, hide = true, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub skip_headers: Option<String>,
    /// Leave out headers of log files (accepted, no effect).
    #[arg(long = "skip_log_headers", global = true, hide = true, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub skip_log_headers: Option<String>,
    /// Logs at or above this severity go to stderr (accepted; the `-v` level decides).
    #[arg(
        long = "stderrthreshold",
        global = true,
        hide = true,
        value_name = "SEVERITY"
    )]
    pub stderrthreshold: Option<String>,
    /// Logs at or above this severity go to stderr with --alsologtostderr (accepted; the `-v` level decides).
    #[arg(
        long = "alsologtostderrthreshold",
        global = true,
        value_name = "SEVERITY"
    )]
    pub alsologtostderrthreshold: Option<String>,
    /// klog's legacy stderr threshold behaviour (accepted, no effect).
    #[arg(long = "legacy_stderr_threshold_behavior", global = true, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub legacy_stderr_threshold_behavior: Option<String>,
    /// Per-file log levels, `pattern=N,...` (accepted; the `-v` level decides).
    #[arg(long = "vmodule", global = true, hide = true, value_name = "PATTERN=N")]
    pub vmodule: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum Output {
    #[default]
    Table,
    Yaml,
    Json,
}

/// `kops get`'s formats: the usual ones, and `plaintext` for secrets' values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum GetOutput {
    #[default]
    Table,
    Yaml,
    Json,
    /// The values themselves (`get secrets` only).
    Plaintext,
}

impl From<GetOutput> for Output {
    fn from(o: GetOutput) -> Output {
        match o {
            GetOutput::Yaml => Output::Yaml,
            GetOutput::Json => Output::Json,
            GetOutput::Table | GetOutput::Plaintext => Output::Table,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ManifestOutput {
    Yaml,
    Json,
}

/// How commands that talk to the Kubernetes API reach it (kops'
/// `--api-server` and `--use-kubeconfig`).
#[derive(Debug, Args, Clone, Default)]
pub struct KubeApiFlags {
    /// Override the API server used when communicating with the cluster kube-apiserver.
    #[arg(long, value_name = "URL")]
    pub api_server: Option<String>,
    /// Use the server endpoint from the local kubeconfig instead of inferring
    /// from cluster name: only its context named after the cluster (an
    /// error when it has none). Without it kops-rs also reads the local
    /// kubeconfig, falling back to its current context.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value = "false", value_parser = bool_flag, value_name = "BOOL")]
    pub use_kubeconfig: bool,
}

/// Parses `10s`, `2m`, `500ms`, `1h30m`.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    humantime::parse_duration(text)
        .map_err(|e| format!("`{text}` is not a duration ({e}); write e.g. `10s` or `2m`"))
}

/// A boolean flag's value as kops (Go's strconv) reads it.
pub fn bool_flag(text: &str) -> Result<bool, String> {
    match text {
        "true" | "1" | "yes" => Ok(true),
        "false" | "0" | "no" => Ok(false),
        _ => Err(format!("`{text}` is not a boolean; write true or false")),
    }
}
