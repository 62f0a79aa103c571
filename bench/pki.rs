//! Time of the PKI steps: a new CA (RSA 2048 key + self-signed certificate),
//! one client certificate issued from it, and `ensure_cluster_pki` on a
//! file:// store for a cluster with two etcd clusters (8 keysets and 9
//! secrets), then its second run (nothing to do). Prints numbers; asserts
//! nothing.
//!
//! usage: cargo run --release -p kops-pki --example pki_bench [RUNS]

use std::sync::Arc;
use std::time::{Duration, Instant};

use kops_pki::{CertificateAuthority, IssueRequest};

fn stats(name: &str, samples: &mut [Duration]) {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{name:<40} min {:>8.1} ms  median {:>8.1} ms  max {:>8.1} ms  ({} runs)",
        ms(samples[0]),
        ms(samples[samples.len() / 2]),
        ms(samples[samples.len() - 1]),
        samples.len()
    );
}

fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10)
        .max(1);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");

    let mut ca_times = Vec::new();
    let mut issue_times = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        let ca = CertificateAuthority::generate("kubernetes-ca").expect("ca");
        ca_times.push(t.elapsed());
        let t = Instant::now();
        ca.issue(&IssueRequest::client(
            "kubecfg-bench",
            Some("system:masters"),
        ))
        .expect("issue");
        issue_times.push(t.elapsed());
    }
    stats("new CA (RSA 2048, self-signed)", &mut ca_times);
    stats("issue a client certificate", &mut issue_times);

    let cluster: kops_api::Cluster = kops_api::manifest::parse_one(
        "bench",
        "apiVersion: kops.k8s.io/v1alpha2\nkind: Cluster\nmetadata:\n  name: bench.example.com\nspec:\n  etcdClusters:\n  - name: main\n  - name: events\n",
    )
    .expect("cluster");
    let mut first = Vec::new();
    let mut second = Vec::new();
    for _ in 0..runs {
        let dir = tempfile::tempdir().expect("tempdir");
        let store: Arc<dyn kops_state::ObjectStore> =
            Arc::new(kops_state::FileStore::at(dir.path()));
        let t = Instant::now();
        rt.block_on(kops_pki::ensure_cluster_pki(&store, &cluster))
            .expect("ensure");
        first.push(t.elapsed());
        let t = Instant::now();
        rt.block_on(kops_pki::ensure_cluster_pki(&store, &cluster))
            .expect("ensure again");
        second.push(t.elapsed());
    }
    stats("ensure_cluster_pki, first run (file://)", &mut first);
    stats("ensure_cluster_pki, second run", &mut second);
}
