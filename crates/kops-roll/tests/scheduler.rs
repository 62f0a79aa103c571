//! The roll scheduler against the benchmark's simulated cloud and
//! Kubernetes API, on tokio's paused clock: every instance is replaced with
//! surge 1 and 3, serially and with `parallel_node_groups`, and rolling the
//! groups in parallel takes less simulated time than one after the other.

#[path = "../../../bench/rolling_update.rs"]
#[allow(dead_code)]
mod bench;

use std::time::Duration;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap()
}

#[test]
fn every_instance_is_replaced_serially_and_in_parallel() {
    let rt = runtime();
    let boot = Duration::from_secs(60);
    // `roll` checks that no instance of the old version is left.
    let (serial, _, _) = rt.block_on(bench::roll(boot, 1, false));
    let (serial_surge_3, _, _) = rt.block_on(bench::roll(boot, 3, false));
    let (parallel, _, _) = rt.block_on(bench::roll(boot, 1, true));
    assert!(serial_surge_3 < serial, "{serial_surge_3:?} vs {serial:?}");
    assert!(parallel < serial, "{parallel:?} vs {serial:?}");
}
