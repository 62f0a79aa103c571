//! What can go wrong talking to Google, one kind per cause; each message
//! is one line that names what failed (never a secret).

/// An error of Google's client floor.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GoogleError {
    /// No credentials were found, or those found cannot be used (a file
    /// that does not parse, a key that is not a PKCS#8 RSA key).
    #[error("{0}")]
    Credentials(String),
    /// A token endpoint (OAuth, the metadata server) failed or refused.
    #[error("{0}")]
    Token(String),
    /// The request could not be sent or its answer not read (the system's
    /// roots, a connection, a timeout).
    #[error("{0}")]
    Transport(String),
}
