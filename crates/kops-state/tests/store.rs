//! One conformance suite for every `ObjectStore` backend (file, memory, S3 on
//! moto, Cloud Storage on fake-gcs-server), plus the backend-specific
//! guarantees: file modes, S3 encryption, atomic conditional writes.

use std::sync::Arc;

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_s3::config::Credentials;
use aws_sdk_s3::types::ServerSideEncryption;
use kops_state::gcs::Endpoint;
use kops_state::{
    FileStore, GcsStore, MemoryStore, ObjectStore, S3Store, StoreError, Version, WriteOptions,
};

const PLAIN: WriteOptions = WriteOptions {
    secret: false,
    create_only: false,
};
const SECRET: WriteOptions = WriteOptions {
    secret: true,
    create_only: false,
};
const CREATE: WriteOptions = WriteOptions {
    secret: false,
    create_only: true,
};

/// The behaviour every backend must share. `store` must be empty.
async fn conformance(store: Arc<dyn ObjectStore>) {
    let base = store.base_url().to_string();
    assert!(!base.ends_with('/'), "base url {base:?} must not end in /");
    assert_eq!(store.url_of("a/b"), format!("{base}/a/b"));

    // Empty store.
    assert_eq!(store.read("missing").await.unwrap(), None);
    assert_eq!(store.read("missing/deeper/key").await.unwrap(), None);
    assert_eq!(store.list("").await.unwrap(), Vec::<String>::new());
    assert_eq!(store.list("nope/").await.unwrap(), Vec::<String>::new());
    assert_eq!(store.list_children("").await.unwrap(), Vec::<String>::new());
    assert_eq!(
        store.list_children("nope/").await.unwrap(),
        Vec::<String>::new()
    );

    // Round trip, overwrite, binary and empty objects, secrets.
    store
        .write("a.example.com/config", b"v1", PLAIN)
        .await
        .unwrap();
    assert_eq!(read(&store, "a.example.com/config").await, b"v1");
    store
        .write("a.example.com/config", b"version 2", PLAIN)
        .await
        .unwrap();
    assert_eq!(read(&store, "a.example.com/config").await, b"version 2");
    let binary: Vec<u8> = (0..=255).collect();
    store.write("bin/all-bytes", &binary, PLAIN).await.unwrap();
    assert_eq!(read(&store, "bin/all-bytes").await, binary);
    store.write("bin/empty", b"", PLAIN).await.unwrap();
    assert_eq!(read(&store, "bin/empty").await, b"");
    store
        .write(
            "a.example.com/pki/ssh/public/admin/abcdef",
            b"ssh-rsa AAAA",
            SECRET,
        )
        .await
        .unwrap();
    assert_eq!(
        read(&store, "a.example.com/pki/ssh/public/admin/abcdef").await,
        b"ssh-rsa AAAA"
    );

    // create_only: conflicts on an existing key and leaves it untouched.
    let err = store
        .write("a.example.com/config", b"clobbered", CREATE)
        .await
        .unwrap_err();
    match &err {
        StoreError::AlreadyExists { url } => assert_eq!(url, &store.url_of("a.example.com/config")),
        other => panic!("expected AlreadyExists, got {other:?}"),
    }
    assert!(err.to_string().contains("already exists"), "{err}");
    assert_eq!(read(&store, "a.example.com/config").await, b"version 2");

    // Conditional writes: only over the version read; a stale or missing
    // object is a conflict and is left as it is.
    let (data, v2) = store
        .read_versioned("a.example.com/config")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(data, b"version 2");
    store
        .write_if("a.example.com/config", b"version 3", &v2, PLAIN)
        .await
        .unwrap();
    let err = store
        .write_if("a.example.com/config", b"stale", &v2, PLAIN)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Conflict { .. }), "{err:?}");
    assert!(err.to_string().contains("hint:"), "{err}");
    assert_eq!(read(&store, "a.example.com/config").await, b"version 3");
    let (_, v3) = store
        .read_versioned("a.example.com/config")
        .await
        .unwrap()
        .unwrap();
    assert_ne!(v3, v2);
    assert!(matches!(
        store.write_if("never/written", b"x", &v3, PLAIN).await,
        Err(StoreError::Conflict { .. })
    ));
    assert_eq!(store.read("never/written").await.unwrap(), None);
    assert_eq!(store.read_versioned("never/written").await.unwrap(), None);

    store
        .write("a.example.com/instancegroup/nodes", b"nodes", CREATE)
        .await
        .unwrap();
    let secret_create = WriteOptions {
        secret: true,
        create_only: true,
    };
    store
        .write("a.example.com/secrets/admin", b"token", secret_create)
        .await
        .unwrap();
    assert!(matches!(
        store
            .write("a.example.com/secrets/admin", b"other", secret_create)
            .await,
        Err(StoreError::AlreadyExists { .. })
    ));

    // Delete, including a missing key.
    store.delete("bin/all-bytes").await.unwrap();
    store.delete("bin/empty").await.unwrap();
    assert_eq!(store.read("bin/all-bytes").await.unwrap(), None);
    store.delete("bin/all-bytes").await.unwrap();
    store.delete("never/existed").await.unwrap();

    // Listing.
    for key in [
        "a.example.com/instancegroup/master-us-east-1a",
        "b.example.com/config",
        "b.example.com.backup/config",
    ] {
        store.write(key, key.as_bytes(), PLAIN).await.unwrap();
    }
    assert_eq!(
        store.list("").await.unwrap(),
        [
            "a.example.com/config",
            "a.example.com/instancegroup/master-us-east-1a",
            "a.example.com/instancegroup/nodes",
            "a.example.com/pki/ssh/public/admin/abcdef",
            "a.example.com/secrets/admin",
            "b.example.com.backup/config",
            "b.example.com/config",
        ]
    );
    let groups = [
        "a.example.com/instancegroup/master-us-east-1a",
        "a.example.com/instancegroup/nodes",
    ];
    assert_eq!(
        store.list("a.example.com/instancegroup/").await.unwrap(),
        groups
    );
    assert_eq!(
        store.list("a.example.com/instancegroup").await.unwrap(),
        groups
    );
    // A prefix is a directory: `b.example.com` does not match `b.example.com.backup`.
    assert_eq!(
        store.list("b.example.com/").await.unwrap(),
        ["b.example.com/config"]
    );
    assert_eq!(
        store.list("b.example.com").await.unwrap(),
        ["b.example.com/config"]
    );
    // Listing "under" an object is empty.
    assert_eq!(
        store.list("a.example.com/config/").await.unwrap(),
        Vec::<String>::new()
    );

    assert_eq!(
        store.list_children("").await.unwrap(),
        ["a.example.com", "b.example.com", "b.example.com.backup"]
    );
    assert_eq!(
        store.list_children("a.example.com/").await.unwrap(),
        ["config", "instancegroup", "pki", "secrets"]
    );
    assert_eq!(
        store
            .list_children("a.example.com/instancegroup")
            .await
            .unwrap(),
        ["master-us-east-1a", "nodes"]
    );
    assert_eq!(
        store
            .list_children("a.example.com/pki/ssh/public/admin/")
            .await
            .unwrap(),
        ["abcdef"]
    );

    // Deleting a directory's last object removes the directory from listings.
    for key in store.list("b.example.com/").await.unwrap() {
        store.delete(&key).await.unwrap();
    }
    assert_eq!(
        store.list_children("").await.unwrap(),
        ["a.example.com", "b.example.com.backup"]
    );

    // Keys that would escape the store are rejected.
    for bad in ["", "/etc/passwd", "../x", "a/../../x", "a//b"] {
        let err = store.read(bad).await.unwrap_err();
        assert!(
            matches!(err, StoreError::InvalidKey { .. }),
            "{bad:?}: {err:?}"
        );
        assert!(store.write(bad, b"x", PLAIN).await.is_err(), "{bad:?}");
    }
    assert!(store.list("../").await.is_err());
}

async fn read(store: &Arc<dyn ObjectStore>, key: &str) -> Vec<u8> {
    store
        .read(key)
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("{key} should exist"))
}

#[tokio::test]
async fn file_conformance() {
    let dir = tempfile::tempdir().unwrap();
    conformance(Arc::new(FileStore::at(dir.path().join("state")))).await;
    // Nothing but the objects is left behind (no temporary files).
    let store = FileStore::at(dir.path().join("state"));
    assert_eq!(store.list("").await.unwrap().len(), 6);
}

#[tokio::test]
async fn file_conformance_via_open() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}/", dir.path().display());
    let store = kops_state::open(&url).await.unwrap();
    assert_eq!(store.base_url(), url.trim_end_matches('/'));
    conformance(store).await;
    let plain = kops_state::open(dir.path().to_str().unwrap())
        .await
        .unwrap();
    assert_eq!(plain.list("").await.unwrap().len(), 6);
}

#[tokio::test]
async fn memory_conformance() {
    conformance(Arc::new(MemoryStore::new())).await;
    conformance(kops_state::open("memory://conformance").await.unwrap()).await;
}

/// `writers` tasks each add one line to the same object by read, modify,
/// conditional write, reading again on a conflict: every line must land.
async fn no_lost_updates(store: Arc<dyn ObjectStore>, writers: usize) {
    store.write("race/counter", b"", PLAIN).await.unwrap();
    let tasks: Vec<_> = (0..writers)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut conflicts = 0;
                loop {
                    let (mut data, version): (Vec<u8>, Version) =
                        store.read_versioned("race/counter").await.unwrap().unwrap();
                    data.extend_from_slice(format!("writer {i}\n").as_bytes());
                    match store.write_if("race/counter", &data, &version, PLAIN).await {
                        Ok(()) => return conflicts,
                        Err(StoreError::Conflict { .. }) => conflicts += 1,
                        Err(e) => panic!("writer {i}: {e}"),
                    }
                }
            })
        })
        .collect();
    let mut conflicts = 0;
    for task in tasks {
        conflicts += task.await.unwrap();
    }
    let text = String::from_utf8(read(&store, "race/counter").await).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort_unstable();
    let mut expected: Vec<String> = (0..writers).map(|i| format!("writer {i}")).collect();
    expected.sort_unstable();
    assert_eq!(lines, expected, "an update was lost");
    eprintln!("{writers} writers, {conflicts} conflicts retried");
}

#[tokio::test]
async fn memory_conditional_writes_lose_nothing() {
    no_lost_updates(Arc::new(MemoryStore::new()), 16).await;
}

/// A store on the shared fake-gcs-server, in a fresh bucket.
fn gcs_store(url: &str) -> Option<GcsStore> {
    let server = kops_testkit::require_fake_gcs()?;
    let bucket = url.trim_start_matches("gs://").split('/').next().unwrap();
    server.create_bucket(bucket).unwrap();
    let endpoint = Endpoint {
        url: format!("http://{}", server.host()),
        authenticated: false,
    };
    Some(GcsStore::with_endpoint(url, endpoint).unwrap())
}

#[tokio::test]
async fn gcs_conformance() {
    let Some(store) = gcs_store("gs://kops-conformance/kops/state/") else {
        return;
    };
    assert_eq!(store.base_url(), "gs://kops-conformance/kops/state");
    conformance(Arc::new(store)).await;
    // A bucket root works as a store too, and everything above lives under
    // its prefix.
    let root = Arc::new(gcs_store("gs://kops-conformance").unwrap());
    let all = root.list("").await.unwrap();
    assert_eq!(all.len(), 6);
    assert!(all.iter().all(|k| k.starts_with("kops/state/")), "{all:?}");
    let Some(other) = gcs_store("gs://kops-gcs-root") else {
        return;
    };
    conformance(Arc::new(other)).await;
}

#[tokio::test]
async fn gcs_conditional_writes_lose_nothing() {
    let Some(store) = gcs_store("gs://kops-race/state") else {
        return;
    };
    no_lost_updates(Arc::new(store), 12).await;
}

#[tokio::test]
async fn gcs_create_only_is_atomic() {
    let Some(store) = gcs_store("gs://kops-create-race") else {
        return;
    };
    let store = Arc::new(store);
    let tasks: Vec<_> = (0..10)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                let data = format!("writer {i}");
                store
                    .write("k", data.as_bytes(), CREATE)
                    .await
                    .map(|()| data)
            })
        })
        .collect();
    let mut winners = Vec::new();
    for task in tasks {
        match task.await.unwrap() {
            Ok(data) => winners.push(data),
            Err(StoreError::AlreadyExists { .. }) => {}
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one create wins: {winners:?}");
    assert_eq!(
        store.read("k").await.unwrap().unwrap(),
        winners[0].as_bytes()
    );
}

#[tokio::test]
async fn gcs_missing_bucket_has_a_hint() {
    let Some(server) = kops_testkit::require_fake_gcs() else {
        return;
    };
    let endpoint = Endpoint {
        url: format!("http://{}", server.host()),
        authenticated: false,
    };
    let store = GcsStore::with_endpoint("gs://no-such-gcs-bucket/x", endpoint).unwrap();
    let err = store.write("k", b"v", PLAIN).await.unwrap_err();
    assert!(matches!(err, StoreError::NoSuchBucket { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains("`no-such-gcs-bucket`")
            && message.contains("gcloud storage buckets create gs://no-such-gcs-bucket"),
        "{message}"
    );
    let err = store.list("").await.unwrap_err();
    assert!(matches!(err, StoreError::NoSuchBucket { .. }), "{err:?}");
}

#[tokio::test]
async fn gcs_list_paginates() {
    let Some(store) = gcs_store("gs://kops-gcs-many/p") else {
        return;
    };
    let store = Arc::new(store.with_page_size(7));
    let tasks: Vec<_> = (0..30)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                let key = format!("c/k{i:04}");
                store.write(&key, b"x", PLAIN).await.unwrap();
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    store.write("d/x", b"x", PLAIN).await.unwrap();
    let keys = store.list("c/").await.unwrap();
    assert_eq!(keys.len(), 30);
    assert_eq!(keys[0], "c/k0000");
    assert_eq!(keys[29], "c/k0029");
    assert_eq!(store.list_children("c").await.unwrap().len(), 30);
    assert_eq!(store.list_children("").await.unwrap(), ["c", "d"]);
    assert_eq!(store.list("").await.unwrap().len(), 31);
}

#[tokio::test]
async fn file_modes() {
    use std::os::unix::fs::PermissionsExt;

    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::at(dir.path());
    let mode = |key: &str| {
        std::fs::metadata(dir.path().join(key))
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    };
    store
        .write("c/pki/private/ca/key", b"k", SECRET)
        .await
        .unwrap();
    assert_eq!(mode("c/pki/private/ca/key"), 0o600);
    store.write("c/config", b"c", PLAIN).await.unwrap();
    // 0644 minus the umask: owner read/write, never executable or writable by others.
    assert_eq!(mode("c/config") & 0o600, 0o600);
    assert_eq!(mode("c/config") & !0o644, 0);
    // Overwriting a plain file with a secret one tightens the mode.
    store.write("c/config", b"c", SECRET).await.unwrap();
    assert_eq!(mode("c/config"), 0o600);
    let secret_create = WriteOptions {
        secret: true,
        create_only: true,
    };
    store
        .write("c/pki/private/new/key", b"k", secret_create)
        .await
        .unwrap();
    assert_eq!(mode("c/pki/private/new/key"), 0o600);
}

#[tokio::test]
async fn file_url_forms() {
    assert_eq!(
        FileStore::new("file:///srv/kops/").unwrap().root(),
        std::path::Path::new("/srv/kops")
    );
    assert_eq!(
        FileStore::new("relative/dir").unwrap().base_url(),
        "relative/dir"
    );
    assert!(matches!(
        FileStore::new("file://"),
        Err(StoreError::InvalidUrl { .. })
    ));
    let err = kops_state::open("azblob://bucket/x").await.unwrap_err();
    let message = err.to_string();
    assert!(
        message.starts_with("unsupported state store `azblob://bucket/x`"),
        "{message}"
    );
    assert!(
        message.contains("hint:") && message.contains("s3://"),
        "{message}"
    );
}

#[tokio::test]
async fn file_reads_fifty_clusters_quickly() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn ObjectStore> = Arc::new(FileStore::at(dir.path()));
    for i in 0..50 {
        let key = format!("cluster{i}.example.com/config");
        store.write(&key, &[b'x'; 2048], PLAIN).await.unwrap();
    }
    let start = std::time::Instant::now();
    let names = store.list_children("").await.unwrap();
    for name in &names {
        assert!(store
            .read(&format!("{name}/config"))
            .await
            .unwrap()
            .is_some());
    }
    let elapsed = start.elapsed();
    eprintln!("listing + reading 50 clusters: {elapsed:?}");
    assert_eq!(names.len(), 50);
    // The target is < 10 ms; leave room for loaded CI machines.
    assert!(
        elapsed.as_millis() < 100,
        "listing + reading 50 clusters took {elapsed:?}"
    );
}

/// SDK configuration for moto, built explicitly instead of via env vars.
async fn moto_config(endpoint: &str) -> SdkConfig {
    aws_config::defaults(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("testing", "testing", None, None, "moto"))
        .load()
        .await
}

async fn create_bucket(client: &aws_sdk_s3::Client, bucket: &str) {
    client.create_bucket().bucket(bucket).send().await.unwrap();
}

#[tokio::test]
async fn s3_conformance() {
    let Some(moto) = kops_testkit::require_moto() else {
        return;
    };
    let config = moto_config(&moto.endpoint()).await;
    let client = kops_state::s3::client_for(&config);

    create_bucket(&client, "kops-conformance").await;
    let store =
        Arc::new(S3Store::from_sdk_config("s3://kops-conformance/kops/state/", &config).unwrap());
    assert_eq!(store.base_url(), "s3://kops-conformance/kops/state");
    conformance(store.clone()).await;

    // Everything lives under the prefix and is encrypted with AES256.
    let all = client
        .list_objects_v2()
        .bucket("kops-conformance")
        .send()
        .await
        .unwrap();
    let keys: Vec<_> = all.contents().iter().filter_map(|o| o.key()).collect();
    assert_eq!(keys.len(), 6);
    for key in keys {
        assert!(key.starts_with("kops/state/"), "{key}");
        let head = client
            .head_object()
            .bucket("kops-conformance")
            .key(key)
            .send()
            .await
            .unwrap();
        assert_eq!(
            head.server_side_encryption(),
            Some(&ServerSideEncryption::Aes256),
            "{key}"
        );
    }

    // A bucket root works as a store too.
    create_bucket(&client, "kops-root").await;
    conformance(Arc::new(
        S3Store::from_sdk_config("s3://kops-root", &config).unwrap(),
    ))
    .await;
}

#[tokio::test]
async fn s3_missing_bucket_has_a_hint() {
    let Some(moto) = kops_testkit::require_moto() else {
        return;
    };
    let config = moto_config(&moto.endpoint()).await;
    let store = S3Store::from_sdk_config("s3://no-such-bucket/x", &config).unwrap();
    let err = store.write("k", b"v", PLAIN).await.unwrap_err();
    assert!(matches!(err, StoreError::NoSuchBucket { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains("`no-such-bucket`") && message.contains("hint:"),
        "{message}"
    );
    let err = store.list("").await.unwrap_err();
    assert!(matches!(err, StoreError::NoSuchBucket { .. }), "{err:?}");
}

#[tokio::test]
async fn s3_list_paginates() {
    let Some(moto) = kops_testkit::require_moto() else {
        return;
    };
    let config = moto_config(&moto.endpoint()).await;
    let client = kops_state::s3::client_for(&config);
    create_bucket(&client, "kops-many").await;
    let store = Arc::new(S3Store::from_sdk_config("s3://kops-many/p", &config).unwrap());
    // More than one ListObjectsV2 page (1000 keys), written 32 at a time:
    // 1,005 connections opened at once overflow moto's listen backlog on a
    // busy machine, and a connect then times out (the test is about pages).
    let slots = Arc::new(tokio::sync::Semaphore::new(32));
    let tasks: Vec<_> = (0..1005)
        .map(|i| {
            let store = store.clone();
            let slots = slots.clone();
            tokio::spawn(async move {
                let _slot = slots.acquire_owned().await.unwrap();
                let key = format!("c/k{i:04}");
                store.write(&key, b"x", PLAIN).await.unwrap();
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let keys = store.list("c/").await.unwrap();
    assert_eq!(keys.len(), 1005);
    assert_eq!(keys[0], "c/k0000");
    assert_eq!(keys[1004], "c/k1004");
    assert_eq!(store.list_children("c").await.unwrap().len(), 1005);
    assert_eq!(store.list_children("").await.unwrap(), ["c"]);
}

/// `open("s3://…")` builds its client from the environment, as the `kops`
/// binary does. Environment variables are process-wide, so this runs the
/// check in a child process (this test binary, running `env_child_s3_open`).
#[tokio::test]
async fn s3_open_uses_the_environment() {
    let Some(moto) = kops_testkit::require_moto() else {
        return;
    };
    let config = moto_config(&moto.endpoint()).await;
    let client = kops_state::s3::client_for(&config);
    create_bucket(&client, "kops-env").await;

    let general = moto.env();
    // Only the S3-specific endpoint, and no region: falls back to us-east-1.
    let s3_only: Vec<_> = moto
        .env()
        .into_iter()
        .filter(|(k, _)| k != "AWS_REGION")
        .map(|(k, v)| match k.as_str() {
            "AWS_ENDPOINT_URL" => ("AWS_ENDPOINT_URL_S3".to_string(), v),
            _ => (k, v),
        })
        .collect();
    for (url, env) in [
        ("s3://kops-env/general", general),
        ("s3://kops-env/s3-only", s3_only),
    ] {
        let output = tokio::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "env_child_s3_open",
                "--nocapture",
                "--test-threads=1",
            ])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("AWS_CONFIG_FILE", "/nonexistent/aws/config")
            .env(
                "AWS_SHARED_CREDENTIALS_FILE",
                "/nonexistent/aws/credentials",
            )
            .envs(env)
            .env("KOPS_STATE_TEST_CHILD_URL", url)
            .output()
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success() && stdout.contains("1 passed"),
            "child for {url} failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let keys = client
        .list_objects_v2()
        .bucket("kops-env")
        .send()
        .await
        .unwrap();
    assert_eq!(keys.contents().len(), 12);
}

/// The child half of `s3_open_uses_the_environment`; does nothing otherwise.
#[tokio::test]
async fn env_child_s3_open() {
    let Ok(url) = std::env::var("KOPS_STATE_TEST_CHILD_URL") else {
        return;
    };
    let store = kops_state::open(&url).await.unwrap();
    assert_eq!(store.base_url(), url);
    conformance(store).await;
}

/// kops' `S3_ENDPOINT`/`S3_*` variables alone reach a non-AWS store (moto
/// here): the client built from them passes the store conformance suite.
#[tokio::test]
async fn s3_custom_endpoint_from_kops_variables() {
    let Some(moto) = kops_testkit::require_moto() else {
        return;
    };
    let endpoint = moto.endpoint();
    let lookup = move |name: &str| match name {
        "S3_ENDPOINT" => Some(endpoint.clone()),
        "S3_REGION" => Some("us-east-1".to_string()),
        "S3_ACCESS_KEY_ID" | "S3_SECRET_ACCESS_KEY" => Some("testing".to_string()),
        _ => None,
    };
    let custom = kops_state::s3::CustomEndpoint::from_lookup(&lookup);
    let client = kops_state::s3::default_client(custom).await;
    create_bucket(&client, "kops-custom-endpoint").await;
    let store = Arc::new(S3Store::with_client("s3://kops-custom-endpoint/state", client).unwrap());
    conformance(store).await;
}
