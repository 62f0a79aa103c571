//! AWS SDK errors as one short line each: AWS' error code and message for
//! an answer, what failed for a request that got none. The SDK's own
//! `Display` chains (and `DisplayErrorContext`, which appends the whole
//! `Debug` structure) run to several hundred characters and repeat the
//! same facts; users need the code, the message and, where one applies,
//! what to do.

use std::error::Error;

use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;

/// The longest text taken from AWS or the SDK for one error: the CLI's
/// line adds the operation and the resource and must stay under 300.
const MAX_DETAIL: usize = 160;

/// What the default credential chain tried, and how to set credentials:
/// the whole message when the SDK found none.
pub const NO_CREDENTIALS: &str = "no AWS credentials found (tried AWS_ACCESS_KEY_ID, AWS_PROFILE \
     or the default profile in ~/.aws, web identity, container and instance roles); set \
     AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE";

/// What went wrong, in a few words, for each kind of SDK error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorText {
    /// One line: `Code: message`, or what failed.
    pub text: String,
    /// What the user can do, only for errors it applies to.
    pub hint: Option<&'static str>,
}

/// The one-line text of `err`, and a hint where one applies.
pub fn error_text<E>(err: &SdkError<E, HttpResponse>) -> ErrorText
where
    E: ProvideErrorMetadata + Error + 'static,
{
    if is_credentials_error(err) {
        return ErrorText {
            text: NO_CREDENTIALS.to_string(),
            hint: None,
        };
    }
    let (text, hint) = match err {
        SdkError::ServiceError(service) => {
            let status = Some(service.raw().status().as_u16());
            let code = err.code();
            let message = err.message().map(one_line).filter(|m| !m.is_empty());
            let text = match (code, message) {
                (Some(code), Some(message)) => format!("{code}: {message}"),
                (Some(code), None) => match status {
                    Some(status) => format!("{code} (HTTP {status})"),
                    None => code.to_string(),
                },
                (None, Some(message)) => message,
                (None, None) => match status {
                    Some(status) => format!("HTTP {status} without an error code"),
                    None => "an error answer without a code".to_string(),
                },
            };
            (text, code.and_then(hint_for_code))
        }
        SdkError::TimeoutError(_) => (
            format!("timed out{}", innermost(err)),
            Some(CONNECTION_HINT),
        ),
        SdkError::DispatchFailure(failure) => {
            let what = if failure.is_timeout() {
                "timed out"
            } else if failure.is_io() {
                "connection failed"
            } else {
                "request failed"
            };
            (format!("{what}{}", innermost(err)), Some(CONNECTION_HINT))
        }
        SdkError::ResponseError(_) => (
            format!("unreadable answer{}", innermost(err)),
            Some(CONNECTION_HINT),
        ),
        SdkError::ConstructionFailure(_) => (format!("request not built{}", innermost(err)), None),
        _ => (format!("request failed{}", innermost(err)), None),
    };
    ErrorText {
        text: shorten(&text),
        hint,
    }
}

/// Where to look when AWS could not be reached at all.
const CONNECTION_HINT: &str = "check the network, AWS_REGION, and AWS_ENDPOINT_URL if you set it";

/// Hints for AWS error codes that say the credentials, not the request,
/// are the problem.
fn hint_for_code(code: &str) -> Option<&'static str> {
    match code {
        "InvalidClientTokenId"
        | "UnrecognizedClientException"
        | "AuthFailure"
        | "SignatureDoesNotMatch"
        | "IncompleteSignature"
        | "InvalidAccessKeyId" => {
            Some("the AWS credentials in use are not valid; check AWS_ACCESS_KEY_ID/AWS_PROFILE")
        }
        "ExpiredToken" | "ExpiredTokenException" | "RequestExpired" => {
            Some("the AWS session has expired; refresh the credentials (e.g. `aws sso login`)")
        }
        "AccessDenied" | "AccessDeniedException" | "UnauthorizedOperation" => {
            Some("the AWS identity in use lacks this permission")
        }
        _ => None,
    }
}

/// True when the SDK made no request because it found no credentials:
/// the identity resolution error (a `CredentialsError`, whose texts all
/// speak of credentials) is in the source chain of a failure that never
/// reached AWS.
fn is_credentials_error<E>(err: &SdkError<E, HttpResponse>) -> bool
where
    E: Error + 'static,
{
    if !matches!(
        err,
        SdkError::DispatchFailure(_) | SdkError::ConstructionFailure(_)
    ) {
        return false;
    }
    let mut source = err.source();
    while let Some(s) = source {
        if s.to_string().to_ascii_lowercase().contains("credential") {
            return true;
        }
        source = s.source();
    }
    false
}

/// `: <the deepest cause's text>` (what actually failed: `Connection
/// refused (os error 111)`), or nothing when the SDK gives no cause.
fn innermost(err: &dyn Error) -> String {
    let mut deepest = None;
    let mut source = err.source();
    while let Some(s) = source {
        let text = one_line(&s.to_string());
        if !text.is_empty() {
            deepest = Some(text);
        }
        source = s.source();
    }
    deepest.map(|t| format!(": {t}")).unwrap_or_default()
}

/// Whitespace (newlines of XML bodies) collapsed to single spaces.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `text` cut to [`MAX_DETAIL`] characters, with `…` where it was cut.
pub(crate) fn shorten(text: &str) -> String {
    let text = one_line(text);
    if text.chars().count() <= MAX_DETAIL {
        return text;
    }
    let mut cut: String = text.chars().take(MAX_DETAIL - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_smithy_runtime_api::client::result::ConnectorError;
    use aws_smithy_types::body::SdkBody;
    use aws_smithy_types::error::ErrorMetadata;

    type DeleteRoleError = aws_sdk_iam::operation::delete_role::DeleteRoleError;

    fn service_error(
        status: u16,
        code: Option<&str>,
        message: Option<&str>,
    ) -> SdkError<DeleteRoleError, HttpResponse> {
        let mut meta = ErrorMetadata::builder();
        if let Some(code) = code {
            meta = meta.code(code);
        }
        if let Some(message) = message {
            meta = meta.message(message);
        }
        let response = HttpResponse::new(
            status.try_into().expect("a valid status"),
            SdkBody::from("<ErrorResponse/>"),
        );
        SdkError::service_error(DeleteRoleError::generic(meta.build()), response)
    }

    #[test]
    fn a_service_error_is_its_code_and_message() {
        let err = service_error(
            409,
            Some("DeleteConflict"),
            Some("Cannot delete entity, must remove roles from instance profile first."),
        );
        let text = error_text(&err);
        assert_eq!(
            text.text,
            "DeleteConflict: Cannot delete entity, must remove roles from instance profile first."
        );
        assert_eq!(text.hint, None, "no credentials hint for a conflict");
        // What the SDK's own rendering would have printed.
        let debug = aws_smithy_types::error::display::DisplayErrorContext(&err).to_string();
        assert!(debug.contains("ServiceError"), "{debug}");
        assert!(!text.text.contains("ServiceError") && !text.text.contains('{'));
    }

    #[test]
    fn a_code_without_message_names_the_status() {
        let err = service_error(503, Some("ServiceUnavailable"), None);
        assert_eq!(error_text(&err).text, "ServiceUnavailable (HTTP 503)");
        let err = service_error(500, None, None);
        assert_eq!(error_text(&err).text, "HTTP 500 without an error code");
    }

    #[test]
    fn long_and_multi_line_messages_are_cut_to_one_short_line() {
        let long = format!("first line\n  {}", "x".repeat(1000));
        let err = service_error(400, Some("MalformedPolicyDocument"), Some(&long));
        let text = error_text(&err).text;
        assert!(!text.contains('\n'));
        assert!(text.chars().count() <= MAX_DETAIL, "{text}");
        assert!(text.starts_with("MalformedPolicyDocument: first line x"));
        assert!(text.ends_with('…'));
    }

    #[test]
    fn permission_errors_get_their_own_hint() {
        let err = service_error(403, Some("AccessDenied"), Some("User: x is not authorized"));
        let text = error_text(&err);
        assert_eq!(text.text, "AccessDenied: User: x is not authorized");
        assert_eq!(
            text.hint,
            Some("the AWS identity in use lacks this permission")
        );
    }

    #[test]
    fn a_dropped_connection_is_one_line_with_its_cause() {
        let io = std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "connection reset by peer",
        );
        let err: SdkError<DeleteRoleError, HttpResponse> =
            SdkError::dispatch_failure(ConnectorError::io(Box::new(io)));
        let text = error_text(&err);
        assert_eq!(text.text, "connection failed: connection reset by peer");
        assert_eq!(text.hint, Some(CONNECTION_HINT));
        let err: SdkError<DeleteRoleError, HttpResponse> =
            SdkError::dispatch_failure(ConnectorError::timeout("slow".into()));
        assert_eq!(error_text(&err).text, "timed out: slow");
    }

    #[test]
    fn missing_credentials_say_what_was_tried_and_how_to_set_them() {
        #[derive(Debug)]
        struct NotLoaded;
        impl std::fmt::Display for NotLoaded {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("the credential provider was not enabled")
            }
        }
        impl Error for NotLoaded {}
        let err: SdkError<DeleteRoleError, HttpResponse> =
            SdkError::dispatch_failure(ConnectorError::other(Box::new(NotLoaded), None));
        let text = error_text(&err);
        assert_eq!(text.text, NO_CREDENTIALS);
        assert!(text.text.contains("AWS_ACCESS_KEY_ID") && text.text.contains("AWS_PROFILE"));
        assert!(!text.text.contains('\n'));
        // An unrelated failure to send gets no credentials advice.
        let other: SdkError<DeleteRoleError, HttpResponse> = SdkError::dispatch_failure(
            ConnectorError::other("dns error: failed to lookup address".into(), None),
        );
        assert!(!error_text(&other).text.contains("credentials"));
    }
}
