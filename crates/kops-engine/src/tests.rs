//! Engine tests against an in-memory fake cloud (a test double of "some
//! cloud" for a generic engine; cloud crates test against moto instead).
//! Time-dependent tests run on tokio's paused clock: sleeps and backoffs
//! take no real time, and timings are exact.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::{
    Changes, Completed, EngineError, Executor, ExecutorOptions, FieldValue, Mode, Operation,
    Outcome, OutputRef, Outputs, ProgressEvent, Report, RetryPolicy, SkipReason, Task, TaskError,
    TaskGraph, TaskKey,
};

// ---------------------------------------------------------------- fake cloud

#[derive(Debug, Clone, PartialEq)]
struct NetId(String);

impl FieldValue for NetId {
    fn render(&self) -> String {
        self.0.clone()
    }
}

/// An object in the fake cloud.
#[derive(Debug, Clone)]
struct Stored {
    id: NetId,
    cidr: String,
    dns: bool,
    /// A subnet's network; empty for networks.
    parent: NetId,
}

#[derive(Default)]
struct FakeCloud {
    objects: Mutex<HashMap<TaskKey, Stored>>,
    /// Errors the next calls of (task, operation) return, in order.
    script: Mutex<HashMap<(TaskKey, Operation), VecDeque<TaskError>>>,
    next_id: AtomicUsize,
    applies: AtomicUsize,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl FakeCloud {
    fn fail(
        &self,
        key: &TaskKey,
        operation: Operation,
        errors: impl IntoIterator<Item = TaskError>,
    ) {
        lock(&self.script)
            .entry((key.clone(), operation))
            .or_default()
            .extend(errors);
    }

    fn put(&self, key: TaskKey, cidr: &str, dns: bool) {
        let id = NetId(format!(
            "net-{}",
            self.next_id.fetch_add(1, Ordering::SeqCst) + 1
        ));
        lock(&self.objects).insert(
            key,
            Stored {
                id,
                cidr: cidr.into(),
                dns,
                parent: NetId(String::new()),
            },
        );
    }

    fn get(&self, key: &TaskKey) -> Option<Stored> {
        lock(&self.objects).get(key).cloned()
    }

    /// One API call: takes `latency`, then returns the next scripted error.
    async fn call(
        &self,
        key: &TaskKey,
        operation: Operation,
        latency: Duration,
    ) -> Result<(), TaskError> {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        match lock(&self.script)
            .get_mut(&(key.clone(), operation))
            .and_then(VecDeque::pop_front)
        {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }
}

// ---------------------------------------------------------------- tasks

/// A network: like a VPC, with an immutable CIDR and a mutable flag.
#[derive(Debug, Clone, PartialEq)]
struct Net {
    name: String,
    cidr: String,
    dns: bool,
    after: Vec<TaskKey>,
    latency: Duration,
}

fn net(name: &str) -> Net {
    Net {
        name: name.into(),
        cidr: "10.0.0.0/16".into(),
        dns: true,
        after: Vec::new(),
        latency: Duration::ZERO,
    }
}

fn net_key(name: &str) -> TaskKey {
    TaskKey::new("Net", name)
}

impl Net {
    fn after(mut self, names: &[&str]) -> Self {
        self.after = names.iter().map(|name| net_key(name)).collect();
        self
    }

    fn latency(mut self, millis: u64) -> Self {
        self.latency = Duration::from_millis(millis);
        self
    }
}

impl Task<FakeCloud> for Net {
    type Actual = Stored;
    type Output = NetId;

    fn key(&self) -> TaskKey {
        net_key(&self.name)
    }

    fn dependencies(&self) -> Vec<TaskKey> {
        self.after.clone()
    }

    async fn find(&self, cloud: &FakeCloud, _: &Outputs) -> Result<Option<Stored>, TaskError> {
        let key = Task::key(self);
        cloud.call(&key, Operation::Find, self.latency).await?;
        Ok(cloud.get(&key))
    }

    fn diff(&self, actual: Option<&Stored>, _: &Outputs) -> Result<Changes, TaskError> {
        let mut changes = Changes::new();
        changes
            .compare("cidr", actual.map(|a| &a.cidr), &self.cidr)
            .compare("dns", actual.map(|a| &a.dns), &self.dns);
        Ok(changes)
    }

    fn check_changes(&self, actual: Option<&Stored>, _: &Changes) -> Result<(), TaskError> {
        match actual {
            Some(actual) if actual.cidr != self.cidr => {
                Err(TaskError::immutable("cidr", &actual.cidr, &self.cidr))
            }
            _ => Ok(()),
        }
    }

    fn output(&self, actual: &Stored) -> NetId {
        actual.id.clone()
    }

    async fn apply(
        &self,
        cloud: &FakeCloud,
        _: &Outputs,
        actual: Option<&Stored>,
        _: &Changes,
    ) -> Result<NetId, TaskError> {
        let key = Task::key(self);
        cloud.call(&key, Operation::Apply, self.latency).await?;
        cloud.applies.fetch_add(1, Ordering::SeqCst);
        match actual {
            None => cloud.put(key.clone(), &self.cidr, self.dns),
            Some(_) => {
                if let Some(stored) = lock(&cloud.objects).get_mut(&key) {
                    stored.dns = self.dns;
                }
            }
        }
        cloud
            .get(&key)
            .map(|stored| stored.id)
            .ok_or_else(|| TaskError::fatal("vanished"))
    }
}

/// A subnet: reads its network's id from the network task's output.
#[derive(Debug, Clone, PartialEq)]
struct Sub {
    name: String,
    net: OutputRef<NetId>,
    cidr: String,
}

fn sub(name: &str, net: &str) -> Sub {
    Sub {
        name: name.into(),
        net: OutputRef::new(net_key(net)),
        cidr: "10.0.1.0/24".into(),
    }
}

impl Task<FakeCloud> for Sub {
    type Actual = Stored;
    type Output = ();

    fn key(&self) -> TaskKey {
        TaskKey::new("Sub", &self.name)
    }

    fn dependencies(&self) -> Vec<TaskKey> {
        vec![self.net.key().clone()]
    }

    async fn find(&self, cloud: &FakeCloud, _: &Outputs) -> Result<Option<Stored>, TaskError> {
        Ok(cloud.get(&Task::key(self)))
    }

    fn diff(&self, actual: Option<&Stored>, deps: &Outputs) -> Result<Changes, TaskError> {
        let mut changes = Changes::new();
        changes
            .compare("cidr", actual.map(|a| &a.cidr), &self.cidr)
            .compare_reference(
                "net",
                actual.map(|a| &a.parent),
                deps.try_get(&self.net)?,
                self.net.key(),
            );
        Ok(changes)
    }

    fn output(&self, _: &Stored) {}

    async fn apply(
        &self,
        cloud: &FakeCloud,
        deps: &Outputs,
        _: Option<&Stored>,
        _: &Changes,
    ) -> Result<(), TaskError> {
        let parent = deps.get(&self.net)?.clone();
        cloud.applies.fetch_add(1, Ordering::SeqCst);
        lock(&cloud.objects).insert(
            Task::key(self),
            Stored {
                id: NetId(format!("sub-{}", self.name)),
                cidr: self.cidr.clone(),
                dns: false,
                parent,
            },
        );
        Ok(())
    }
}

// ---------------------------------------------------------------- helpers

fn graph(tasks: impl IntoIterator<Item = Net>) -> TaskGraph<FakeCloud> {
    let mut graph = TaskGraph::new();
    for task in tasks {
        graph.add(task).expect("unique test keys");
    }
    graph
}

fn tiny_backoff() -> ExecutorOptions {
    ExecutorOptions {
        retry: RetryPolicy {
            base: Duration::from_millis(1),
            max: Duration::from_millis(4),
            seed: Some(42),
        },
        ..ExecutorOptions::default()
    }
}

fn outcome<'r>(report: &'r Report, key: &TaskKey) -> &'r Outcome {
    &report.get(key).expect("task in report").outcome
}

fn labels(report: &Report) -> Vec<String> {
    report
        .tasks
        .iter()
        .map(|task| format!("{} {}", task.key, task.outcome.label()))
        .collect()
}

fn failed(result: Result<Report, EngineError>) -> (String, Operation, Box<Report>) {
    match result {
        Err(error @ EngineError::TaskFailed { .. }) => {
            let rendered = error.to_string();
            let EngineError::TaskFailed {
                operation, report, ..
            } = error
            else {
                unreachable!()
            };
            (rendered, operation, report)
        }
        other => panic!("expected a task failure, got {other:?}"),
    }
}

// ---------------------------------------------------------------- graph

#[test]
fn graph_orders_dependencies_first_and_deterministically() {
    let graph = graph([
        net("d").after(&["b", "c"]),
        net("c").after(&["a"]),
        net("b").after(&["a"]),
        net("a"),
        net("e"),
    ]);
    let order: Vec<String> = graph
        .topological_order()
        .unwrap()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(order, ["Net/a", "Net/b", "Net/c", "Net/d", "Net/e"]);
    assert_eq!(graph.longest_chain().unwrap(), 3);
    assert_eq!(TaskGraph::<FakeCloud>::new().longest_chain().unwrap(), 0);
}

#[test]
fn duplicate_tasks_are_errors_unless_ensured_equal() {
    let mut graph = graph([net("a")]);
    let error = graph.add(net("a")).unwrap_err();
    assert_eq!(
        error.to_string(),
        "duplicate task `Net/a`\n\
         hint: each cloud object must be added once; use `TaskGraph::ensure` for an object that several builders add identically"
    );
    graph.ensure(net("a")).unwrap();
    let mut different = net("a");
    different.cidr = "10.9.0.0/16".into();
    assert!(matches!(
        graph.ensure(different),
        Err(EngineError::ConflictingTask { key }) if key == net_key("a")
    ));
    graph.ensure(net("b")).unwrap();
    assert_eq!(graph.len(), 2);
}

#[test]
fn a_missing_dependency_names_both_tasks() {
    let graph = graph([net("a"), net("b").after(&["ghost"])]);
    let error = graph.validate().unwrap_err();
    assert!(matches!(
        &error,
        EngineError::MissingDependency { task, dependency }
            if *task == net_key("b") && *dependency == net_key("ghost")
    ));
    assert_eq!(
        error.to_string(),
        "task `Net/b` depends on `Net/ghost`, which is not in the graph\n\
         hint: add `Net/ghost` to the graph, or remove it from the dependencies of `Net/b`"
    );
}

#[test]
fn cycles_are_reported_with_their_path() {
    let graph = graph([
        net("a").after(&["c"]),
        net("b").after(&["a"]),
        net("c").after(&["b"]),
        net("d").after(&["a"]),
        net("e"),
    ]);
    let error = graph.topological_order().unwrap_err();
    assert_eq!(
        error.to_string(),
        "dependency cycle: `Net/a` -> `Net/c` -> `Net/b` -> `Net/a`"
    );
    let looping = self::graph([net("self").after(&["self"])]);
    assert!(matches!(
        looping.longest_chain(),
        Err(EngineError::Cycle { path }) if path == [net_key("self"), net_key("self")]
    ));
}

#[tokio::test]
async fn a_malformed_graph_runs_nothing() {
    let cloud = Arc::new(FakeCloud::default());
    let graph = graph([net("a"), net("b").after(&["ghost"])]);
    let result = Executor::default()
        .run(&graph, Arc::clone(&cloud), Mode::Apply)
        .await;
    assert!(matches!(result, Err(EngineError::MissingDependency { .. })));
    assert_eq!(cloud.applies.load(Ordering::SeqCst), 0);
}

// ---------------------------------------------------------------- scheduling

#[tokio::test(start_paused = true)]
async fn independent_tasks_run_in_parallel() {
    let cloud = Arc::new(FakeCloud::default());
    let graph = graph([
        net("a").latency(100),
        net("b").latency(100),
        net("c").latency(100),
    ]);
    let report = Executor::default()
        .run(&graph, Arc::clone(&cloud), Mode::Apply)
        .await
        .unwrap();
    // find + apply take 200 ms each; run one after another they would take 600.
    assert_eq!(report.elapsed, Duration::from_millis(200));
    assert_eq!(cloud.max_in_flight.load(Ordering::SeqCst), 3);
    for task in &report.tasks {
        assert_eq!(task.started, Duration::ZERO, "{} started late", task.key);
    }
}

#[tokio::test(start_paused = true)]
async fn a_chain_runs_in_order() {
    let cloud = Arc::new(FakeCloud::default());
    let graph = graph([
        net("c").latency(10).after(&["b"]),
        net("b").latency(10).after(&["a"]),
        net("a").latency(10),
    ]);
    let report = Executor::default()
        .run(&graph, Arc::clone(&cloud), Mode::Apply)
        .await
        .unwrap();
    let window = |name: &str| {
        let task = report.get(&net_key(name)).unwrap();
        (task.started, task.started + task.elapsed)
    };
    assert_eq!(window("a"), (Duration::ZERO, Duration::from_millis(20)));
    assert_eq!(window("b").0, window("a").1);
    assert_eq!(window("c").0, window("b").1);
    assert_eq!(report.elapsed, Duration::from_millis(60));
    assert_eq!(cloud.max_in_flight.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn concurrency_is_bounded() {
    let cloud = Arc::new(FakeCloud::default());
    let graph = graph(["a", "b", "c", "d", "e", "f"].map(|name| net(name).latency(50)));
    let executor = Executor::new(ExecutorOptions {
        concurrency: 2,
        ..ExecutorOptions::default()
    });
    let report = executor
        .run(&graph, Arc::clone(&cloud), Mode::Apply)
        .await
        .unwrap();
    assert_eq!(cloud.max_in_flight.load(Ordering::SeqCst), 2);
    assert_eq!(report.elapsed, Duration::from_millis(300));
}

// ---------------------------------------------------------------- retries and failures

#[tokio::test(start_paused = true)]
async fn a_retryable_error_is_retried_until_it_succeeds() {
    let cloud = Arc::new(FakeCloud::default());
    cloud.fail(
        &net_key("role"),
        Operation::Apply,
        [
            TaskError::retryable("NoSuchEntity: role `x` is not visible yet"),
            TaskError::retryable("Throttling: rate exceeded"),
        ],
    );
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&events);
    let executor = Executor::new(tiny_backoff()).with_progress(move |event: &ProgressEvent<'_>| {
        let line = match event {
            ProgressEvent::Started { key } => format!("start {key}"),
            ProgressEvent::Retrying {
                key,
                attempt,
                operation,
                reason,
                ..
            } => format!("retry {key} after attempt {attempt} ({operation}): {reason}"),
            ProgressEvent::Finished { report } => {
                format!(
                    "{} {} after {} attempts",
                    report.key,
                    report.outcome.label(),
                    report.attempts
                )
            }
        };
        lock(&seen).push(line);
    });
    let report = executor
        .run(&graph([net("role")]), Arc::clone(&cloud), Mode::Apply)
        .await
        .unwrap();
    assert!(matches!(
        outcome(&report, &net_key("role")),
        Outcome::Created { .. }
    ));
    assert_eq!(report.tasks[0].attempts, 3);
    assert_eq!(
        *lock(&events),
        [
            "start Net/role",
            "retry Net/role after attempt 1 (apply): NoSuchEntity: role `x` is not visible yet",
            "retry Net/role after attempt 2 (apply): Throttling: rate exceeded",
            "Net/role created after 3 attempts",
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn retries_stop_at_the_deadline_with_the_last_error() {
    let cloud = Arc::new(FakeCloud::default());
    cloud.fail(
        &net_key("busy"),
        Operation::Find,
        (1..=10_000).map(|n| TaskError::retryable(format!("RequestLimitExceeded: call {n}"))),
    );
    // Production backoff and deadline (200 ms → 10 s, 10 min), on the paused clock.
    let executor = Executor::new(ExecutorOptions {
        retry: RetryPolicy {
            seed: Some(1),
            ..RetryPolicy::default()
        },
        ..ExecutorOptions::default()
    });
    let (message, operation, report) = failed(
        executor
            .run(&graph([net("busy")]), Arc::clone(&cloud), Mode::Apply)
            .await,
    );
    let task = &report.tasks[0];
    assert_eq!(operation, Operation::Find);
    assert_eq!(task.elapsed, Duration::from_secs(600));
    let attempts = task.attempts;
    assert!((60..1000).contains(&attempts), "{attempts} attempts");
    assert_eq!(
        message,
        format!(
            "failed to find `Net/busy`: gave up after {attempts} attempts in 10m0s: \
             RequestLimitExceeded: call {attempts}"
        )
    );
}

#[tokio::test(start_paused = true)]
async fn a_fatal_error_stops_scheduling_and_skips_dependants() {
    let cloud = Arc::new(FakeCloud::default());
    cloud.fail(
        &net_key("bad"),
        Operation::Apply,
        [TaskError::fatal("InvalidParameterValue: bad cidr")],
    );
    let graph = graph([
        net("bad"),
        net("child").after(&["bad"]),
        net("grandchild").after(&["child"]),
        net("slow").latency(50),
        net("later").after(&["slow"]),
    ]);
    let (message, operation, report) = failed(
        Executor::default()
            .run(&graph, Arc::clone(&cloud), Mode::Apply)
            .await,
    );
    assert_eq!(operation, Operation::Apply);
    assert_eq!(
        labels(&report),
        [
            "Net/bad failed",
            "Net/child skipped",
            "Net/grandchild skipped",
            "Net/later skipped",
            "Net/slow created",
        ]
    );
    let bad = net_key("bad");
    assert_eq!(
        *outcome(&report, &net_key("grandchild")),
        Outcome::Skipped {
            reason: SkipReason::DependencyFailed {
                dependency: bad.clone()
            }
        }
    );
    assert_eq!(
        *outcome(&report, &net_key("later")),
        Outcome::Skipped {
            reason: SkipReason::Stopped { after: bad }
        }
    );
    assert_eq!(
        message,
        "failed to apply `Net/bad`: InvalidParameterValue: bad cidr\n\
         3 tasks were skipped because the run stopped"
    );
    // `slow` was running: it finished. Nothing else was applied.
    assert_eq!(cloud.applies.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn running_tasks_are_not_retried_after_a_failure() {
    let cloud = Arc::new(FakeCloud::default());
    cloud.fail(
        &net_key("bad"),
        Operation::Find,
        [TaskError::fatal("AccessDenied")],
    );
    cloud.fail(
        &net_key("flaky"),
        Operation::Find,
        (0..1000).map(|_| TaskError::retryable("Throttling")),
    );
    let graph = graph([net("bad").latency(5), net("flaky")]);
    let (message, _, report) = failed(
        Executor::new(tiny_backoff())
            .run(&graph, cloud, Mode::Apply)
            .await,
    );
    assert_eq!(
        message,
        "failed to find `Net/bad`: AccessDenied\n\
         also failed to find `Net/flaky`: Throttling (not retried: the run is stopping because `Net/bad` failed)"
    );
    assert!(report.get(&net_key("flaky")).unwrap().attempts >= 1);
}

#[tokio::test]
async fn immutable_fields_are_refused_before_anything_changes() {
    let cloud = Arc::new(FakeCloud::default());
    cloud.put(net_key("a"), "10.1.0.0/16", true);
    for mode in [Mode::DryRun, Mode::Apply] {
        let (message, operation, _) = failed(
            Executor::default()
                .run(&graph([net("a")]), Arc::clone(&cloud), mode)
                .await,
        );
        assert_eq!(operation, Operation::CheckChanges);
        assert_eq!(
            message,
            "failed to check changes of `Net/a`: field `cidr` cannot be changed from `10.1.0.0/16` to `10.0.0.0/16`\n\
             hint: the cloud cannot change it in place: keep the old value, or delete the object so it is created again"
        );
    }
    assert_eq!(cloud.applies.load(Ordering::SeqCst), 0);
}

/// A task that panics in `diff`.
#[derive(Debug, PartialEq)]
struct Broken;

impl Task<FakeCloud> for Broken {
    type Actual = ();
    type Output = ();

    fn key(&self) -> TaskKey {
        TaskKey::new("Broken", "x")
    }

    async fn find(&self, _: &FakeCloud, _: &Outputs) -> Result<Option<()>, TaskError> {
        Ok(None)
    }

    fn diff(&self, _: Option<&()>, _: &Outputs) -> Result<Changes, TaskError> {
        panic!("bug in diff")
    }

    fn output(&self, _: &()) {}

    async fn apply(
        &self,
        _: &FakeCloud,
        _: &Outputs,
        _: Option<&()>,
        _: &Changes,
    ) -> Result<(), TaskError> {
        Ok(())
    }
}

#[tokio::test]
async fn a_panicking_task_fails_like_any_other() {
    let mut graph = TaskGraph::new();
    graph.add(Broken).unwrap();
    let (message, operation, _) = failed(
        Executor::default()
            .run(&graph, Arc::new(FakeCloud::default()), Mode::Apply)
            .await,
    );
    assert_eq!(operation, Operation::Diff);
    assert_eq!(
        message,
        "failed to diff `Broken/x`: the task panicked (a bug in the task): bug in diff"
    );
}

// ---------------------------------------------------------------- dry run, plan, outputs

/// `net-a` exists with `dns` off; `net-b` and its subnet do not.
fn half_built() -> (Arc<FakeCloud>, TaskGraph<FakeCloud>) {
    let cloud = Arc::new(FakeCloud::default());
    cloud.put(net_key("a"), "10.0.0.0/16", false);
    let mut graph = graph([net("a"), net("b")]);
    graph.add(sub("s", "b")).unwrap();
    graph.add(sub("t", "a")).unwrap();
    (cloud, graph)
}

#[tokio::test]
async fn a_dry_run_applies_nothing_and_reports_field_changes() {
    let (cloud, graph) = half_built();
    let report = Executor::default()
        .run(&graph, Arc::clone(&cloud), Mode::DryRun)
        .await
        .unwrap();
    assert_eq!(cloud.applies.load(Ordering::SeqCst), 0);
    assert!(report.has_changes());
    assert_eq!(
        labels(&report),
        [
            "Net/a would modify",
            "Net/b would create",
            "Sub/s would create",
            "Sub/t would create",
        ]
    );
    let Outcome::WouldModify { changes } = outcome(&report, &net_key("a")) else {
        panic!("Net/a should be modified");
    };
    assert_eq!(
        changes.iter().map(ToString::to_string).collect::<Vec<_>>(),
        ["dns: false -> true"]
    );
    assert_eq!(
        report.plan().to_string(),
        "Will create resources:\n\
         \x20 Net/b\n\
         \x20 \tcidr                \t10.0.0.0/16\n\
         \x20 \tdns                 \ttrue\n\
         \n\
         \x20 Sub/s\n\
         \x20 \tcidr                \t10.0.1.0/24\n\
         \x20 \tnet                 \t<Net/b>\n\
         \n\
         \x20 Sub/t\n\
         \x20 \tcidr                \t10.0.1.0/24\n\
         \x20 \tnet                 \tnet-1\n\
         \n\
         Will modify resources:\n\
         \x20 Net/a\n\
         \x20 \tdns                 \t false -> true\n\
         \n"
    );
}

#[tokio::test]
async fn outputs_flow_to_dependants_and_a_second_run_changes_nothing() {
    let (cloud, graph) = half_built();
    let executor = Executor::default();
    let first = executor
        .run(&graph, Arc::clone(&cloud), Mode::Apply)
        .await
        .unwrap();
    assert_eq!(
        labels(&first),
        [
            "Net/a modified",
            "Net/b created",
            "Sub/s created",
            "Sub/t created"
        ]
    );
    assert!(first.plan().is_empty());
    let net_b = cloud.get(&net_key("b")).unwrap().id;
    assert_eq!(net_b, NetId("net-2".into()));
    let subnet = cloud.get(&TaskKey::new("Sub", "s")).unwrap();
    assert_eq!(subnet.parent, net_b, "the subnet got its network's id");

    for mode in [Mode::DryRun, Mode::Apply] {
        let again = executor
            .run(&graph, Arc::clone(&cloud), mode)
            .await
            .unwrap();
        assert!(!again.has_changes());
        assert!(again
            .tasks
            .iter()
            .all(|task| task.outcome == Outcome::Unchanged));
        assert_eq!(again.plan().to_string(), "");
    }
    assert_eq!(cloud.applies.load(Ordering::SeqCst), 4);
}

#[tokio::test(start_paused = true)]
async fn reports_and_plans_serialize_for_json_output() {
    let (cloud, graph) = half_built();
    let report = Executor::default()
        .run(&graph, cloud, Mode::DryRun)
        .await
        .unwrap();
    let plan = serde_json::to_value(report.plan()).unwrap();
    assert_eq!(
        plan["modify"],
        serde_json::json!([{
            "kind": "Net",
            "name": "a",
            "changes": [{"field": "dns", "from": "false", "to": "true"}],
        }])
    );
    assert_eq!(plan["create"][1]["changes"][1]["to"], "<Net/b>");
    assert_eq!(plan["delete"], serde_json::json!([]));

    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["mode"], "dryRun");
    assert_eq!(
        json["tasks"][1],
        serde_json::json!({
            "kind": "Net",
            "name": "b",
            "outcome": "wouldCreate",
            "changes": [
                {"field": "cidr", "from": null, "to": "10.0.0.0/16"},
                {"field": "dns", "from": null, "to": "true"},
            ],
            "attempts": 1,
            "startedMs": 0,
            "elapsedMs": 0,
        })
    );
}

#[test]
fn skipped_and_failed_outcomes_serialize_with_their_cause() {
    let value = serde_json::to_value(Outcome::Skipped {
        reason: SkipReason::DependencyFailed {
            dependency: net_key("a"),
        },
    })
    .unwrap();
    assert_eq!(
        value,
        serde_json::json!({
            "outcome": "skipped",
            "reason": {"cause": "dependencyFailed", "dependency": {"kind": "Net", "name": "a"}},
        })
    );
    let value = serde_json::to_value(Outcome::Failed {
        operation: Operation::CheckChanges,
        message: "no".into(),
    })
    .unwrap();
    assert_eq!(
        value,
        serde_json::json!({"outcome": "failed", "operation": "checkChanges", "message": "no"})
    );
}

#[test]
fn multi_line_values_render_line_by_line() {
    let mut changes = Changes::new();
    changes.compare(
        "userData",
        Some("#!/bin/bash\necho old\nexit 0"),
        "#!/bin/bash\necho new\nexit 0",
    );
    let plan = crate::Plan {
        modify: vec![crate::PlannedTask {
            key: TaskKey::new("LaunchTemplate", "nodes"),
            changes,
        }],
        ..crate::Plan::default()
    };
    assert_eq!(
        plan.to_string(),
        "Will modify resources:\n\
         \x20 LaunchTemplate/nodes\n\
         \x20 \tuserData            \n\
         \x20 \t                    \t  #!/bin/bash\n\
         \x20 \t                    \t- echo old\n\
         \x20 \t                    \t+ echo new\n\
         \x20 \t                    \t  exit 0\n\
         \n"
    );
}

/// Creates its object, then reports it pending once (like a NAT gateway):
/// the run must report it created, not unchanged.
#[derive(Debug, PartialEq)]
struct Pending;

impl Task<FakeCloud> for Pending {
    type Actual = Stored;
    type Output = ();

    fn key(&self) -> TaskKey {
        TaskKey::new("Pending", "nat")
    }

    async fn find(&self, cloud: &FakeCloud, _: &Outputs) -> Result<Option<Stored>, TaskError> {
        Ok(cloud.get(&Task::key(self)))
    }

    fn diff(&self, actual: Option<&Stored>, _: &Outputs) -> Result<Changes, TaskError> {
        let mut changes = Changes::new();
        changes.compare("cidr", actual.map(|a| &a.cidr), &"10.1.0.0/16".to_string());
        Ok(changes)
    }

    fn output(&self, _: &Stored) {}

    async fn apply(
        &self,
        cloud: &FakeCloud,
        _: &Outputs,
        _: Option<&Stored>,
        _: &Changes,
    ) -> Result<(), TaskError> {
        cloud.put(Task::key(self), "10.1.0.0/16", false);
        Err(TaskError::retryable("pending: not available yet"))
    }
}

#[tokio::test(start_paused = true)]
async fn an_object_created_by_a_failed_attempt_is_reported_created() {
    let cloud = Arc::new(FakeCloud::default());
    let mut graph = TaskGraph::new();
    graph.add(Pending).unwrap();
    let report = Executor::new(tiny_backoff())
        .run(&graph, Arc::clone(&cloud), Mode::Apply)
        .await
        .unwrap();
    assert!(
        matches!(report.tasks[0].outcome, Outcome::Created { .. }),
        "{:?}",
        report.tasks[0].outcome
    );
    assert_eq!(report.tasks[0].attempts, 2);
    assert!(report.has_changes());
}

// ---------------------------------------------------------------- two runs

#[tokio::test]
async fn a_run_after_part_of_the_graph_takes_over_what_it_completed() {
    let cloud = Arc::new(FakeCloud::default());
    let whole = graph([
        net("a"),
        net("b").after(&["a"]),
        net("late").after(&["b"]),
        net("later").after(&["late"]),
        net("other"),
    ]);
    // What can run before `late`: everything but it and what needs it.
    let first = whole.without(|key| *key == net_key("late")).unwrap();
    assert_eq!(
        first.topological_order().unwrap(),
        [net_key("a"), net_key("b"), net_key("other")]
    );
    let executor = Executor::new(tiny_backoff());
    let (report, done) = executor
        .run_after(&first, Arc::clone(&cloud), Mode::Apply, &Completed::new())
        .await
        .unwrap();
    assert_eq!(report.tasks.len(), 3);
    assert_eq!(done.len(), 3);
    assert!(done
        .output(&OutputRef::<NetId>::new(net_key("a")))
        .is_some());
    assert_eq!(cloud.applies.load(Ordering::SeqCst), 3);

    // The whole graph, with `other` now defined differently: the equal,
    // completed tasks are taken over (not even looked up again), the
    // changed one and the new ones run.
    let mut changed = net("other");
    changed.dns = false;
    let mut whole = whole.without(|key| *key == net_key("other")).unwrap();
    whole.add(changed).unwrap();
    cloud.fail(
        &net_key("a"),
        Operation::Find,
        [TaskError::fatal("looked up again")],
    );
    let (report, done) = executor
        .run_after(&whole, Arc::clone(&cloud), Mode::Apply, &done)
        .await
        .unwrap();
    assert_eq!(
        labels(&report),
        [
            "Net/a created",
            "Net/b created",
            "Net/late created",
            "Net/later created",
            "Net/other modified"
        ]
    );
    assert_eq!(done.len(), 5);
    assert_eq!(cloud.applies.load(Ordering::SeqCst), 6);
}

#[tokio::test(start_paused = true)]
async fn the_longest_chain_starts_first() {
    let cloud = Arc::new(FakeCloud::default());
    // `z` heads a chain of three; `a` and `b` are leaves that sort first.
    let graph = graph([
        net("a").latency(10),
        net("b").latency(10),
        net("z").latency(10),
        net("z2").latency(10).after(&["z"]),
        net("z3").latency(10).after(&["z2"]),
    ]);
    let options = ExecutorOptions {
        concurrency: 2,
        ..ExecutorOptions::default()
    };
    let report = Executor::new(options)
        .run(&graph, Arc::clone(&cloud), Mode::Apply)
        .await
        .unwrap();
    let started = |name: &str| report.get(&net_key(name)).unwrap().started;
    assert_eq!(started("z"), Duration::ZERO);
    assert_eq!(started("a"), Duration::ZERO);
    assert!(started("b") > Duration::ZERO);
    // The chain (3 tasks of 20 ms) sets the run's length: 60 ms, not 80.
    assert_eq!(report.elapsed, Duration::from_millis(60));
}
