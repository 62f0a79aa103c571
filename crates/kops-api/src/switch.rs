//! Switching a cluster between kops and kops-rs without two kops-controllers
//! on one port.
//!
//! kops runs kops-controller as a DaemonSet on the control plane (host
//! network, port 3988), scheduled on nodes labelled
//! `node-role.kubernetes.io/control-plane` and `kops.k8s.io/kops-controller-pki`;
//! kops-rs' nodeup runs it as a host service on the same port. Both
//! tools' labellers give every control-plane node both labels, so the
//! DaemonSet alone would land on a node kops-rs' nodeup set up.
//!
//! The rule: kops-rs' nodeup registers its control-plane kubelets with
//! [`HOST_CONTROLLER_LABEL`]; wherever kops' DaemonSet is kept (on a
//! cluster kops made, and whenever kops-rs' addon applier applies kops'
//! addon), its node affinity also requires that label to be absent
//! ([`bridge_manifest`]), and its RBAC binding also names the host
//! service's user, so each control-plane node runs exactly one of the two.

use std::borrow::Cow;

/// The label kops-rs' nodeup gives a control-plane kubelet that runs
/// kops-controller as a host service (value [`HOST_CONTROLLER_VALUE`]).
/// Not in the `kubernetes.io`/`k8s.io` namespaces, so a kubelet may set it
/// on itself when it registers, before any pod is scheduled.
pub const HOST_CONTROLLER_LABEL: &str = "kops-rs.io/kops-controller";

/// [`HOST_CONTROLLER_LABEL`]'s value.
pub const HOST_CONTROLLER_VALUE: &str = "host";

/// The channel addon of kops-controller.
pub const KOPS_CONTROLLER_ADDON: &str = "kops-controller.addons.k8s.io";

/// The user kops-rs' host kops-controller authenticates as.
pub const HOST_CONTROLLER_USER: &str = "system:kops-controller";

/// The node-affinity expression kops' DaemonSet requires.
const PKI_LABEL_KEY: &str = "- key: kops.k8s.io/kops-controller-pki";

/// The subject kops' ClusterRoleBinding names.
const SERVICE_ACCOUNT_USER: &str = "name: system:serviceaccount:kube-system:kops-controller";

/// Whether a kops-controller addon manifest is kops' (runs the controller
/// in a DaemonSet) rather than kops-rs' (ConfigMap and RBAC only).
pub fn runs_in_a_pod(manifest: &str) -> bool {
    manifest.lines().any(|l| l.trim_end() == "kind: DaemonSet")
}

/// kops' kops-controller addon, kept for the nodes that run it: the
/// DaemonSet's node affinity also requires [`HOST_CONTROLLER_LABEL`] to be
/// absent (it leaves, and never lands on, nodes kops-rs' nodeup set up),
/// and its ClusterRoleBinding also binds [`HOST_CONTROLLER_USER`] (so the
/// host service may label nodes). Everything else keeps kops' bytes. A
/// manifest already bridged, or kops-rs' own, is returned as it is. An
/// error names what kops' manifest lacks when its shape is unknown (no
/// `kops.k8s.io/kops-controller-pki` affinity term): then the DaemonSet
/// cannot be kept off those nodes.
pub fn bridge_manifest(manifest: &str) -> Result<Cow<'_, str>, String> {
    if !runs_in_a_pod(manifest) {
        return Ok(Cow::Borrowed(manifest));
    }
    let marker = format!("- key: {HOST_CONTROLLER_LABEL}");
    let has_exclusion = manifest.lines().any(|l| l.trim() == marker);
    let has_user = manifest
        .lines()
        .any(|l| l.trim() == format!("name: {HOST_CONTROLLER_USER}"));
    if has_exclusion && has_user {
        return Ok(Cow::Borrowed(manifest));
    }
    let lines: Vec<&str> = manifest.split('\n').collect();
    let mut out: Vec<String> = Vec::with_capacity(lines.len() + 6);
    let (mut excluded, mut bound) = (has_exclusion, has_user);
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        out.push(line.to_string());
        let indent = &line[..line.len() - line.trim_start().len()];
        if !has_exclusion && line.trim() == PKI_LABEL_KEY {
            // The term's `operator:` line follows; the exclusion goes after it.
            if let Some(next) = lines.get(i + 1) {
                if next.trim_start().starts_with("operator:") {
                    out.push(next.to_string());
                    i += 1;
                }
            }
            out.push(format!("{indent}{marker}"));
            out.push(format!("{indent}  operator: DoesNotExist"));
            excluded = true;
        } else if !has_user && line.trim() == SERVICE_ACCOUNT_USER && indent.len() >= 2 {
            // `- apiGroup: …` opens the subject two columns to the left.
            let item = &indent[..indent.len() - 2];
            out.push(format!("{item}- apiGroup: rbac.authorization.k8s.io"));
            out.push(format!("{indent}kind: User"));
            out.push(format!("{indent}name: {HOST_CONTROLLER_USER}"));
            bound = true;
        }
        i += 1;
    }
    if !excluded {
        return Err("kops' kops-controller DaemonSet has no `kops.k8s.io/kops-controller-pki` node-affinity term, \
             so it cannot be kept off nodes that run kops-rs' kops-controller"
            .to_string());
    }
    if !bound {
        return Err("kops' kops-controller ClusterRoleBinding does not name `system:serviceaccount:kube-system:kops-controller`, \
             so kops-rs' host kops-controller cannot be added to it"
            .to_string());
    }
    Ok(Cow::Owned(out.join("\n")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KOPS: &str = "kind: DaemonSet\nspec:\n  template:\n    spec:\n      affinity:\n        nodeAffinity:\n          requiredDuringSchedulingIgnoredDuringExecution:\n            nodeSelectorTerms:\n            - matchExpressions:\n              - key: node-role.kubernetes.io/control-plane\n                operator: Exists\n              - key: kops.k8s.io/kops-controller-pki\n                operator: Exists\n      containers: []\n\n---\n\nkind: ClusterRoleBinding\nsubjects:\n- apiGroup: rbac.authorization.k8s.io\n  kind: User\n  name: system:serviceaccount:kube-system:kops-controller\n\n---\n\nkind: Role";

    #[test]
    fn kops_daemonset_leaves_nodes_with_the_host_service() {
        let bridged = bridge_manifest(KOPS).unwrap();
        assert!(bridged.contains(
            "              - key: kops.k8s.io/kops-controller-pki\n                operator: Exists\n              - key: kops-rs.io/kops-controller\n                operator: DoesNotExist\n      containers"
        ), "{bridged}");
        assert!(bridged.contains(
            "  name: system:serviceaccount:kube-system:kops-controller\n- apiGroup: rbac.authorization.k8s.io\n  kind: User\n  name: system:kops-controller\n\n---"
        ), "{bridged}");
        // Only lines added; idempotent.
        assert_eq!(bridged.lines().count(), KOPS.lines().count() + 5);
        assert_eq!(bridge_manifest(&bridged).unwrap(), bridged);
        // kops-rs' own addon has no DaemonSet: untouched.
        let ours = "kind: ConfigMap\n---\nkind: ClusterRoleBinding\n";
        assert!(matches!(bridge_manifest(ours).unwrap(), Cow::Borrowed(_)));
    }

    #[test]
    fn unknown_daemonset_shape_is_refused() {
        let odd = KOPS.replace("kops.k8s.io/kops-controller-pki", "other");
        assert!(bridge_manifest(&odd)
            .unwrap_err()
            .contains("kops-controller-pki"));
    }
}
