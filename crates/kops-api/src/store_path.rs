//! State-store locations as kops writes them into specs and node configs.
//!
//! kops parses a location into a path object and writes the object's path
//! back, not the text it was given: a local directory (`file:///x` or
//! `/x`) comes back bare (`/x`), a bucket or memory URL (`s3://`, `gs://`,
//! `memfs://`) as it was. Only a plain string join (etcd's backup store)
//! keeps a `file://` the user wrote.

/// The scheme of a local directory.
const FILE: &str = "file://";

/// `location` as kops writes a path it parsed: without `file://`, and
/// without a trailing `/`.
pub fn written(location: &str) -> String {
    let bare = location.strip_prefix(FILE).unwrap_or(location);
    match bare.trim_end_matches('/') {
        "" if bare.starts_with('/') => "/".to_string(),
        trimmed => trimmed.to_string(),
    }
}

/// `relative` below `base`, as kops writes a joined path: the written form
/// of `base` ([`written`]), then `relative` without leading `/`.
pub fn join(base: &str, relative: &str) -> String {
    let base = written(base);
    let relative = relative.trim_start_matches('/');
    if base.ends_with('/') {
        format!("{base}{relative}")
    } else {
        format!("{base}/{relative}")
    }
}

/// Whether two locations name the same place (`file:///x` and `/x` do).
pub fn same(a: &str, b: &str) -> bool {
    written(a) == written(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_local_directory_is_written_bare_and_buckets_as_given() {
        assert_eq!(
            written("file:///tmp/state/c.example.com"),
            "/tmp/state/c.example.com"
        );
        assert_eq!(
            written("/tmp/state/c.example.com/"),
            "/tmp/state/c.example.com"
        );
        assert_eq!(
            written("s3://bucket/c.example.com"),
            "s3://bucket/c.example.com"
        );
        assert_eq!(written("gs://bucket/c"), "gs://bucket/c");
        assert_eq!(
            written("memfs://clusters.example.com/c"),
            "memfs://clusters.example.com/c"
        );
        assert_eq!(join("file:///tmp/s/c", "pki"), "/tmp/s/c/pki");
        assert_eq!(
            join("file:///tmp/s/c/", "/addons/bootstrap-channel.yaml"),
            "/tmp/s/c/addons/bootstrap-channel.yaml"
        );
        assert_eq!(join("s3://b/c", "secrets"), "s3://b/c/secrets");
        assert!(same("file:///tmp/s/c", "/tmp/s/c/"));
        assert!(!same("s3://b/c", "gs://b/c"));
    }
}
