//! What the vcsim tests of kops-vsphere share.

use std::collections::BTreeMap;

use kops_testkit::vcsim::{self, Vcsim};
use kops_vsphere::cluster::{self, GroupSpec, Placement};
use kops_vsphere::vcenter::Vcenter;
use kops_vsphere::Credentials;

/// A session on the simulator with its test credentials.
pub async fn login(sim: &Vcsim) -> Vcenter {
    let credentials = Credentials {
        username: vcsim::USER.into(),
        password: vcsim::PASSWORD.into(),
    };
    Vcenter::login(sim.url(), &credentials).await.unwrap()
}

/// An update in a session of its own (so its calls are its own) that
/// must change nothing and make no changing call; the session, still
/// open, and its calls.
pub async fn no_op_update(
    sim: &Vcsim,
    cluster: &str,
    placement: &Placement,
    groups: &[GroupSpec],
) -> (Vcenter, BTreeMap<String, u64>) {
    let vc = login(sim).await;
    let resolved = cluster::resolve(&vc, placement, groups).await.unwrap();
    let changes = cluster::update(&vc, cluster, placement, resolved, groups, true)
        .await
        .unwrap();
    assert!(
        changes.is_empty() && changes.stale.is_empty(),
        "{changes:?}"
    );
    let calls = vc.client.calls();
    assert_eq!(kops_vsphere::changing_calls(&calls), 0, "{calls:?}");
    (vc, calls)
}
