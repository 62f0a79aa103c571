//! Google's error bodies: `{"error": {"code", "message", "errors":
//! [{"message", "domain", "reason"}], "status"}}`, with `details` when
//! the error has them (a quota's).

use serde_json::{json, Value};

/// An error answer.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub status: &'static str,
    pub message: String,
    /// `errors[0].domain`: `global` for most errors, `usageLimits` for
    /// quota ones.
    pub domain: &'static str,
    /// `details` (`google.rpc.ErrorInfo`, `google.rpc.Help`...), when the
    /// error carries them.
    pub details: Option<Value>,
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, status: &'static str, message: String) -> Self {
        ApiError {
            code,
            reason,
            status,
            message,
            domain: "global",
            details: None,
        }
    }

    /// The same error in `domain` with `details`.
    pub fn with_details(mut self, domain: &'static str, details: Value) -> Self {
        self.domain = domain;
        self.details = Some(details);
        self
    }

    pub fn invalid(message: String) -> Self {
        ApiError::new(400, "invalid", "INVALID_ARGUMENT", message)
    }

    pub fn not_found(what: &str) -> Self {
        ApiError::new(
            404,
            "notFound",
            "NOT_FOUND",
            format!("The resource '{what}' was not found"),
        )
    }

    pub fn already_exists(what: &str) -> Self {
        ApiError::new(
            409,
            "alreadyExists",
            "ALREADY_EXISTS",
            format!("The resource '{what}' already exists"),
        )
    }

    pub fn condition_not_met(message: String) -> Self {
        ApiError::new(412, "conditionNotMet", "FAILED_PRECONDITION", message)
    }

    pub fn not_implemented(id: &str) -> Self {
        ApiError::new(
            501,
            "notImplemented",
            "UNIMPLEMENTED",
            format!("{id} is not served by the kops-testkit GCE API server"),
        )
    }

    pub fn body(&self) -> Value {
        let mut body = json!({"error": {
            "code": self.code,
            "message": self.message,
            "errors": [{"message": self.message, "domain": self.domain, "reason": self.reason}],
            "status": self.status,
        }});
        if let Some(details) = &self.details {
            body["error"]["details"] = details.clone();
        }
        body
    }
}
