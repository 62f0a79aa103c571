//! OS packages from apt repositories other than the distribution's, for
//! what kops installs that way: gVisor's `runsc` on worker groups that
//! enable it (its `runsc` package holds `runsc` and the containerd shim
//! `containerd-shim-runsc-v1`). Debian and Ubuntu only, as kops: gVisor
//! publishes no other packages.
//!
//! The repository is planned with the node's other files: its signing key
//! is downloaded (from the project's site, over TLS, as kops does) and
//! written to `/etc/apt/keyrings/<name>.asc`, and its list to
//! `/etc/apt/sources.list.d/<name>.list`, pinned to that key
//! (`signed-by`) and to the node's architecture. kops writes the same list
//! with apt's `$(ARCH)` and adds the key to apt's global keyring with
//! `apt-key`, which recent releases no longer ship (Debian 13, Ubuntu
//! 25.04). After the files are written, packages dpkg does not list as
//! installed are installed with `apt-get`.

use std::path::Path;

use super::command::Runner;
use super::files::PlannedFile;
use super::{Fetcher, Loaded, NodeupError};
use crate::assets::Arch;

/// Where gVisor's signing key is published.
pub const GVISOR_KEYRING_URL: &str = "https://gvisor.dev/archive.key";
/// gVisor's apt repository: its URI, suite and component.
const GVISOR_REPOSITORY: &str = "https://storage.googleapis.com/gvisor/releases release main";

const KEYRINGS_DIR: &str = "/etc/apt/keyrings";
const SOURCES_DIR: &str = "/etc/apt/sources.list.d";

/// A repository apt should know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// The name of its key and list files.
    pub name: &'static str,
    /// Where its signing key is downloaded from.
    pub keyring_url: String,
    /// URI, suite and components, as a `deb` line has them.
    pub repository: &'static str,
}

/// What a node wants from apt.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Wanted {
    pub sources: Vec<Source>,
    pub packages: Vec<&'static str>,
}

impl Wanted {
    pub fn is_empty(&self) -> bool {
        self.sources.is_empty() && self.packages.is_empty()
    }
}

/// What nodeup did about apt packages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PackageAction {
    /// The node wants none.
    None,
    /// The node is not Debian or Ubuntu: nothing was set up (kops skips
    /// them there too).
    NotDebian { packages: Vec<String> },
    /// A dry run, or `--root` is not `/`: repositories planned, nothing
    /// installed.
    Skipped { packages: Vec<String> },
    /// Installed now (empty when everything already was).
    Installed { packages: Vec<String> },
}

/// What the node wants: gVisor's repository and `runsc` when it runs gVisor.
pub fn wanted(loaded: &Loaded, gvisor_keyring_url: &str) -> Wanted {
    if loaded.gvisor().is_none() {
        return Wanted::default();
    }
    Wanted {
        sources: vec![Source {
            name: "gvisor",
            keyring_url: gvisor_keyring_url.to_string(),
            repository: GVISOR_REPOSITORY,
        }],
        packages: vec!["runsc"],
    }
}

/// Whether the system under `root` is Debian or Ubuntu, by the `ID` of
/// its `/etc/os-release`.
pub fn debian_family(root: &Path) -> bool {
    let text = std::fs::read_to_string(root.join("etc/os-release")).unwrap_or_default();
    text.lines()
        .filter_map(|l| l.strip_prefix("ID="))
        .any(|id| matches!(id.trim().trim_matches(['"', '\'']), "debian" | "ubuntu"))
}

/// apt's name for an architecture.
fn dpkg_arch(arch: Arch) -> &'static str {
    match arch {
        Arch::Amd64 => "amd64",
        Arch::Arm64 => "arm64",
    }
}

/// The key and list files of each source, keys downloaded. A download
/// that is not an OpenPGP key (an error page) is refused.
pub async fn source_files(
    fetcher: &Fetcher,
    arch: Arch,
    wanted: &Wanted,
) -> Result<Vec<PlannedFile>, NodeupError> {
    let mut out = Vec::new();
    for source in &wanted.sources {
        let failed = |reason: String| NodeupError::AptSource {
            name: source.name.to_string(),
            url: source.keyring_url.clone(),
            reason,
        };
        let key = fetcher.fetch(&source.keyring_url).await.map_err(failed)?;
        // apt reads armored keys from `.asc` files, binary ones from `.gpg`.
        let extension = match key.first() {
            _ if key.starts_with(b"-----BEGIN PGP PUBLIC KEY BLOCK-----") => "asc",
            Some(0x98..=0x9a | 0xc6) => "gpg",
            _ => {
                return Err(failed(
                    "the download is not an OpenPGP public key".to_string(),
                ))
            }
        };
        let keyring = format!("{KEYRINGS_DIR}/{}.{extension}", source.name);
        let list = format!(
            "deb [arch={} signed-by={keyring}] {}\n",
            dpkg_arch(arch),
            source.repository
        );
        out.push(PlannedFile::new(keyring, 0o644, key));
        out.push(PlannedFile::new(
            format!("{SOURCES_DIR}/{}.list", source.name),
            0o644,
            list,
        ));
    }
    Ok(out)
}

/// Installs the wanted packages dpkg does not list as installed: the
/// package lists are refreshed first (the repositories were just
/// written), then `apt-get install`. Returns the packages installed.
pub fn install(runner: &dyn Runner, wanted: &Wanted) -> Result<Vec<String>, NodeupError> {
    let run = |args: &[&str]| -> Result<(), NodeupError> {
        let failed = |reason: String| NodeupError::Service {
            command: args.join(" "),
            reason,
        };
        let ran = runner.run(args).map_err(failed)?;
        if ran.code == 0 {
            Ok(())
        } else if ran.stderr.is_empty() {
            Err(failed(format!("exit {}", ran.code)))
        } else {
            Err(failed(format!("exit {}: {}", ran.code, ran.stderr)))
        }
    };
    let mut missing = Vec::new();
    for package in &wanted.packages {
        let query = runner
            .run(&["dpkg-query", "-W", "-f=${db:Status-Abbrev}", package])
            .map_err(|reason| NodeupError::Service {
                command: format!("dpkg-query {package}"),
                reason,
            })?;
        // `ii`: wanted and installed; anything else (unknown, removed,
        // half-configured) is installed again.
        if !(query.code == 0 && query.stdout.starts_with("ii")) {
            missing.push(package.to_string());
        }
    }
    if missing.is_empty() {
        return Ok(missing);
    }
    run(&["apt-get", "-q", "update"])?;
    let mut args = vec![
        "env",
        "DEBIAN_FRONTEND=noninteractive",
        "apt-get",
        "-q",
        "install",
        "--yes",
        "--no-install-recommends",
    ];
    args.extend(missing.iter().map(String::as_str));
    run(&args)?;
    Ok(missing)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::command::Ran;
    use std::cell::RefCell;

    /// Records command lines; `dpkg-query` answers `installed`.
    struct Recorder {
        ran: RefCell<Vec<String>>,
        installed: &'static str,
        apt_fails: bool,
    }

    impl Runner for Recorder {
        fn run(&self, args: &[&str]) -> Result<Ran, String> {
            self.ran.borrow_mut().push(args.join(" "));
            Ok(match args[0] {
                "dpkg-query" if self.installed.is_empty() => Ran {
                    code: 1,
                    ..Default::default()
                },
                "dpkg-query" => Ran {
                    stdout: self.installed.into(),
                    ..Default::default()
                },
                "env" if self.apt_fails => Ran {
                    code: 100,
                    stderr: "E: Unable to locate package runsc".into(),
                    ..Default::default()
                },
                _ => Ran::default(),
            })
        }
    }

    fn gvisor() -> Wanted {
        Wanted {
            sources: vec![Source {
                name: "gvisor",
                keyring_url: GVISOR_KEYRING_URL.into(),
                repository: GVISOR_REPOSITORY,
            }],
            packages: vec!["runsc"],
        }
    }

    fn recorder(installed: &'static str, apt_fails: bool) -> Recorder {
        Recorder {
            ran: RefCell::default(),
            installed,
            apt_fails,
        }
    }

    #[test]
    fn a_missing_package_is_installed_after_the_lists_are_refreshed() {
        let runner = recorder("", false);
        assert_eq!(install(&runner, &gvisor()).unwrap(), ["runsc"]);
        assert_eq!(
            runner.ran.borrow().clone(),
            [
                "dpkg-query -W -f=${db:Status-Abbrev} runsc",
                "apt-get -q update",
                "env DEBIAN_FRONTEND=noninteractive apt-get -q install --yes --no-install-recommends runsc",
            ]
        );
    }

    #[test]
    fn an_installed_package_is_left_alone_and_a_removed_one_reinstalled() {
        let runner = recorder("ii ", false);
        assert!(install(&runner, &gvisor()).unwrap().is_empty());
        assert_eq!(runner.ran.borrow().len(), 1);
        let removed = recorder("rc ", false);
        assert_eq!(install(&removed, &gvisor()).unwrap(), ["runsc"]);
    }

    #[test]
    fn a_failed_install_names_the_command_and_apt_error() {
        let runner = recorder("", true);
        let error = install(&runner, &gvisor()).unwrap_err().to_string();
        assert!(error.contains("apt-get -q install"), "{error}");
        assert!(
            error.contains("exit 100: E: Unable to locate package runsc"),
            "{error}"
        );
    }

    #[test]
    fn debian_and_ubuntu_are_told_from_other_systems() {
        let root = tempfile::tempdir().unwrap();
        assert!(!debian_family(root.path()), "no os-release");
        std::fs::create_dir_all(root.path().join("etc")).unwrap();
        for (text, debian) in [
            ("NAME=\"Ubuntu\"\nID=ubuntu\nID_LIKE=debian\n", true),
            ("ID=\"debian\"\n", true),
            (
                "NAME=\"Amazon Linux\"\nID=\"amzn\"\nID_LIKE=\"centos rhel fedora\"\n",
                false,
            ),
            ("ID=flatcar\nID_LIKE=coreos\n", false),
        ] {
            std::fs::write(root.path().join("etc/os-release"), text).unwrap();
            assert_eq!(debian_family(root.path()), debian, "{text}");
        }
    }
}
