//! Whether a run looks for Classic ELBs to retire. Only two kinds of
//! cluster can still have one: a cluster last updated with `class:
//! Classic` (kops 1.36 or earlier, or kops-rs), and one last updated by a
//! kops older than 1.26, when bastions sat behind a Classic ELB. Any other
//! cluster was last updated by a tool that makes none and had already
//! deleted the one a move off Classic replaced, so its runs skip the
//! account-wide Classic ELB listing (kops 1.37 never makes it).

use kops_api::version::KubernetesVersion;

use crate::{OpsError, Registry};

/// The first kops whose bastion has a Network Load Balancer.
const BASTION_NLB_SINCE: KubernetesVersion = KubernetesVersion::new(1, 26, 0);

/// Reads the last update's completed spec and kops version.
pub async fn may_remain(registry: &Registry, cluster: &str) -> Result<bool, OpsError> {
    let version_key = format!("{cluster}/kops-version.txt");
    let (completed, version) = tokio::join!(
        registry.get_completed_spec(cluster),
        registry.store().read(&version_key)
    );
    let Some(completed) = completed? else {
        // Never updated: nothing was built.
        return Ok(false);
    };
    let version = version.map_err(|e| OpsError::Registry(e.into()))?;
    Ok(decide(
        &completed,
        version
            .as_deref()
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .as_deref(),
    ))
}

/// `completed`: the last update's completed spec; `kops_version`: the
/// `kops-version.txt` it wrote beside it, if any.
fn decide(completed: &kops_api::Cluster, kops_version: Option<&str>) -> bool {
    let classic_api = completed.api_load_balancer_class() == Some("Classic");
    let before_bastion_nlb = match kops_version.and_then(KubernetesVersion::parse) {
        Some(v) => (v.major, v.minor) < (BASTION_NLB_SINCE.major, BASTION_NLB_SINCE.minor),
        // Written by every kops for years; an old cluster may lack it.
        None => true,
    };
    classic_api || before_bastion_nlb
}

#[cfg(test)]
mod tests {
    use super::decide;

    fn cluster(class: &str) -> kops_api::Cluster {
        let yaml = format!(
            "apiVersion: kops.k8s.io/v1alpha2\nkind: Cluster\nmetadata:\n  name: a.example.com\nspec:\n  api:\n    loadBalancer:\n      class: {class}\n      type: Public\n"
        );
        kops_api::manifest::parse_one("test", &yaml).unwrap()
    }

    #[test]
    fn only_clusters_that_may_keep_a_classic_elb_are_searched() {
        // Last updated with a Classic API balancer (kops 1.36, or kops-rs).
        assert!(decide(&cluster("Classic"), Some("1.36.2")));
        assert!(decide(&cluster("Classic"), Some("1.37.0-alpha.1")));
        // By a kops whose bastions had a Classic ELB, or one too old to say.
        assert!(decide(&cluster("Network"), Some("1.25.4")));
        assert!(decide(&cluster("Network"), None));
        // Network since kops 1.26: nothing Classic can remain.
        assert!(!decide(&cluster("Network"), Some("1.26.0-beta.1")));
        assert!(!decide(&cluster("Network"), Some("1.37.0-alpha.1\n")));
    }
}
