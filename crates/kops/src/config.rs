//! kops' config file: `--config FILE`, else `~/.kops.yaml`, else
//! `~/.kops/config` (the first that exists). kops reads it with viper, so
//! keys are case-insensitive: `kops_state_store` gives the state store when
//! neither `--state` nor `KOPS_STATE_STORE` does, and `lifecycle-overrides`
//! the default of `update cluster --lifecycle-overrides` (after the
//! `KOPS_LIFECYCLE_OVERRIDES` variable). A file that cannot be read is a
//! warning, as in kops.

use std::path::{Path, PathBuf};

/// The settings kops takes from its config file.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ConfigFile {
    pub path: Option<PathBuf>,
    pub state_store: Option<String>,
    pub lifecycle_overrides: Vec<String>,
}

/// The file kops would read: `--config`, else the first of `~/.kops.yaml`
/// and `~/.kops/config` that exists.
pub fn config_path(flag: Option<&Path>, home: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = flag {
        return Some(p.to_path_buf());
    }
    let home = home?;
    [home.join(".kops.yaml"), home.join(".kops").join("config")]
        .into_iter()
        .find(|p| p.exists())
}

/// Reads the settings from `text` (YAML or JSON); `Err` is the reason it
/// cannot be read.
pub fn parse(text: &str) -> Result<ConfigFile, String> {
    let value: serde_yaml_ng::Value = serde_yaml_ng::from_str(text).map_err(|e| e.to_string())?;
    let mut out = ConfigFile::default();
    let serde_yaml_ng::Value::Mapping(map) = value else {
        return if value.is_null() {
            Ok(out)
        } else {
            Err("the file is not a mapping of keys to values".into())
        };
    };
    for (k, v) in map {
        let Some(key) = k.as_str() else { continue };
        match key.to_ascii_lowercase().as_str() {
            "kops_state_store" => out.state_store = scalar(&v),
            "lifecycle-overrides" => {
                out.lifecycle_overrides = match &v {
                    serde_yaml_ng::Value::Sequence(items) => {
                        items.iter().filter_map(scalar).collect()
                    }
                    other => scalar(other)
                        .map(|s| {
                            s.split(',')
                                .map(|p| p.trim().to_string())
                                .filter(|p| !p.is_empty())
                                .collect()
                        })
                        .unwrap_or_default(),
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

fn scalar(v: &serde_yaml_ng::Value) -> Option<String> {
    match v {
        serde_yaml_ng::Value::String(s) => Some(s.clone()),
        serde_yaml_ng::Value::Number(n) => Some(n.to_string()),
        serde_yaml_ng::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Loads the config file; a missing or unreadable one gives the warning
/// to print and no settings.
pub fn load(flag: Option<&Path>, home: Option<&Path>) -> (ConfigFile, Option<String>) {
    let Some(path) = config_path(flag, home) else {
        return (ConfigFile::default(), None);
    };
    let parsed = std::fs::read_to_string(&path)
        .map_err(|e| e.to_string())
        .and_then(|t| parse(&t));
    match parsed {
        Ok(mut c) => {
            c.path = Some(path);
            (c, None)
        }
        Err(e) => (
            ConfigFile::default(),
            Some(format!("error reading config {}: {e}", path.display())),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_case_insensitive_as_viper_reads_them() {
        let c = parse("KOPS_STATE_STORE: s3://bucket\nlifecycle-overrides: SecurityGroups=Ignore,IAMRole=Ignore\n").unwrap();
        assert_eq!(c.state_store.as_deref(), Some("s3://bucket"));
        assert_eq!(
            c.lifecycle_overrides,
            ["SecurityGroups=Ignore", "IAMRole=Ignore"]
        );
        let c = parse("kops_state_store: file:///tmp/x\n").unwrap();
        assert_eq!(c.state_store.as_deref(), Some("file:///tmp/x"));
        assert_eq!(parse("").unwrap(), ConfigFile::default());
        assert!(parse("- a\n").is_err());
    }

    #[test]
    fn the_flag_then_kops_yaml_then_kops_config() {
        let home = tempfile::tempdir().unwrap();
        assert_eq!(config_path(None, Some(home.path())), None);
        std::fs::create_dir(home.path().join(".kops")).unwrap();
        std::fs::write(home.path().join(".kops/config"), "").unwrap();
        assert_eq!(
            config_path(None, Some(home.path())),
            Some(home.path().join(".kops/config"))
        );
        std::fs::write(home.path().join(".kops.yaml"), "").unwrap();
        assert_eq!(
            config_path(None, Some(home.path())),
            Some(home.path().join(".kops.yaml"))
        );
        let f = Path::new("/elsewhere.yaml");
        assert_eq!(
            config_path(Some(f), Some(home.path())),
            Some(f.to_path_buf())
        );
    }
}
