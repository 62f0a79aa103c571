//! kubeconfig files: merging one cluster's cluster, user and context entries
//! into the files kubectl reads, the way client-go's `ModifyConfig` does.
//!
//! - Which files: `--kubeconfig FILE` alone; else every path in `KUBECONFIG`
//!   (`:`-separated); else `~/.kube/config`.
//! - An entry that exists in one of the files is updated in the first file
//!   that has it; a new entry goes to the default file (the first listed file
//!   that exists, else the last one). `current-context` goes to the first file
//!   that sets one, else the default file.
//! - Everything else in the files (other clusters, users, unknown fields) is
//!   kept. Files are written atomically with mode 0600.

use std::io::Write;
use std::path::{Path, PathBuf};

use base64::Engine;
use serde_yaml_ng::{Mapping, Value};

use crate::PkiError;

/// The credentials an exported context uses.
#[derive(Clone, PartialEq, Eq)]
pub enum KubeconfigUser {
    /// No credentials: the context keeps whatever user it had.
    None,
    /// A user that must already exist in the kubeconfig (`--user`).
    Existing(String),
    /// A client certificate and key written under the context's name (`--admin`).
    Certificate {
        certificate_pem: String,
        private_key_pem: String,
    },
    /// An exec credential plugin written under the context's name
    /// (`--auth-plugin`: `kops helpers kubectl-auth ...`); any client
    /// certificate the user had is removed.
    Exec {
        api_version: String,
        command: String,
        args: Vec<String>,
    },
}

impl std::fmt::Debug for KubeconfigUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KubeconfigUser::None => f.write_str("None"),
            KubeconfigUser::Existing(u) => f.debug_tuple("Existing").field(u).finish(),
            KubeconfigUser::Certificate { .. } => f.write_str("Certificate([secret])"),
            KubeconfigUser::Exec { command, args, .. } => {
                f.debug_tuple("Exec").field(command).field(args).finish()
            }
        }
    }
}

/// One cluster's entries: the cluster, context and (for certificates) user
/// all carry `name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeconfigEntry {
    pub name: String,
    /// `https://api.example.com` or the load balancer's name.
    pub server: String,
    /// The name the API server's certificate is checked against.
    pub tls_server_name: Option<String>,
    /// The CA bundle (PEM) clients trust; `None` leaves the system's roots.
    pub certificate_authority_pem: Option<String>,
    pub user: KubeconfigUser,
}

/// The kubeconfig files to read and write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeconfigFiles {
    pub files: Vec<PathBuf>,
}

impl KubeconfigFiles {
    /// `explicit` (`--kubeconfig`), else the `KUBECONFIG` value, else
    /// `<home>/.kube/config`.
    pub fn resolve(
        explicit: Option<&Path>,
        kubeconfig_env: Option<&str>,
        home: Option<&Path>,
    ) -> Result<Self, PkiError> {
        if let Some(p) = explicit.filter(|p| !p.as_os_str().is_empty()) {
            return Ok(KubeconfigFiles {
                files: vec![p.to_path_buf()],
            });
        }
        let from_env: Vec<PathBuf> = kubeconfig_env
            .unwrap_or_default()
            .split(':')
            .filter(|s| !s.trim().is_empty())
            .map(PathBuf::from)
            .collect();
        let mut files = Vec::new();
        for f in from_env {
            if !files.contains(&f) {
                files.push(f);
            }
        }
        if files.is_empty() {
            let home = home.ok_or_else(|| PkiError::Kubeconfig {
                path: "~/.kube/config".into(),
                action: "found",
                reason: "HOME is not set\nhint: pass `--kubeconfig FILE` or set KUBECONFIG".into(),
            })?;
            files.push(home.join(".kube").join("config"));
        }
        Ok(KubeconfigFiles { files })
    }

    /// Where new entries go: the first file that exists, else the last one.
    fn default_index(&self) -> usize {
        self.files
            .iter()
            .position(|f| f.exists())
            .unwrap_or(self.files.len() - 1)
    }

    pub fn describe(&self) -> String {
        self.files
            .iter()
            .map(|f| f.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Whether a context named `name` is in the files (kops' test for a
    /// cluster's first `update --yes`); unreadable files count as having it.
    pub fn has_context(&self, name: &str) -> bool {
        self.files.iter().any(|f| match read_config(f) {
            Ok(doc) => find_named(&doc, "contexts", name).is_some(),
            Err(_) => true,
        })
    }

    /// Merges `entry` into the files and makes it the current context.
    /// Returns the files written.
    pub fn write_entry(&self, entry: &KubeconfigEntry) -> Result<Vec<PathBuf>, PkiError> {
        let mut docs = Vec::new();
        for f in &self.files {
            docs.push(read_config(f)?);
        }
        let default = self.default_index();
        let mut touched = vec![false; docs.len()];

        // Where each named entry lives now.
        let holder = |docs: &[Mapping], section: &str, name: &str| {
            docs.iter()
                .position(|d| find_named(d, section, name).is_some())
        };

        // The user.
        let mut context_user: Option<String> = None;
        match &entry.user {
            KubeconfigUser::None => {}
            KubeconfigUser::Existing(user) => {
                if holder(&docs, "users", user).is_none() {
                    return Err(PkiError::KubeconfigUserNotFound {
                        user: user.clone(),
                        files: self.describe(),
                    });
                }
                context_user = Some(user.clone());
            }
            KubeconfigUser::Certificate {
                certificate_pem,
                private_key_pem,
            } => {
                let i = holder(&docs, "users", &entry.name).unwrap_or(default);
                let user = named_body(&mut docs[i], "users", "user", &entry.name);
                user.remove("client-certificate");
                user.remove("client-key");
                user.insert(
                    "client-certificate-data".into(),
                    b64(certificate_pem).into(),
                );
                user.insert("client-key-data".into(), b64(private_key_pem).into());
                touched[i] = true;
                context_user = Some(entry.name.clone());
            }
            KubeconfigUser::Exec {
                api_version,
                command,
                args,
            } => {
                let i = holder(&docs, "users", &entry.name).unwrap_or(default);
                let user = named_body(&mut docs[i], "users", "user", &entry.name);
                for key in [
                    "client-certificate",
                    "client-certificate-data",
                    "client-key",
                    "client-key-data",
                ] {
                    user.remove(key);
                }
                // The fields and order kubectl's own writer gives an exec entry.
                let mut exec = Mapping::new();
                exec.insert("apiVersion".into(), api_version.clone().into());
                exec.insert(
                    "args".into(),
                    Value::Sequence(args.iter().cloned().map(Value::from).collect()),
                );
                exec.insert("command".into(), command.clone().into());
                exec.insert("env".into(), Value::Null);
                exec.insert("provideClusterInfo".into(), false.into());
                user.insert("exec".into(), Value::Mapping(exec));
                touched[i] = true;
                context_user = Some(entry.name.clone());
            }
        }

        // The cluster.
        {
            let i = holder(&docs, "clusters", &entry.name).unwrap_or(default);
            let cluster = named_body(&mut docs[i], "clusters", "cluster", &entry.name);
            cluster.insert("server".into(), entry.server.clone().into());
            match &entry.tls_server_name {
                Some(n) => cluster.insert("tls-server-name".into(), n.clone().into()),
                None => cluster.remove("tls-server-name"),
            };
            match &entry.certificate_authority_pem {
                Some(ca) => {
                    cluster.remove("certificate-authority");
                    cluster.insert("certificate-authority-data".into(), b64(ca).into())
                }
                None => cluster.remove("certificate-authority-data"),
            };
            touched[i] = true;
        }

        // The context.
        {
            let i = holder(&docs, "contexts", &entry.name).unwrap_or(default);
            let context = named_body(&mut docs[i], "contexts", "context", &entry.name);
            context.insert("cluster".into(), entry.name.clone().into());
            if let Some(user) = context_user {
                context.insert("user".into(), user.into());
            }
            touched[i] = true;
        }

        // The current context.
        {
            let i = docs
                .iter()
                .position(|d| {
                    d.get("current-context")
                        .and_then(Value::as_str)
                        .is_some_and(|c| !c.is_empty())
                })
                .unwrap_or(default);
            let current = Value::from(entry.name.clone());
            if docs[i].get("current-context") != Some(&current) {
                docs[i].insert("current-context".into(), current);
                touched[i] = true;
            }
        }

        let mut written = Vec::new();
        for (i, doc) in docs.into_iter().enumerate() {
            if touched[i] {
                write_config(&self.files[i], &doc)?;
                written.push(self.files[i].clone());
            }
        }
        Ok(written)
    }
}

fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text.as_bytes())
}

fn read_config(path: &Path) -> Result<Mapping, PkiError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => {
            return Err(PkiError::Kubeconfig {
                path: path.display().to_string(),
                action: "read",
                reason: e.to_string(),
            })
        }
    };
    if text.trim().is_empty() {
        return Ok(Mapping::new());
    }
    match serde_yaml_ng::from_str::<Value>(&text) {
        Ok(Value::Mapping(m)) => Ok(m),
        Ok(Value::Null) => Ok(Mapping::new()),
        Ok(_) => Err(PkiError::Kubeconfig {
            path: path.display().to_string(),
            action: "read",
            reason:
                "it is not a YAML mapping\nhint: fix the file or pass another with `--kubeconfig`"
                    .into(),
        }),
        Err(e) => Err(PkiError::Kubeconfig {
            path: path.display().to_string(),
            action: "read",
            reason: format!("{e}\nhint: fix the file or pass another with `--kubeconfig`"),
        }),
    }
}

/// The entry `name` of the list `section`, if present.
fn find_named<'a>(doc: &'a Mapping, section: &str, name: &str) -> Option<&'a Mapping> {
    doc.get(section)?
        .as_sequence()?
        .iter()
        .filter_map(Value::as_mapping)
        .find(|m| m.get("name").and_then(Value::as_str) == Some(name))
}

/// The body (`cluster:`, `user:` or `context:`) of the entry `name` in the list
/// `section`, created when missing.
fn named_body<'a>(doc: &'a mut Mapping, section: &str, body: &str, name: &str) -> &'a mut Mapping {
    if !doc.get(section).is_some_and(Value::is_sequence) {
        doc.insert(section.into(), Value::Sequence(Vec::new()));
    }
    let Some(Value::Sequence(list)) = doc.get_mut(section) else {
        unreachable!("the section was just made a sequence")
    };
    let index = match list
        .iter()
        .position(|v| v.get("name").and_then(Value::as_str) == Some(name))
    {
        Some(i) => i,
        None => {
            let mut entry = Mapping::new();
            entry.insert(body.into(), Value::Mapping(Mapping::new()));
            entry.insert("name".into(), name.into());
            list.push(Value::Mapping(entry));
            list.len() - 1
        }
    };
    let Some(Value::Mapping(entry)) = list.get_mut(index) else {
        unreachable!("entries are mappings")
    };
    if !entry.get(body).is_some_and(Value::is_mapping) {
        entry.insert(body.into(), Value::Mapping(Mapping::new()));
    }
    match entry.get_mut(body) {
        Some(Value::Mapping(m)) => m,
        _ => unreachable!("the body was just made a mapping"),
    }
}

fn write_config(path: &Path, doc: &Mapping) -> Result<(), PkiError> {
    let err = |action: &'static str, e: std::io::Error| PkiError::Kubeconfig {
        path: path.display().to_string(),
        action,
        reason: e.to_string(),
    };
    // A new file gets kubectl's fixed fields.
    let mut doc = doc.clone();
    for (k, v) in [
        ("apiVersion", Value::from("v1")),
        ("kind", Value::from("Config")),
        ("preferences", Value::Mapping(Mapping::new())),
    ] {
        if !doc.contains_key(k) {
            doc.insert(k.into(), v);
        }
    }
    sort_top_level(&mut doc);
    let text =
        serde_yaml_ng::to_string(&Value::Mapping(doc)).map_err(|e| PkiError::Kubeconfig {
            path: path.display().to_string(),
            action: "written",
            reason: e.to_string(),
        })?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir).map_err(|e| err("written", e))?;
    let mut tmp = tempfile_in(&dir).map_err(|e| err("written", e))?;
    tmp.1
        .write_all(text.as_bytes())
        .and_then(|()| tmp.1.sync_all())
        .map_err(|e| err("written", e))?;
    std::fs::rename(&tmp.0, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp.0);
        err("written", e)
    })
}

/// A new 0600 file next to the target.
fn tempfile_in(dir: &Path) -> std::io::Result<(PathBuf, std::fs::File)> {
    use std::os::unix::fs::OpenOptionsExt;
    for attempt in 0..100u32 {
        let path = dir.join(format!(".kubeconfig-{}-{attempt}.tmp", std::process::id()));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
        {
            Ok(f) => return Ok((path, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other("no free temporary file name"))
}

/// kubectl writes the top-level keys in alphabetical order.
fn sort_top_level(doc: &mut Mapping) {
    let mut entries: Vec<(Value, Value)> = std::mem::take(doc).into_iter().collect();
    entries.sort_by(|a, b| a.0.as_str().cmp(&b.0.as_str()));
    for (k, v) in entries {
        doc.insert(k, v);
    }
}

/// The common name kops gives admin client certificates: `kubecfg-<user>`,
/// with the user's name from the password database (falling back to
/// `$USER`), or `kubecfg` alone when neither is known.
pub fn admin_common_name(user_name: Option<&str>) -> String {
    match user_name.map(str::trim).filter(|n| !n.is_empty()) {
        Some(n) => format!("kubecfg-{n}"),
        None => "kubecfg".to_string(),
    }
}

/// The organization of admin client certificates.
pub const ADMIN_GROUP: &str = "system:masters";

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, user: KubeconfigUser) -> KubeconfigEntry {
        KubeconfigEntry {
            name: name.into(),
            server: format!("https://api.{name}"),
            tls_server_name: Some(format!("api.internal.{name}")),
            certificate_authority_pem: Some("CA".into()),
            user,
        }
    }

    #[test]
    fn resolves_files() {
        let home = Path::new("/home/u");
        assert_eq!(
            KubeconfigFiles::resolve(None, None, Some(home))
                .unwrap()
                .files,
            vec![PathBuf::from("/home/u/.kube/config")]
        );
        assert_eq!(
            KubeconfigFiles::resolve(None, Some("/a::/b:/a"), Some(home))
                .unwrap()
                .files,
            vec![PathBuf::from("/a"), PathBuf::from("/b")]
        );
        assert_eq!(
            KubeconfigFiles::resolve(Some(Path::new("/x")), Some("/a"), Some(home))
                .unwrap()
                .files,
            vec![PathBuf::from("/x")]
        );
        assert!(KubeconfigFiles::resolve(None, None, None).is_err());
    }

    #[test]
    fn merges_without_clobbering() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config");
        std::fs::write(
            &path,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: other\n  cluster:\n    server: https://other\n    proxy-url: http://proxy\nusers:\n- name: other\n  user:\n    token: abc\ncontexts:\n- name: other\n  context:\n    cluster: other\n    user: other\ncurrent-context: other\nextensions: []\n",
        )
        .unwrap();
        let files = KubeconfigFiles {
            files: vec![path.clone()],
        };
        let cert = KubeconfigUser::Certificate {
            certificate_pem: "C".into(),
            private_key_pem: "K".into(),
        };
        files.write_entry(&entry("a.example.com", cert)).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let v: Value = serde_yaml_ng::from_str(&text).unwrap();
        let doc = v.as_mapping().unwrap();
        assert_eq!(doc["current-context"], Value::from("a.example.com"));
        assert!(find_named(doc, "clusters", "other").is_some());
        assert!(find_named(doc, "users", "other").is_some());
        assert!(doc.contains_key("extensions"));
        let c = find_named(doc, "clusters", "a.example.com").unwrap();
        assert_eq!(
            c["cluster"]["server"],
            Value::from("https://api.a.example.com")
        );
        assert_eq!(
            c["cluster"]["certificate-authority-data"],
            Value::from(b64("CA"))
        );
        let u = find_named(doc, "users", "a.example.com").unwrap();
        assert_eq!(u["user"]["client-key-data"], Value::from(b64("K")));
        let x = find_named(doc, "contexts", "a.example.com").unwrap();
        assert_eq!(x["context"]["user"], Value::from("a.example.com"));

        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);

        // Again with --user: the existing user is referenced, nothing duplicated.
        files
            .write_entry(&entry(
                "a.example.com",
                KubeconfigUser::Existing("other".into()),
            ))
            .unwrap();
        let v: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let doc = v.as_mapping().unwrap();
        assert_eq!(doc["clusters"].as_sequence().unwrap().len(), 2);
        let x = find_named(doc, "contexts", "a.example.com").unwrap();
        assert_eq!(x["context"]["user"], Value::from("other"));
        let err = files
            .write_entry(&entry(
                "a.example.com",
                KubeconfigUser::Existing("nobody".into()),
            ))
            .unwrap_err();
        assert!(matches!(err, PkiError::KubeconfigUserNotFound { .. }));
    }

    #[test]
    fn several_files_follow_client_go() {
        let dir = tempfile::tempdir().unwrap();
        let first = dir.path().join("missing");
        let second = dir.path().join("second");
        let third = dir.path().join("third");
        std::fs::write(&second, "current-context: x\n").unwrap();
        std::fs::write(
            &third,
            "clusters:\n- name: a.example.com\n  cluster:\n    server: https://old\n",
        )
        .unwrap();
        let files = KubeconfigFiles {
            files: vec![first.clone(), second.clone(), third.clone()],
        };
        let written = files
            .write_entry(&entry("a.example.com", KubeconfigUser::None))
            .unwrap();
        assert!(!first.exists());
        assert_eq!(written, vec![second.clone(), third.clone()]);
        let s: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(&second).unwrap()).unwrap();
        assert_eq!(s["current-context"], Value::from("a.example.com"));
        assert!(find_named(s.as_mapping().unwrap(), "contexts", "a.example.com").is_some());
        let t: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(&third).unwrap()).unwrap();
        let c = find_named(t.as_mapping().unwrap(), "clusters", "a.example.com").unwrap();
        assert_eq!(
            c["cluster"]["server"],
            Value::from("https://api.a.example.com")
        );
    }

    #[test]
    fn bad_file_is_an_error_and_stays() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config");
        std::fs::write(&path, "- a list\n").unwrap();
        let files = KubeconfigFiles {
            files: vec![path.clone()],
        };
        assert!(files
            .write_entry(&entry("a", KubeconfigUser::None))
            .is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "- a list\n");
    }

    #[test]
    fn admin_names() {
        assert_eq!(admin_common_name(Some("alice")), "kubecfg-alice");
        assert_eq!(admin_common_name(Some(" ")), "kubecfg");
        assert_eq!(admin_common_name(None), "kubecfg");
    }
}
