//! `kops toolbox template`: render cluster.yaml from Go templates and values
//! files (kops-template does the work; this turns flags into its options).

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{ArgAction, Args};
use kops_template::toolbox::{self, ToolboxOptions};

use crate::args::GlobalArgs;
use crate::output::print;

#[derive(Debug, Args)]
pub struct ToolboxTemplateArgs {
    /// Cluster name: `.clusterName` when the values do not set one.
    #[arg(value_name = "CLUSTER")]
    pub cluster_name: Option<String>,
    /// Path to a configuration file containing values to include in template (repeatable, comma-separated).
    #[arg(long = "values", value_name = "FILE", value_delimiter = ',')]
    pub values: Vec<PathBuf>,
    /// Set values on the command line (key1=val1,key2=val2); values are typed.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Set STRING values on the command line (key1=val1,key2=val2).
    #[arg(long = "set-string", value_name = "KEY=VALUE")]
    pub set_string: Vec<String>,
    /// Path to template file or directory of templates to render (repeatable, comma-separated).
    #[arg(long = "template", value_name = "FILE|DIR", value_delimiter = ',')]
    pub templates: Vec<PathBuf>,
    /// Path to directory containing snippets used for templating (repeatable, comma-separated).
    #[arg(long = "snippets", value_name = "DIR", value_delimiter = ',')]
    pub snippets: Vec<PathBuf>,
    /// Path to output file. Defaults to stdout.
    #[arg(long = "out", visible_alias = "output", value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Show the value of a specific configuration value.
    #[arg(long = "config-value", value_name = "KEY")]
    pub config_value: Option<String>,
    /// Channel to use for the channel* functions (not supported yet).
    #[arg(long, value_name = "CHANNEL", default_value = "stable")]
    pub channel: String,
    /// Fail on referencing unset variables in templates.
    #[arg(long = "fail-on-missing", action = ArgAction::Set, num_args = 0..=1,
          require_equals = true, default_value_t = true, default_missing_value = "true")]
    pub fail_on_missing: bool,
    /// Attempt to format the generated yaml content before output.
    #[arg(long = "format-yaml", action = ArgAction::Set, num_args = 0..=1,
          require_equals = true, default_value_t = false, default_missing_value = "true")]
    pub format_yaml: bool,
}

/// kops' channel template functions; the channel is not consulted here yet, so calling
/// one is a clear error rather than a wrong answer.
const CHANNEL_FUNCS: &[&str] = &[
    "ChannelRecommendedKubernetesUpgradeVersion",
    "ChannelRecommendedKopsKubernetesVersion",
    "ChannelRecommendedImage",
];

pub fn run(global: &GlobalArgs, a: ToolboxTemplateArgs) -> Result<i32> {
    let opts = ToolboxOptions {
        templates: a.templates,
        values: a.values,
        set: a.set,
        set_string: a.set_string,
        snippets: a.snippets,
        fail_on_missing: a.fail_on_missing,
        format_yaml: a.format_yaml,
        cluster_name: a.cluster_name.or_else(|| global.name.clone()),
    };
    if let Some(key) = a.config_value {
        let ctx = toolbox::load_values(&opts)?;
        match ctx.get(&key) {
            Some(v) => print(&format!("{}\n", kops_template::go_sprint(v))),
            None => print("null\n"),
        }
        return Ok(0);
    }
    let channel = a.channel;
    let setup = move |eng: &mut kops_template::Engine| {
        for name in CHANNEL_FUNCS {
            let (name, channel) = (name.to_string(), channel.clone());
            eng.add_func(
                &name.clone(),
                Box::new(move |_| {
                    Err(format!(
                        "{name} needs channel {channel:?}, which toolbox template cannot read yet"
                    ))
                }),
            );
        }
    };
    let content = toolbox::run(&opts, &setup)?;
    match a.out {
        Some(path) => std::fs::write(&path, content)
            .with_context(|| format!("unable to open file: {}", path.display()))?,
        None => print(&content),
    }
    Ok(0)
}
