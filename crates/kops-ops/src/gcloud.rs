//! gcloud's default project, which `create cluster --cloud gce` uses when
//! `--project` is not given. kops runs `gcloud config get-value project`;
//! this reads what that command reads, without needing gcloud installed:
//!
//! 1. `CLOUDSDK_CORE_PROJECT`, which overrides every configuration;
//! 2. the active configuration's `[core]` `project`: the configuration named
//!    by `CLOUDSDK_ACTIVE_CONFIG_NAME`, else by the file `active_config`
//!    (taken as written, as gcloud does: a trailing newline is part of the
//!    name), in `configurations/config_<name>` under gcloud's directory
//!    (`CLOUDSDK_CONFIG`, else `~/.config/gcloud`, or `%APPDATA%\gcloud` on
//!    Windows);
//! 3. without `active_config`, gcloud's legacy `properties` file (which
//!    gcloud then moves into a new `default` configuration).
//!
//! Checked against `gcloud config get-value project` (Google Cloud SDK).

use std::path::PathBuf;

/// The project gcloud would use, if it has one. `env` looks up an
/// environment variable (`kops_api::env::process_env` in production).
pub fn default_project(env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let set = |name: &str| {
        env(name)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    if let Some(project) = set("CLOUDSDK_CORE_PROJECT") {
        return Some(project);
    }
    let dir = match set("CLOUDSDK_CONFIG") {
        Some(d) => PathBuf::from(d),
        None if cfg!(windows) => PathBuf::from(set("APPDATA")?).join("gcloud"),
        None => PathBuf::from(set("HOME")?).join(".config").join("gcloud"),
    };
    let read = |path: PathBuf| std::fs::read_to_string(path).ok();
    let active = set("CLOUDSDK_ACTIVE_CONFIG_NAME")
        .or_else(|| read(dir.join("active_config")).filter(|t| !t.is_empty()));
    let text = match active {
        Some(name) => read(dir.join("configurations").join(format!("config_{name}")))?,
        None => read(dir.join("properties"))?,
    };
    property(&text, "core", "project")
}

/// A property of a gcloud properties file (INI: `[section]`, then
/// `key = value` lines; `#` and `;` start comments).
fn property(text: &str, section: &str, key: &str) -> Option<String> {
    let mut current = String::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = name.trim().to_string();
            continue;
        }
        let Some((k, v)) = line.split_once('=').or_else(|| line.split_once(':')) else {
            continue;
        };
        if current == section && k.trim() == key {
            return Some(v.trim().to_string()).filter(|v| !v.is_empty());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn lookup(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: BTreeMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn reads_the_active_configuration() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("gcloud");
        std::fs::create_dir_all(dir.join("configurations")).unwrap();
        std::fs::write(
            dir.join("configurations/config_default"),
            "[core]\naccount = me@example.com\nproject = from-default\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("configurations/config_work"),
            "# work\n[compute]\nproject = not-this\n[core]\nproject =  work-project \n",
        )
        .unwrap();
        let config = dir.to_str().unwrap();

        // No active_config: gcloud's legacy properties file.
        let env = lookup(&[("CLOUDSDK_CONFIG", config)]);
        assert_eq!(default_project(&env), None);
        std::fs::write(dir.join("properties"), "[core]\nproject = legacy\n").unwrap();
        assert_eq!(default_project(&env).as_deref(), Some("legacy"));
        // The file names the active configuration, as written.
        std::fs::write(dir.join("active_config"), "work\n").unwrap();
        assert_eq!(default_project(&env), None);
        std::fs::write(dir.join("active_config"), "work").unwrap();
        assert_eq!(default_project(&env).as_deref(), Some("work-project"));
        // The environment overrides the file, and the project variable everything.
        let env = lookup(&[
            ("CLOUDSDK_CONFIG", config),
            ("CLOUDSDK_ACTIVE_CONFIG_NAME", "default"),
        ]);
        assert_eq!(default_project(&env).as_deref(), Some("from-default"));
        let env = lookup(&[
            ("CLOUDSDK_CONFIG", config),
            ("CLOUDSDK_CORE_PROJECT", "env-project"),
        ]);
        assert_eq!(default_project(&env).as_deref(), Some("env-project"));
        // ~/.config/gcloud when CLOUDSDK_CONFIG is not set.
        let home = tmp.path().join("home");
        std::fs::create_dir_all(home.join(".config")).unwrap();
        std::fs::rename(&dir, home.join(".config/gcloud")).unwrap();
        let env = lookup(&[("HOME", home.to_str().unwrap())]);
        assert_eq!(default_project(&env).as_deref(), Some("work-project"));
    }

    #[test]
    fn no_project() {
        let tmp = tempfile::tempdir().unwrap();
        let config = tmp.path().to_str().unwrap();
        assert_eq!(
            default_project(&lookup(&[("CLOUDSDK_CONFIG", config)])),
            None
        );
        std::fs::create_dir_all(tmp.path().join("configurations")).unwrap();
        std::fs::write(
            tmp.path().join("configurations/config_default"),
            "[core]\naccount = me@example.com\n[compute]\nproject = elsewhere\n",
        )
        .unwrap();
        assert_eq!(
            default_project(&lookup(&[("CLOUDSDK_CONFIG", config)])),
            None
        );
        assert_eq!(default_project(&lookup(&[])), None);
    }
}
