//! Keypairs, secrets and kubeconfig commands: `get keypairs`, `get secrets`,
//! `create secret`, `delete secret`, `export kubeconfig`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use kops_ops::pki::{self, ExportKubeconfigRequest, KeypairRow};
use kops_ops::Registry;

use crate::cli::*;
use crate::output::{print, status, Table};

async fn state(global: &GlobalArgs) -> Result<Registry> {
    Ok(kops_ops::open_state(global.state.as_deref()).await?)
}

async fn cluster_name(
    registry: &Registry,
    global: &GlobalArgs,
    positional: Option<&str>,
) -> Result<String> {
    let name = positional.or(global.name.as_deref());
    Ok(kops_ops::resolve_cluster_name(registry, name).await?)
}

// ---------------------------------------------------------------- get

pub async fn get_keypairs(
    global: &GlobalArgs,
    names: &[String],
    distrusted: bool,
    output: GetOutput,
) -> Result<i32> {
    let registry = state(global).await?;
    let cluster = cluster_name(&registry, global, None).await?;
    let rows = pki::list_keypairs(&registry, &cluster, names, distrusted).await?;
    match output {
        GetOutput::Json => print(&format!("{}\n", serde_json::to_string_pretty(&rows)?)),
        GetOutput::Yaml => print(&serde_yaml_ng::to_string(&rows)?),
        GetOutput::Plaintext => bail!(
            "`-o plaintext` is for secrets\nhint: `kops get keypairs` prints a table, `-o yaml` or `-o json`"
        ),
        GetOutput::Table => print(&keypairs_table(&rows, distrusted)),
    }
    Ok(0)
}

fn keypairs_table(rows: &[KeypairRow], distrusted: bool) -> String {
    let mut headers = vec!["NAME", "ID", "ISSUED", "EXPIRES"];
    if distrusted {
        headers.push("DISTRUSTED");
    }
    headers.extend(["PRIMARY", "HASPRIVATE"]);
    let mut t = Table::new(&headers);
    let date = |t: Option<i64>| t.map(kops_pki::format_date).unwrap_or_default();
    let star = |b: bool| if b { "*" } else { "" }.to_string();
    for r in rows {
        let mut cells = vec![
            r.name.clone(),
            r.id.clone(),
            date(r.not_before),
            date(r.not_after),
        ];
        if distrusted {
            cells.push(
                r.distrust_timestamp
                    .as_deref()
                    .map(|d| d.chars().take(10).collect())
                    .unwrap_or_default(),
            );
        }
        cells.push(star(r.is_primary));
        cells.push(star(r.has_private_key));
        t.row(cells);
    }
    t.render()
}

pub async fn get_secrets(global: &GlobalArgs, names: &[String], output: GetOutput) -> Result<i32> {
    let registry = state(global).await?;
    let cluster = cluster_name(&registry, global, None).await?;
    match output {
        GetOutput::Plaintext => {
            // The values only when asked for, one per line, as kops prints them.
            for (_, data) in pki::secret_values(&registry, &cluster, names).await? {
                print(&format!("{}\n", String::from_utf8_lossy(&data)));
            }
        }
        GetOutput::Table => {
            let items = pki::list_secrets(&registry, &cluster, names).await?;
            let mut t = Table::new(&["NAME"]);
            for i in items {
                t.row(vec![i]);
            }
            print(&t.render());
        }
        GetOutput::Json | GetOutput::Yaml => {
            let items = pki::list_secrets(&registry, &cluster, names).await?;
            let values: Vec<serde_json::Value> = items
                .into_iter()
                .map(|name| serde_json::json!({ "name": name }))
                .collect();
            if output == GetOutput::Json {
                print(&format!("{}\n", serde_json::to_string_pretty(&values)?));
            } else {
                print(&serde_yaml_ng::to_string(&values)?);
            }
        }
    }
    Ok(0)
}

// ---------------------------------------------------------------- create / delete

pub async fn create_secret(global: &GlobalArgs, a: CreateSecretArgs) -> Result<i32> {
    // The type first: an unknown one fails before anything is read.
    pki::SecretKind::parse(&a.kind)?;
    let data = if a.filename == Path::new("-") {
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut buf)
            .context("reading the secret from stdin")?;
        buf
    } else {
        std::fs::read(&a.filename).map_err(|source| kops_ops::OpsError::ReadFile {
            path: a.filename.display().to_string(),
            source,
        })?
    };
    let registry = state(global).await?;
    let cluster = cluster_name(&registry, global, a.cluster_name.as_deref()).await?;
    let kind = pki::create_secret(&registry, &cluster, &a.kind, &data, a.force).await?;
    status(&format!(
        "{} the {} secret of cluster {cluster}",
        if a.force { "Stored" } else { "Created" },
        kind.name()
    ));
    Ok(0)
}

pub async fn delete_secret(global: &GlobalArgs, names: &[String]) -> Result<i32> {
    let registry = state(global).await?;
    let cluster = cluster_name(&registry, global, None).await?;
    let existing = pki::list_secrets(&registry, &cluster, names).await?;
    for n in names {
        if !existing.contains(n) {
            bail!("secret `{n}` not found in cluster `{cluster}`\nhint: `kops get secrets --name {cluster}` lists them");
        }
    }
    let (_, secrets) = pki::cluster_keystore(&registry, &cluster);
    for n in &existing {
        secrets.delete(n).await.map_err(kops_ops::OpsError::from)?;
        status(&format!("Deleted secret {n} of cluster {cluster}"));
    }
    Ok(0)
}

// ---------------------------------------------------------------- export

/// The local user's name as kops puts it in `kubecfg-<name>`: the name field
/// of the password database entry, else `$USER`.
fn local_user_name() -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let uid = std::fs::metadata("/proc/self").ok().map(|m| m.uid());
    let from_passwd = uid.and_then(|uid| {
        let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
        passwd.lines().find_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            (fields.len() > 4 && fields[2] == uid.to_string()).then(|| {
                let gecos = fields[4].split(',').next().unwrap_or("").trim();
                if gecos.is_empty() {
                    fields[0].to_string()
                } else {
                    gecos.to_string()
                }
            })
        })
    });
    from_passwd.or_else(|| std::env::var("USER").ok().filter(|u| !u.is_empty()))
}

fn parse_admin(text: &str) -> Result<Duration> {
    match humantime::parse_duration(text.trim()) {
        Ok(d) => Ok(d),
        Err(e) => bail!("`--admin={text}` is not a duration ({e})\nhint: write e.g. `--admin=18h` or `--admin=1h30m`; `--admin` alone means 18h"),
    }
}

pub async fn export(global: &GlobalArgs, args: ExportArgs) -> Result<i32> {
    match args.what {
        ExportCommand::Kubeconfig(a) => export_kubeconfig(global, a).await,
    }
}

async fn export_kubeconfig(global: &GlobalArgs, a: ExportKubeconfigArgs) -> Result<i32> {
    let admin = a.admin.as_deref().map(parse_admin).transpose()?;
    if admin.is_some() && a.user.is_some() {
        return Err(pki::PkiOpsError::AdminAndUser.into());
    }
    if a.all && a.cluster_name.is_some() {
        bail!("cannot use both --all and a cluster name\nhint: `kops export kubeconfig --all` exports every cluster in the state store");
    }
    let files = kops_pki::KubeconfigFiles::resolve(
        a.kubeconfig.as_deref(),
        std::env::var("KUBECONFIG").ok().as_deref(),
        std::env::var_os("HOME").map(PathBuf::from).as_deref(),
    )
    .map_err(kops_ops::OpsError::from)?;
    let registry = state(global).await?;
    let clusters = if a.all {
        let all: Vec<String> = registry
            .list_clusters()
            .await?
            .iter()
            .map(|c| c.name().to_string())
            .collect();
        if all.is_empty() {
            bail!(
                "no clusters found in {}\nhint: check --state",
                registry.store().base_url()
            );
        }
        all
    } else {
        vec![cluster_name(&registry, global, a.cluster_name.as_deref()).await?]
    };
    for cluster in clusters {
        let outcome = pki::export_kubeconfig(
            &registry,
            ExportKubeconfigRequest {
                cluster,
                admin,
                user: a.user.clone(),
                internal: a.internal,
                api_server: a.api_server.clone(),
                files: files.clone(),
                local_user: local_user_name(),
                lookup_load_balancer: true,
                sdk_config: None,
            },
        )
        .await?;
        for w in &outcome.warnings {
            status(&format!("Warning: {w}"));
        }
        status(&format!(
            "kOps has set your kubectl context to {} (server {}, in {})",
            outcome.context,
            outcome.server,
            outcome
                .files_written
                .iter()
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(0)
}

// ---------------------------------------------------------------- rotation

fn read_pem(path: &Path) -> Result<String> {
    Ok(
        std::fs::read_to_string(path).map_err(|source| kops_ops::OpsError::ReadFile {
            path: path.display().to_string(),
            source,
        })?,
    )
}

pub async fn create_keypair(global: &GlobalArgs, a: CreateKeypairArgs) -> Result<i32> {
    let new = pki::NewKeypair {
        certificate_pem: a.cert.as_deref().map(read_pem).transpose()?,
        private_key_pem: a.key.as_deref().map(read_pem).transpose()?,
        primary: a.primary,
    };
    let registry = state(global).await?;
    let cluster = cluster_name(&registry, global, None).await?;
    for (keyset, id) in pki::create_keypair(&registry, &cluster, &a.keyset, &new).await? {
        status(&format!("Created {keyset} {id}"));
    }
    Ok(0)
}

pub async fn promote(global: &GlobalArgs, args: PromoteArgs) -> Result<i32> {
    let PromoteCommand::Keypair { keyset, id } = args.what;
    let registry = state(global).await?;
    let cluster = cluster_name(&registry, global, None).await?;
    for (name, promoted) in
        pki::promote_keypair(&registry, &cluster, &keyset, id.as_deref()).await?
    {
        match promoted {
            Some(id) => status(&format!("Promoted {name} {id}")),
            None => status(&format!("No {name} keypair newer than the current primary")),
        }
    }
    Ok(0)
}

pub async fn distrust(global: &GlobalArgs, args: DistrustArgs) -> Result<i32> {
    let DistrustCommand::Keypair { keyset, ids } = args.what;
    let registry = state(global).await?;
    let cluster = cluster_name(&registry, global, None).await?;
    let done = pki::distrust_keypair(&registry, &cluster, &keyset, &ids).await?;
    if done.is_empty() {
        status(&format!("No {keyset} keypairs older than the primary"));
    }
    for (name, id) in done {
        status(&format!("Distrusted {name} {id}"));
    }
    Ok(0)
}
