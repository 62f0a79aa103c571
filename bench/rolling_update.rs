//! Wall time of a rolling update of 30 worker nodes in 3 instance groups,
//! each replacement taking a fixed boot delay, for: surge 1 (kops' default on
//! AWS), surge 3, and the three groups rolled in parallel
//! (`--parallel-node-groups`) with surge 1 and surge 3.
//!
//! This is a simulation: the production scheduler (`kops_roll::Roller`:
//! surge, drain, terminate, wait for the replacement, validate between
//! steps) runs against an in-process cloud and Kubernetes API, on tokio's
//! paused clock, so a roll of simulated hours takes milliseconds. The
//! simulated autoscaling groups replace a terminated or detached instance
//! with a new one that is in service, and Ready as a node, after the boot
//! delay. kops' default timings are used (15s node interval, 5s post-drain
//! delay, 2 validations 10s apart, a 30s validation tick). Prints numbers;
//! asserts nothing.
//!
//! usage: cargo run -p kops-roll --example rolling_update -- [BOOT_SECONDS]
//! (the clock is simulated, so a debug build measures the same)

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use kops_api::{Cluster, InstanceGroup, Role};
use kops_roll::{
    build_groups, CloudError, Dump, Eviction, Group as GroupInstances, Instance, InstanceDetails,
    Kubernetes, NodeInfo, PodInfo, Provider, RollError, RollOptions, Roller,
};
use tokio::time::Instant;

const CLUSTER: &str = "bench.example.com";
const GROUPS: [&str; 3] = ["nodes-a", "nodes-b", "nodes-c"];
const PER_GROUP: usize = 10;

struct SimInstance {
    id: String,
    version: u32,
    detached: bool,
    in_service_at: Instant,
}

#[derive(Default)]
struct Sim {
    groups: BTreeMap<String, Vec<SimInstance>>,
    next_id: u64,
    boot: Duration,
    api_calls: u64,
    /// Pods evicted (gone at once).
    evicted: std::collections::BTreeSet<String>,
}

impl Sim {
    fn launch(&mut self, group: &str) {
        self.next_id += 1;
        let instance = SimInstance {
            id: format!("i-{:08x}", self.next_id),
            version: 2,
            detached: false,
            in_service_at: Instant::now() + self.boot,
        };
        self.groups.get_mut(group).unwrap().push(instance);
    }
}

#[derive(Clone)]
struct SimCloud(Arc<Mutex<Sim>>);

fn asg(group: &str) -> String {
    format!("{group}.{CLUSTER}")
}

#[async_trait]
impl Provider for SimCloud {
    fn name(&self) -> &'static str {
        "aws"
    }

    fn supports_surge(&self) -> bool {
        true
    }

    async fn details(&self) -> Result<BTreeMap<String, InstanceDetails>, CloudError> {
        Ok(BTreeMap::new())
    }

    async fn dump(&self) -> Result<Dump, CloudError> {
        Ok(Dump::default())
    }

    async fn groups(&self) -> Result<Vec<GroupInstances>, CloudError> {
        let mut sim = self.0.lock().unwrap();
        sim.api_calls += 1;
        let now = Instant::now();
        Ok(sim
            .groups
            .iter()
            .map(|(name, instances)| GroupInstances {
                name: asg(name),
                instance_group: Some(name.clone()),
                min_size: PER_GROUP as i32,
                max_size: PER_GROUP as i32 + 3,
                desired_capacity: PER_GROUP as i32,
                launch_template: Some("lt-1:2".into()),
                instances: instances
                    .iter()
                    .map(|i| Instance {
                        id: i.id.clone(),
                        lifecycle_state: if i.detached {
                            "Detached".into()
                        } else if now >= i.in_service_at {
                            "InService".into()
                        } else {
                            "Pending".into()
                        },
                        launch_template: Some(format!("lt-1:{}", i.version)),
                        detached: i.detached,
                        zone: Some("us-east-1a".into()),
                        private_dns_name: None,
                        instance_type: None,
                        state: Some("running".into()),
                    })
                    .collect(),
            })
            .collect())
    }

    async fn terminate(&self, group: &str, instance: &Instance) -> Result<(), CloudError> {
        let mut sim = self.0.lock().unwrap();
        sim.api_calls += 1;
        let name = group.trim_end_matches(&format!(".{CLUSTER}")).to_string();
        let list = sim.groups.get_mut(&name).unwrap();
        let before = list.len();
        list.retain(|i| i.id != instance.id);
        let removed = before != list.len();
        if removed && !instance.detached {
            sim.launch(&name);
        }
        Ok(())
    }

    async fn detach(&self, group: &str, instance: &Instance) -> Result<(), CloudError> {
        let mut sim = self.0.lock().unwrap();
        sim.api_calls += 1;
        let name = group.trim_end_matches(&format!(".{CLUSTER}")).to_string();
        if let Some(i) = sim
            .groups
            .get_mut(&name)
            .unwrap()
            .iter_mut()
            .find(|i| i.id == instance.id)
        {
            i.detached = true;
        }
        sim.launch(&name);
        Ok(())
    }
}

/// Every instance in service is a Ready node running one application pod.
struct SimKube(Arc<Mutex<Sim>>);

#[async_trait]
impl Kubernetes for SimKube {
    async fn nodes(&self) -> Result<Vec<NodeInfo>, RollError> {
        let mut sim = self.0.lock().unwrap();
        sim.api_calls += 1;
        let now = Instant::now();
        Ok(sim
            .groups
            .values()
            .flatten()
            .filter(|i| now >= i.in_service_at)
            .map(|i| NodeInfo::ready_for_test(&i.id, &format!("aws:///us-east-1a/{}", i.id)))
            .collect())
    }

    async fn pods(&self, node: Option<&str>) -> Result<Vec<PodInfo>, RollError> {
        let mut sim = self.0.lock().unwrap();
        sim.api_calls += 1;
        Ok(node
            .filter(|n| !sim.evicted.contains(*n))
            .map(|n| {
                vec![PodInfo {
                    namespace: "default".into(),
                    name: format!("web-{n}"),
                    node_name: Some(n.into()),
                    phase: "Running".into(),
                    owner_kinds: vec!["ReplicaSet".into()],
                    ..Default::default()
                }]
            })
            .unwrap_or_default())
    }

    async fn cordon(&self, _node: &str) -> Result<(), RollError> {
        self.0.lock().unwrap().api_calls += 1;
        Ok(())
    }

    async fn taint_for_update(&self, _node: &NodeInfo) -> Result<(), RollError> {
        self.0.lock().unwrap().api_calls += 1;
        Ok(())
    }

    async fn evict(&self, pod: &PodInfo) -> Result<Eviction, RollError> {
        let mut sim = self.0.lock().unwrap();
        sim.api_calls += 1;
        if let Some(node) = &pod.node_name {
            sim.evicted.insert(node.clone());
        }
        Ok(Eviction::Evicted)
    }
}

fn cluster(max_surge: u32) -> (Cluster, Vec<InstanceGroup>) {
    let mut cluster: Cluster = serde_json::from_value(serde_json::json!({
        "apiVersion": "kops.k8s.io/v1alpha2",
        "kind": "Cluster",
        "metadata": {"name": CLUSTER},
        "spec": {"cloudProvider": "aws"}
    }))
    .expect("a valid cluster");
    cluster.spec.rolling_update = Some(kops_api::cluster::RollingUpdateSpec {
        max_surge: Some(serde_json::json!(max_surge)),
        ..Default::default()
    });
    let groups = GROUPS
        .iter()
        .map(|g| {
            let mut ig = InstanceGroup::new(CLUSTER, *g, Role::Node);
            ig.spec.min_size = Some(PER_GROUP as i64);
            ig.spec.max_size = Some(PER_GROUP as i64 + 3);
            ig
        })
        .collect();
    (cluster, groups)
}

/// Rolls the simulated cluster; returns (simulated wall time, API calls,
/// real time spent).
pub async fn roll(boot: Duration, max_surge: u32, parallel: bool) -> (Duration, u64, Duration) {
    let mut sim = Sim {
        boot,
        ..Default::default()
    };
    for g in GROUPS {
        sim.groups.insert(g.to_string(), Vec::new());
        for _ in 0..PER_GROUP {
            sim.next_id += 1;
            let id = format!("i-{:08x}", sim.next_id);
            sim.groups.get_mut(g).unwrap().push(SimInstance {
                id,
                version: 1,
                detached: false,
                in_service_at: Instant::now(),
            });
        }
    }
    let sim = Arc::new(Mutex::new(sim));
    let cloud = Arc::new(SimCloud(sim.clone()));
    let kube = Arc::new(SimKube(sim.clone()));
    let (cluster, instance_groups) = cluster(max_surge);
    let nodes = kube.nodes().await.expect("nodes");
    let raw = cloud.groups().await.expect("groups");
    let groups = build_groups(CLUSTER, &instance_groups, &raw, &nodes);
    let roller = Arc::new(Roller {
        cluster_name: CLUSTER.to_string(),
        cluster,
        instance_groups,
        cloud,
        kube: Some(kube),
        options: RollOptions {
            parallel_node_groups: parallel,
            ..Default::default()
        },
        progress: None,
    });
    let real = std::time::Instant::now();
    let started = Instant::now();
    roller
        .run(groups)
        .await
        .expect("the simulated roll succeeds");
    let simulated = started.elapsed();
    let calls = sim.lock().unwrap().api_calls;
    let left: usize = sim
        .lock()
        .unwrap()
        .groups
        .values()
        .flatten()
        .filter(|i| i.version != 2)
        .count();
    assert_eq!(left, 0, "every instance must be replaced");
    (simulated, calls, real.elapsed())
}

fn main() {
    let boot: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(120);
    let boot = Duration::from_secs(boot);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a runtime");
    println!(
        "rolling update of {} nodes in {} instance groups, boot delay {}s (simulated clock)",
        PER_GROUP * GROUPS.len(),
        GROUPS.len(),
        boot.as_secs()
    );
    println!(
        "{:<28} {:>14} {:>10} {:>10}",
        "case", "wall (sim)", "API calls", "real ms"
    );
    for (label, surge, parallel) in [
        ("surge 1 (kops default)", 1, false),
        ("surge 3", 3, false),
        ("parallel groups, surge 1", 1, true),
        ("parallel groups, surge 3", 3, true),
    ] {
        let (simulated, calls, real) = rt.block_on(roll(boot, surge, parallel));
        let secs = simulated.as_secs();
        println!(
            "{label:<28} {:>7}m{:02}s ({secs:>5}s) {calls:>6} {:>10.1}",
            secs / 60,
            secs % 60,
            real.as_secs_f64() * 1000.0
        );
    }
}
