//! Refusals: a stopped instance, a token field with a newline, a
//! duplicated signature parameter, and an internal error, each answered
//! as it should be and logged once, on one line.

use kops_aws_identity::AwsBootstrap;
use kops_bootstrap::client::ClientError;

use crate::harness::{edit_token, request, with_moto, Cluster, WORKERS};

fn status(
    result: Result<kops_bootstrap::protocol::BootstrapResponse, ClientError>,
) -> (u16, String) {
    match result {
        Err(ClientError::Refused {
            status, message, ..
        }) => (status, message),
        Err(e) => panic!("expected a refusal, got {e}"),
        Ok(_) => panic!("was accepted"),
    }
}

#[test]
fn refusals_are_safe_and_logged_once() {
    with_moto(|moto| async move {
        let cluster = Cluster::start(moto, "refusals.example.com", false).await;
        let client = cluster.client();
        let request = request();
        let body = serde_json::to_vec(&request).unwrap();

        // 1. A stopped instance's credentials: refused.
        let stopped = cluster.instance(WORKERS, false).await;
        let stopped = stopped.instance_id().unwrap().to_string();
        cluster
            .ec2
            .stop_instances()
            .instance_ids(&stopped)
            .send()
            .await
            .unwrap();
        let credentials = cluster.worker_credentials(&stopped).await;
        let (code, message) = status(
            client
                .post(&cluster.url, &cluster.token(&credentials, &body), &body)
                .await,
        );
        assert_eq!((code, message.as_str()), (403, "failed to verify token"));
        let lines = cluster
            .logs
            .lines_with(&format!("instance `{stopped}` is stop"));
        assert_eq!(lines.len(), 1, "{}", cluster.logs.text());

        // 2. A newline in a token field, or in the request, cannot start a
        // log line of its own.
        let worker = cluster.instance(WORKERS, false).await;
        let worker = worker.instance_id().unwrap().to_string();
        let credentials = cluster.worker_credentials(&worker).await;
        let forged_line = "FORGED kops_controller: bootstrap from 10.0.0.1: issued kubelet";
        let newline_date = edit_token(&cluster.token(&credentials, &body), |h| {
            h.insert(
                "X-Amz-Date".into(),
                vec![format!("20261125T010203Z\n{forged_line}")],
            );
        });
        let (code, _) = status(client.post(&cluster.url, &newline_date, &body).await);
        assert_eq!(code, 403);
        let tab_audience = edit_token(&cluster.token(&credentials, &body), |h| {
            h.insert("X-Kops-Audience".into(), vec![format!("x\t{forged_line}")]);
        });
        let (code, _) = status(client.post(&cluster.url, &tab_audience, &body).await);
        assert_eq!(code, 403);
        let mut odd = request.clone();
        odd.api_version = format!("v1\n{forged_line}");
        let odd_body = serde_json::to_vec(&odd).unwrap();
        let (code, _) = status(
            client
                .post(
                    &cluster.url,
                    &cluster.token(&credentials, &odd_body),
                    &odd_body,
                )
                .await,
        );
        assert_eq!(code, 400);
        let text = cluster.logs.text();
        assert!(
            !text.lines().any(|l| l.starts_with("FORGED")),
            "a forged log line:\n{text}"
        );
        assert_eq!(
            cluster.logs.lines_with("HTTP does not allow").len(),
            1,
            "{text}"
        );
        assert_eq!(
            cluster.logs.lines_with(&format!("x\\t{forged_line}")).len(),
            1,
            "{text}"
        );
        assert_eq!(
            cluster
                .logs
                .lines_with(&format!("v1\\n{forged_line}"))
                .len(),
            1,
            "{text}"
        );

        // 3. A duplicated signature parameter: refused before STS.
        let twice = edit_token(&cluster.token(&credentials, &body), |h| {
            let auth = &mut h.get_mut("Authorization").unwrap()[0];
            let signature = auth.rsplit("Signature=").next().unwrap().to_string();
            auth.push_str(&format!(", Signature={signature}"));
        });
        let (code, _) = status(client.post(&cluster.url, &twice, &body).await);
        assert_eq!(code, 403);
        assert_eq!(cluster.logs.lines_with("given twice").len(), 1);
        let signed_twice = edit_token(&cluster.token(&credentials, &body), |h| {
            let auth = &mut h.get_mut("Authorization").unwrap()[0];
            auth.push_str(", SignedHeaders=host");
        });
        let (code, _) = status(client.post(&cluster.url, &signed_twice, &body).await);
        assert_eq!(code, 403);
        assert_eq!(cluster.logs.lines_with("given twice").len(), 2);
        // Only the stopped instance's token (STS accepted it) is held.
        assert_eq!(cluster.controller.verifier().replay_entries(), 1);

        // 4. An internal error (the node's group has no node config): the
        // node hears "internal error", the log has the detail, once.
        let orphan = cluster.instance("ghost-group", false).await;
        let orphan = orphan.instance_id().unwrap().to_string();
        let credentials = cluster.worker_credentials(&orphan).await;
        let (code, message) = status(
            client
                .post(&cluster.url, &cluster.token(&credentials, &body), &body)
                .await,
        );
        assert_eq!((code, message.as_str()), (500, "internal error"));
        let detail = cluster
            .logs
            .lines_with("igconfig/node/ghost-group/nodeupconfig.yaml");
        assert_eq!(detail.len(), 1, "{}", cluster.logs.text());
        assert!(
            detail[0].contains(&orphan) && detail[0].contains("internal error"),
            "{detail:?}"
        );

        // The honest worker still joins.
        let joined = client
            .bootstrap(&request, &cluster.worker_credentials(&worker).await)
            .await;
        assert!(joined.unwrap().node_config.is_some());
    });
}
