//! `--set path=value` and `--unset path` on a Cluster or InstanceGroup, as kops
//! applies them (`cluster.spec.kubeProxy.enabled=false`).
