//! Callers without credentials that spend what a node needs: well-formed
//! forged tokens (each costs an STS call), connections that hold every
//! slot with a body that never ends, clients slower than each timeout,
//! and the replay cache's bound.
//!
//! moto does not check SigV4 signatures, so a forged token here is signed
//! with an access key no one holds: moto answers it as the caller
//! `user/moto`, which the controller refuses (not a node role) after one
//! STS call, as AWS refuses a bad signature after one call.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use aws_sdk_ec2::config::Credentials;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use kops_aws_identity::AwsBootstrap;
use kops_bootstrap::protocol;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::harness::{request, tls_client, with_moto, Cluster, REGION, WORKERS};

/// How long an honest node may take to join under attack: nodeup's own
/// request timeout.
const JOIN_WITHIN: Duration = Duration::from_secs(60);

/// Raises this process's open-file limit to `want` (the soft limit up
/// to the hard one; the hard one too where that is allowed). When it
/// cannot: under CI (`CI` set and not `false`) the test fails saying why;
/// elsewhere it says why and the caller skips (false).
pub fn raise_open_files(want: u64) -> bool {
    use rlimit::Resource;
    let (soft, hard) = Resource::NOFILE.get().expect("getrlimit(RLIMIT_NOFILE)");
    if soft >= want {
        return true;
    }
    let raised = if hard >= want {
        Resource::NOFILE.set(want, hard)
    } else {
        // Raising the hard limit needs privilege (CAP_SYS_RESOURCE).
        Resource::NOFILE.set(want, want)
    };
    let Err(e) = raised else {
        return true;
    };
    let (soft, hard) = Resource::NOFILE.get().unwrap_or((soft, hard));
    let why = format!(
        "this test opens about {want} files; the open-file limit is {soft} (hard {hard}) and \
         raising it failed ({e}): run it under `ulimit -Hn {want}` or higher"
    );
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
    assert!(!ci, "{why}");
    eprintln!("skipped: {why}");
    false
}

/// The tests above raise their own limit from a low soft one, and under
/// CI fail, saying why, when even the hard limit is too low.
#[test]
fn the_open_file_limit_is_raised_or_ci_says_why() {
    use rlimit::Resource;
    let (_, hard) = Resource::NOFILE.get().unwrap();
    let want = 4_096.min(hard);
    Resource::NOFILE.set(256, hard).unwrap();
    assert!(raise_open_files(want));
    let (soft, _) = Resource::NOFILE.get().unwrap();
    assert!(
        soft >= want,
        "the soft limit stayed at {soft}, {want} wanted"
    );

    // More than the kernel allows any process (`fs.nr_open`), root or not.
    let nr_open: u64 = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(1 << 20);
    let beyond = nr_open + 1;
    std::env::set_var("CI", "false");
    assert!(!raise_open_files(beyond), "outside CI: skipped, saying why");
    std::env::set_var("CI", "true");
    let failed = std::panic::catch_unwind(|| raise_open_files(beyond))
        .expect_err("under CI, a limit it cannot reach must fail the test");
    let message = failed.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        message.contains(&format!("opens about {beyond} files")) && message.contains("ulimit -Hn"),
        "{message}"
    );
}

/// What an attacker needs to reach the controller from a given address.
#[derive(Clone)]
struct Target {
    addr: SocketAddr,
    tls: tokio_rustls::TlsConnector,
    name: rustls_pki_types::ServerName<'static>,
}

impl Target {
    fn of(cluster: &Cluster) -> Target {
        let addr = cluster
            .url
            .trim_start_matches("https://")
            .trim_end_matches('/')
            .parse()
            .unwrap();
        Target {
            addr,
            tls: tls_client(&cluster.ca_pem),
            name: rustls_pki_types::ServerName::try_from(protocol::audience(&cluster.name))
                .unwrap(),
        }
    }

    /// A TCP connection from `source`.
    async fn tcp(&self, source: IpAddr) -> std::io::Result<tokio::net::TcpStream> {
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.bind(SocketAddr::new(source, 0))?;
        socket.connect(self.addr).await
    }

    /// A TLS connection from `source`.
    async fn tls(
        &self,
        source: IpAddr,
    ) -> std::io::Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
        let tcp = self.tcp(source).await?;
        self.tls.connect(self.name.clone(), tcp).await
    }
}

/// A token of the right shape for `body` (audience, body hash, date,
/// scope, 64 hex digits of signature) signed with a key no one holds.
fn forged_token(cluster: &Cluster, body: &[u8], n: usize) -> String {
    let key = format!("ASIAFORGED{n:010}");
    let credentials = Credentials::new(key, "not-a-secret", None, None, "forged");
    kops_aws_identity::create_token_v1(
        &kops_aws_identity::sts_url(REGION),
        REGION,
        &credentials,
        SystemTime::now(),
        body,
        &protocol::audience(&cluster.name),
    )
    .unwrap()
}

/// Sends forged tokens from `sources`, `per_second` in all, until `stop`;
/// counts the answers.
fn flood(
    cluster: &Cluster,
    sources: Vec<IpAddr>,
    per_second: usize,
    stop: Arc<AtomicBool>,
) -> (tokio::task::JoinSet<()>, Arc<AtomicUsize>) {
    let target = Target::of(cluster);
    let body = Bytes::from(serde_json::to_vec(&request()).unwrap());
    // Tokens made ahead: signing is the attacker's cost, not the test's.
    let tokens: Arc<Vec<String>> = Arc::new(
        (0..4_000)
            .map(|n| forged_token(cluster, &body, n))
            .collect(),
    );
    let sent = Arc::new(AtomicUsize::new(0));
    // 200 requests in flight at any time (HTTP/1.1 without pipelining: one
    // per connection), spread over the sources: deep enough that a plain
    // first-come first-served line would keep a node waiting past its
    // 20 s deadline on every attempt.
    //
    // From many sources, 20 each (1,000 connections, under the
    // controller's cap of 1,024): the gate holds
    // [`kops_controller::fairness::PER_PEER_QUEUE`] of each source's
    // requests until their turn and turns the rest away at once (429), so
    // the others carry the whole rate.
    let connections_per_source = if sources.len() == 1 { 200 } else { 20 };
    let tasks_total = sources.len() * connections_per_source;
    let held = if sources.len() == 1 {
        0
    } else {
        sources.len() * kops_controller::fairness::PER_PEER_QUEUE.min(connections_per_source)
    };
    let interval = Duration::from_secs_f64((tasks_total - held).max(1) as f64 / per_second as f64);
    let mut tasks = tokio::task::JoinSet::new();
    for (i, source) in sources
        .iter()
        .flat_map(|s| std::iter::repeat_n(*s, connections_per_source))
        .enumerate()
    {
        let (target, body, tokens, sent, stop) = (
            target.clone(),
            body.clone(),
            tokens.clone(),
            sent.clone(),
            stop.clone(),
        );
        tasks.spawn(async move {
            let mut n = i;
            let mut ticker = tokio::time::interval(interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            while !stop.load(Ordering::Relaxed) {
                let Ok(stream) = target.tls(source).await else {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let Ok((mut send, conn)) = hyper::client::conn::http1::handshake::<_, Full<Bytes>>(
                    hyper_util::rt::TokioIo::new(stream),
                )
                .await
                else {
                    continue;
                };
                tokio::spawn(conn);
                while !stop.load(Ordering::Relaxed) {
                    ticker.tick().await;
                    // One request per connection's turn; the connection
                    // carries the next once this one is answered.
                    if send.ready().await.is_err() {
                        break;
                    }
                    let request = http::Request::builder()
                        .method("POST")
                        .uri("/bootstrap")
                        .header("Host", "kops-controller")
                        .header("Authorization", &tokens[n % tokens.len()])
                        .body(Full::new(body.clone()))
                        .unwrap();
                    n += tasks_total;
                    let answer = send.send_request(request);
                    match answer.await {
                        Ok(response) => {
                            let _ = response.into_body().collect().await;
                            sent.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(_) => break,
                    }
                }
            }
        });
    }
    (tasks, sent)
}

/// An honest node joining as nodeup does: again after each transient
/// refusal, a second apart, until `JOIN_WITHIN`. Its time and attempts.
async fn honest_join(cluster: &Cluster, credentials: &Credentials) -> (Duration, usize) {
    let started = Instant::now();
    let mut attempts = 0;
    loop {
        attempts += 1;
        match cluster.client().bootstrap(&request(), credentials).await {
            Ok(response) => {
                assert!(response.certs.contains_key("kubelet"));
                return (started.elapsed(), attempts);
            }
            Err(e) if e.is_transient() && started.elapsed() < JOIN_WITHIN => {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(e) => panic!(
                "the honest node did not join in {:?} ({attempts} attempts): {e}",
                started.elapsed()
            ),
        }
    }
}

fn sources(count: u8) -> Vec<IpAddr> {
    (0..count)
        .map(|i| IpAddr::from([127, 0, 0, 2 + i]))
        .collect()
}

fn forged_flood_while_a_node_joins(peers: u8) {
    // Both ends of up to 1,000 connections in this process.
    if !raise_open_files(4_096) {
        return;
    }
    with_moto(|moto| async move {
        let name = format!("flood{peers}.example.com");
        let cluster = Cluster::start(moto, &name, false).await;
        let worker = cluster.instance(WORKERS, false).await;
        let id = worker.instance_id().unwrap().to_string();
        let credentials = cluster.worker_credentials(&id).await;

        let stop = Arc::new(AtomicBool::new(false));
        let (mut tasks, sent) = flood(&cluster, sources(peers), 1_000, stop.clone());
        // The flood at full rate before the node comes.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let before = sent.load(Ordering::Relaxed);
        let flood_started = Instant::now();
        let (took, attempts) = honest_join(&cluster, &credentials).await;
        let rate = (sent.load(Ordering::Relaxed) - before) as f64
            / flood_started.elapsed().as_secs_f64().max(0.001);
        stop.store(true, Ordering::Relaxed);
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
        println!(
            "forged well-formed tokens from {peers} address(es) at {rate:.0}/s answered: \
             an honest node joined in {:.2} s ({attempts} attempt(s))",
            took.as_secs_f64()
        );
        // The forged tokens reached STS (and were refused there), so the
        // flood is the kind that costs calls, not one refused in parsing.
        let logs = cluster.logs.text();
        assert!(
            logs.contains("is not an instance of a worker role"),
            "{logs}"
        );
        // Fair share: the node waits behind at most one request of each
        // attacking address (50 at 10/s: 5 s), on its first attempt.
        // Without the per-address gate it waits behind the whole flood:
        // 38.7 s and a second attempt from one address, measured.
        assert!(
            took < FAIR_JOIN && attempts == 1,
            "joined in {took:?} after {attempts} attempt(s)"
        );
    });
}

/// How long an honest join may take under a flood, with fair shares.
const FAIR_JOIN: Duration = Duration::from_secs(15);

#[test]
fn well_formed_forged_tokens_from_one_address_do_not_stop_a_node() {
    forged_flood_while_a_node_joins(1);
}

#[test]
fn well_formed_forged_tokens_from_50_addresses_do_not_stop_a_node() {
    forged_flood_while_a_node_joins(50);
}

/// The replay cache holds at most its bound: tokens STS accepted for a
/// caller that is no node (any AWS account can sign one) fill it, and
/// then a node is told to come back (503) rather than older entries being
/// forgotten. Tokens STS did not answer are forgotten at once.
#[test]
fn the_replay_cache_bound_is_reached_and_released() {
    const BOUND: usize = 4;
    with_moto(|moto| async move {
        // STS unreachable: every well-formed token is let go again.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let dead_sts = format!("http://{}/", closed.local_addr().unwrap());
        drop(closed);
        let edit: crate::harness::VerifierEdit = Box::new(move |mut parts| {
            parts.sts_url = dead_sts;
            kops_controller::AwsVerifier::new(parts)
                .unwrap()
                .with_replay_capacity(BOUND)
        });
        let cluster = Cluster::start_with(moto, "released.example.com", false, Some(edit)).await;
        let body = serde_json::to_vec(&request()).unwrap();
        let client = cluster.client();
        for n in 0..3 * BOUND {
            let token = forged_token(&cluster, &body, n);
            let refused = client
                .post(&cluster.url, &token, &body)
                .await
                .err()
                .unwrap();
            assert!(refused.is_transient(), "token {n}: {refused}");
            assert_eq!(
                cluster.controller.verifier().replay_entries(),
                0,
                "token {n} is still held after STS could not check it"
            );
        }
        drop(cluster);

        // STS answers: the tokens it accepted stay until their window
        // closes (here 3 s old plus 1 s of skew; production: 5 min plus
        // 2), and the bound holds meanwhile.
        let edit: crate::harness::VerifierEdit = Box::new(|parts| {
            kops_controller::AwsVerifier::new(parts)
                .unwrap()
                .with_replay_capacity(BOUND)
                .with_token_window(Duration::from_secs(3), Duration::from_secs(1))
        });
        let cluster = Cluster::start_with(moto, "bounded.example.com", false, Some(edit)).await;
        let worker = cluster.instance(WORKERS, false).await;
        let id = worker.instance_id().unwrap().to_string();
        let credentials = cluster.worker_credentials(&id).await;
        let filled = Instant::now();
        for n in 0..BOUND {
            let token = forged_token(&cluster, &body, n);
            match client_of(&cluster).post(&cluster.url, &token, &body).await {
                Err(kops_bootstrap::client::ClientError::Refused { status: 403, .. }) => {}
                other => panic!("token {n}: {:?}", other.err()),
            }
        }
        assert_eq!(cluster.controller.verifier().replay_entries(), BOUND);
        // Reached: a node is told to come back, nothing older is dropped.
        let full = cluster.client().bootstrap(&request(), &credentials).await;
        match full {
            Err(kops_bootstrap::client::ClientError::Refused { status: 503, .. }) => {}
            other => panic!(
                "with the cache full ({BOUND} entries held): {:?}",
                other.map(|_| "the node joined: the bound was not enforced")
            ),
        }
        assert_eq!(cluster.controller.verifier().replay_entries(), BOUND);
        assert!(cluster
            .logs
            .text()
            .contains("too many tokens being checked at once"));

        // Released: once the forged tokens' window is over (their date's
        // second, plus 3 s, plus 1 s), their entries make room.
        tokio::time::sleep(Duration::from_secs(5).saturating_sub(filled.elapsed())).await;
        let after = cluster.client().bootstrap(&request(), &credentials).await;
        assert!(
            after.is_ok(),
            "{:.1} s after the cache filled, past every entry's window, a node is still \
             refused: {:?}",
            filled.elapsed().as_secs_f64(),
            after.err()
        );
        // Only the node's own token is held now.
        assert_eq!(cluster.controller.verifier().replay_entries(), 1);
    });
}

fn client_of(cluster: &Cluster) -> kops_bootstrap::client::BootstrapClient {
    cluster.client()
}

/// Reads from `stream` until the controller closes it (or `limit`
/// passes): what it said and when it closed.
async fn read_until_closed<S: tokio::io::AsyncRead + Unpin>(
    stream: &mut S,
    limit: Duration,
) -> (String, Option<Duration>) {
    let started = Instant::now();
    let mut said = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        let left = limit.saturating_sub(started.elapsed());
        match tokio::time::timeout(left, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => {
                return (
                    String::from_utf8_lossy(&said).into_owned(),
                    Some(started.elapsed()),
                )
            }
            Ok(Ok(n)) => said.extend_from_slice(&buf[..n]),
            Err(_) => return (String::from_utf8_lossy(&said).into_owned(), None),
        }
    }
}

/// Writes `head`, then `body` in chunks of `chunk` bytes every `every`;
/// stops at the first error (the controller closed the connection).
fn dribble<W: tokio::io::AsyncWrite + Unpin + Send + 'static>(
    mut writer: W,
    head: Vec<u8>,
    body: Vec<u8>,
    chunk: usize,
    every: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if writer.write_all(&head).await.is_err() {
            return;
        }
        for part in body.chunks(chunk) {
            if writer.write_all(part).await.is_err() || writer.flush().await.is_err() {
                return;
            }
            tokio::time::sleep(every).await;
        }
        // Everything sent: keep the connection open for the answer.
        std::future::pending::<()>().await;
    })
}

/// A client slower than each deadline is cut off at that deadline: the
/// TLS handshake, the request's head, its body at the minimum rate. The
/// controller runs with timeouts of a second or two (production: 5 s) so
/// that each fires well within the test; the body's rate is production's
/// 4 KiB/s, and a body a little faster than that is not cut.
#[test]
fn clients_slower_than_each_timeout_are_cut_off() {
    use kops_bootstrap::config::Timeouts;
    let timeouts = Timeouts {
        tls_handshake: Duration::from_secs(1),
        header_read: Duration::from_secs(1),
        body_read: Duration::from_secs(10),
        min_body_rate: 4 * 1024,
    };
    // The body's deadline is a rate, stated here rather than taken from
    // the controller: 1 s, then 4 KiB/s (an 8 KiB body: 3 s).
    const BODY: usize = 8 * 1024;
    let body_deadline = Duration::from_secs(3);
    with_moto(|moto| async move {
        let cluster = Cluster::start_timed(moto, "slow.example.com", timeouts).await;
        let target = Target::of(&cluster);
        let me = IpAddr::from([127, 0, 0, 1]);
        let within = |what: &str, closed: Option<Duration>, deadline: Duration| {
            let closed = closed.unwrap_or_else(|| panic!("{what}: still open after 8 s"));
            assert!(
                closed >= deadline.saturating_sub(Duration::from_millis(300))
                    && closed <= deadline + Duration::from_millis(1_500),
                "{what}: closed after {closed:?}, the deadline is {deadline:?}"
            );
        };
        let limit = Duration::from_secs(8);

        // A connection that never starts its handshake.
        let mut tcp = target.tcp(me).await.unwrap();
        let (_, closed) = read_until_closed(&mut tcp, limit).await;
        within("TLS handshake", closed, timeouts.tls_handshake);

        // A request line, then a header four bytes a second.
        let stream = target.tls(me).await.unwrap();
        let (mut reader, writer) = tokio::io::split(stream);
        let slow = dribble(
            writer,
            b"POST /bootstrap HTTP/1.1\r\n".to_vec(),
            b"Host: kops-controller\r\nX-Slow: 1234567890\r\n\r\n".to_vec(),
            1,
            Duration::from_millis(250),
        );
        let (_, closed) = read_until_closed(&mut reader, limit).await;
        slow.abort();
        within("request head", closed, timeouts.header_read);

        // The whole head of an 8 KiB request, then its body at 2 KiB/s
        // (it would take 4 s): cut at 3 s with 408.
        let head = |length: usize| {
            format!(
                "POST /bootstrap HTTP/1.1\r\nHost: kops-controller\r\n\
                 Authorization: x-aws-sts abc\r\nContent-Length: {length}\r\n\r\n"
            )
            .into_bytes()
        };
        let stream = target.tls(me).await.unwrap();
        let (mut reader, writer) = tokio::io::split(stream);
        let started = Instant::now();
        let slow = dribble(
            writer,
            head(BODY),
            vec![b' '; BODY],
            256,
            Duration::from_millis(125),
        );
        let (said, closed) = read_until_closed(&mut reader, limit).await;
        slow.abort();
        assert!(said.starts_with("HTTP/1.1 408"), "a 2 KiB/s body: {said}");
        within(
            "request body at 2 KiB/s",
            closed.map(|_| started.elapsed()),
            body_deadline,
        );

        // The same body at 6 KiB/s (1.3 s) is read whole and answered.
        let stream = target.tls(me).await.unwrap();
        let (mut reader, writer) = tokio::io::split(stream);
        let fast_enough = dribble(
            writer,
            head(BODY),
            vec![b' '; BODY],
            768,
            Duration::from_millis(125),
        );
        let (said, _) = read_until_closed(&mut reader, Duration::from_secs(4)).await;
        fast_enough.abort();
        assert!(said.starts_with("HTTP/1.1 400"), "a 6 KiB/s body: {said}");
    });
}

/// 1,024 connections that send a full request head and then a body a
/// byte a second hold every slot as busy; a node still joins on its first
/// attempt, because a busy connection that is not serving a verified node
/// gives way (those of the address holding most slots first). The body
/// deadline is lengthened here so that no slot frees itself during the
/// test: without eviction the node's connection is closed at once.
#[test]
fn busy_slow_body_connections_do_not_stop_a_node() {
    use kops_controller::connections::MAX_CONNECTIONS;
    // Both ends of 1,024 connections in this process, and the rest.
    if !raise_open_files(8_192) {
        return;
    }
    with_moto(|moto| async move {
        let timeouts = kops_bootstrap::config::Timeouts {
            body_read: Duration::from_secs(110),
            min_body_rate: 1,
            ..Default::default()
        };
        let cluster = Cluster::start_timed(moto, "busy.example.com", timeouts).await;
        let worker = cluster.instance(WORKERS, false).await;
        let id = worker.instance_id().unwrap().to_string();
        let credentials = cluster.worker_credentials(&id).await;
        let (alone, _) = honest_join(&cluster, &credentials).await;

        let target = Target::of(&cluster);
        let attacker = IpAddr::from([127, 0, 0, 2]);
        let body = serde_json::to_vec(&request()).unwrap();
        let token = Arc::new(forged_token(&cluster, &body, 0));
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..MAX_CONNECTIONS {
            let (target, token, stop) = (target.clone(), token.clone(), stop.clone());
            tasks.spawn(async move {
                // Each held connection, opened again when it is closed.
                while !stop.load(Ordering::Relaxed) {
                    let Ok(mut stream) = target.tls(attacker).await else {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    };
                    let head = format!(
                        "POST /bootstrap HTTP/1.1\r\nHost: kops-controller\r\n\
                         Authorization: {token}\r\nContent-Length: 16384\r\n\r\n"
                    );
                    if stream.write_all(head.as_bytes()).await.is_err() {
                        continue;
                    }
                    while !stop.load(Ordering::Relaxed) {
                        if stream.write_all(b"x").await.is_err() || stream.flush().await.is_err() {
                            break;
                        }
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
            });
        }
        // Every slot taken and past its grace.
        let started = Instant::now();
        while cluster.controller.connections() < MAX_CONNECTIONS
            && started.elapsed() < Duration::from_secs(30)
        {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        let holding = cluster.controller.connections();
        let (attacked, attempts) = honest_join(&cluster, &credentials).await;
        stop.store(true, Ordering::Relaxed);
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
        println!(
            "a node's bootstrap: {:.2} s alone, {:.2} s ({attempts} attempt(s)) with \
             {MAX_CONNECTIONS} busy slow-body connections open ({holding} held by the controller)",
            alone.as_secs_f64(),
            attacked.as_secs_f64()
        );
        assert!(
            holding >= MAX_CONNECTIONS * 9 / 10,
            "the attack held only {holding} slots"
        );
        // Its slot is made at once: a refused connection would have made
        // it try again a second later.
        assert!(
            attempts == 1 && attacked < Duration::from_secs(5),
            "with every slot busy, the node joined in {attacked:?} after {attempts} attempt(s)"
        );
    });
}
