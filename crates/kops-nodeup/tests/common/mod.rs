//! Set-up shared by nodeup's join tests.

use kops_testkit::logs::Logs;

/// Logs captured from the controller, and a two-thread runtime for it and
/// its callers.
pub fn run_with_logs<F, Fut>(test: F)
where
    F: FnOnce(Logs) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let logs = Logs::default();
    let writer = logs.clone();
    tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_env_filter("kops_controller=info")
        .init();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(test(logs));
}
