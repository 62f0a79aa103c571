//! Callers without credentials: forged tokens by the thousand, and
//! thousands of connections that never send a request.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kops_aws_identity::AwsBootstrap;
use kops_bootstrap::client::ClientError;
use tokio::io::AsyncWriteExt;

use crate::harness::{edit_token, request, rss_kib, tls_client, with_moto, Cluster, WORKERS};

/// Forged tokens: each a node's token whose signature is replaced by a
/// large one (or given twice), so it passes the cheap checks up to the
/// signature's.
fn forged(
    cluster: &Cluster,
    credentials: &aws_sdk_ec2::config::Credentials,
    body: &[u8],
    i: usize,
) -> String {
    let token = cluster.token(credentials, body);
    edit_token(&token, |headers| {
        let auth = &mut headers.get_mut("Authorization").unwrap()[0];
        let (head, _) = auth.split_once("Signature=").unwrap();
        let large = format!("{:x}", i).repeat(4096 / format!("{i:x}").len() + 1);
        *auth = match i % 3 {
            0 => format!("{head}Signature={large}"),
            1 => format!(
                "{head}Signature={}, Signature={}",
                "a".repeat(64),
                "b".repeat(64)
            ),
            _ => format!("{head}Signature={}{large}", "0".repeat(64)),
        };
    })
}

#[test]
fn forged_tokens_leave_memory_bounded() {
    with_moto(|_moto| async move {
        let cluster = Cluster::start(_moto, "forged.example.com", false).await;
        let worker = cluster.instance(WORKERS, false).await;
        let id = worker.instance_id().unwrap().to_string();
        let credentials = cluster.worker_credentials(&id).await;
        let body = serde_json::to_vec(&request()).unwrap();
        let tokens: Vec<String> = (0..64)
            .map(|i| forged(&cluster, &credentials, &body, i))
            .collect();
        let tokens = Arc::new(tokens);
        let client = Arc::new(cluster.client());
        let url = cluster.url.clone();
        let body = Arc::new(body);

        // 10,000 in two rounds, 32 at a time: memory after the second
        // round is that of the first (nothing grows with the count).
        let send = |round: usize| {
            let mut tasks = tokio::task::JoinSet::new();
            for worker in 0..32 {
                let (client, url, body, tokens) =
                    (client.clone(), url.clone(), body.clone(), tokens.clone());
                tasks.spawn(async move {
                    let mut refused = 0;
                    for i in (worker..5_000).step_by(32) {
                        let token = &tokens[(i + round) % tokens.len()];
                        match client.post(&url, token, &body).await {
                            // Refused, or turned away before (this
                            // address has its share waiting already).
                            Err(ClientError::Refused {
                                status: 403 | 429, ..
                            }) => refused += 1,
                            other => panic!("forged token {i}: {:?}", other.err()),
                        }
                    }
                    refused
                });
            }
            tasks
        };
        let before = rss_kib();
        let started = Instant::now();
        let mut refused = 0;
        let mut tasks = send(0);
        while let Some(n) = tasks.join_next().await {
            refused += n.unwrap();
        }
        let after_first = rss_kib();
        let mut tasks = send(1);
        while let Some(n) = tasks.join_next().await {
            refused += n.unwrap();
        }
        let after = rss_kib();
        let elapsed = started.elapsed();
        println!(
            "10,000 forged tokens (4 KiB signatures) in {:.1}s: RSS {before} KiB before, \
             {after_first} KiB after 5,000, {after} KiB after 10,000; replay cache: {} entries",
            elapsed.as_secs_f64(),
            cluster.controller.verifier().replay_entries()
        );
        assert_eq!(refused, 10_000);
        // Refused before anything is recorded or STS is asked.
        assert_eq!(cluster.controller.verifier().replay_entries(), 0);
        assert!(
            after.saturating_sub(after_first) < 16 * 1024,
            "memory grows with forged tokens: {after_first} KiB → {after} KiB"
        );
        // And the refusals name the cause, on one line each.
        let logs = cluster.logs.text();
        assert!(
            logs.contains("the signature is not 64 hex digits"),
            "{logs}"
        );
        assert!(logs.contains("given twice"));

        // A node's real token still works.
        let honest = cluster.client().bootstrap(&request(), &credentials).await;
        assert!(honest.unwrap().certs.contains_key("kubelet"));
        assert_eq!(cluster.controller.verifier().replay_entries(), 1);
    });
}

#[test]
fn idle_and_slow_connections_do_not_stop_a_node() {
    const IDLE: usize = 1_500;
    const SLOW: usize = 500;
    if !crate::fairness::raise_open_files(8_192) {
        return;
    }
    with_moto(|moto| async move {
        let cluster = Cluster::start(moto, "loris.example.com", false).await;
        let worker = cluster.instance(WORKERS, false).await;
        let id = worker.instance_id().unwrap().to_string();
        let credentials = cluster.worker_credentials(&id).await;

        // The node's normal time, alone.
        let started = Instant::now();
        cluster
            .client()
            .bootstrap(&request(), &credentials)
            .await
            .unwrap();
        let alone = started.elapsed();

        // 1,500 connections that never say anything, 500 that finish the
        // TLS handshake and then send their headers a byte a second.
        let addr = cluster
            .url
            .trim_start_matches("https://")
            .trim_end_matches('/')
            .to_string();
        let mut held = Vec::new();
        for _ in 0..IDLE {
            if let Ok(s) = tokio::net::TcpStream::connect(&addr).await {
                held.push(s);
            }
        }
        let tls = tls_client(&cluster.ca_pem);
        let name = rustls_pki_types::ServerName::try_from(kops_bootstrap::protocol::audience(
            &cluster.name,
        ))
        .unwrap();
        let mut slow = tokio::task::JoinSet::new();
        for _ in 0..SLOW {
            let (tls, name, addr) = (tls.clone(), name.clone(), addr.clone());
            slow.spawn(async move {
                let Ok(tcp) = tokio::net::TcpStream::connect(&addr).await else {
                    return;
                };
                let Ok(mut stream) = tls.connect(name, tcp).await else {
                    return;
                };
                for byte in b"POST /bootstrap HTTP/1.1\r\nHost: x\r\nX-Slow: " {
                    if stream.write_all(&[*byte]).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            });
        }
        // Let them take every slot and be past their grace.
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        let holding = cluster.controller.connections();

        let started = Instant::now();
        let response = cluster.client().bootstrap(&request(), &credentials).await;
        let attacked = started.elapsed();
        println!(
            "a node's bootstrap: {} ms alone, {} ms with {IDLE} idle and {SLOW} slow-loris \
             connections open ({holding} held by the controller)",
            alone.as_millis(),
            attacked.as_millis()
        );
        assert!(response.unwrap().certs.contains_key("kubelet"));
        assert!(
            holding <= kops_controller::connections::MAX_CONNECTIONS,
            "{holding}"
        );
        // Its normal time: the node's own request timeout is 60 s.
        assert!(attacked < Duration::from_secs(10), "{attacked:?}");
        slow.abort_all();
        drop(held);
    });
}
