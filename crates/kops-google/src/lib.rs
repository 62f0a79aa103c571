//! Google Cloud's client floor, shared by everything that calls Google:
//! the HTTP transport (`http`: TLS with the OS roots, bodies always sent
//! with a length, as Google's front end requires) and credentials (`auth`:
//! a service-account key, gcloud's application-default credentials, or the
//! metadata server's token). The `gs://` store (kops-state) and the
//! Compute, DNS and IAM clients (kops-gce) sit on it.

pub mod auth;
mod error;
pub mod http;

pub use error::GoogleError;

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

/// Every byte but the unreserved ones is escaped in object names and query
/// values (`/` included: an object name is one path segment).
const ESCAPE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// `text` as one escaped path segment or query value.
pub fn escape(text: &str) -> String {
    utf8_percent_encode(text, ESCAPE).to_string()
}
