//! The HTTP client of the gs:// backend: hyper with rustls (the stack the
//! workspace already builds for nodeup and kops-controller), one request at
//! a time, with a deadline and retries of transient failures.

use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Request};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::GoogleError;

/// How long one request may take, from connecting to the last body byte.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// Attempts for a request that failed in transit or with 429/5xx.
const ATTEMPTS: u32 = 4;
/// The first pause between attempts; each next one is 1.5 times longer.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);

/// A response read to the end.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Response {
    /// The body as text, for error messages.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// A header's value as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// One request to send (and, on transient failures, send again).
#[derive(Debug, Clone)]
pub struct Call<'a> {
    pub method: Method,
    pub url: &'a str,
    pub headers: Vec<(&'static str, String)>,
    pub body: Bytes,
}

impl<'a> Call<'a> {
    pub fn new(method: Method, url: &'a str) -> Self {
        Call {
            method,
            url,
            headers: Vec::new(),
            body: Bytes::new(),
        }
    }

    pub fn header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    pub fn body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = body.into();
        self
    }
}

/// An HTTP(S) client; cheap to clone.
#[derive(Clone, Debug)]
pub struct Http {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
}

impl Http {
    /// A client trusting the system's root certificates.
    pub fn new() -> Result<Http, GoogleError> {
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_native_roots()
            .map_err(|e| {
                GoogleError::Transport(format!("cannot load the system's root certificates: {e}"))
            })?
            .https_or_http()
            .enable_http1()
            .build();
        Ok(Http {
            client: Client::builder(TokioExecutor::new()).build(connector),
        })
    }

    /// Sends `call`, retrying connection failures, timeouts, 429 and 5xx
    /// answers with backoff; the last answer or failure is returned.
    pub async fn send(&self, call: &Call<'_>) -> Result<Response, GoogleError> {
        let mut pause = FIRST_BACKOFF;
        let mut attempt = 1;
        loop {
            let result = self.send_once(call).await;
            let transient = match &result {
                Ok(response) => response.status == 429 || response.status >= 500,
                Err(_) => true,
            };
            if !transient || attempt >= ATTEMPTS {
                return result;
            }
            tracing::debug!(
                "{} {} failed (attempt {attempt}), retrying in {pause:?}",
                call.method,
                call.url
            );
            tokio::time::sleep(pause).await;
            pause = pause.mul_f32(1.5);
            attempt += 1;
        }
    }

    /// Sends `call` once, without retries.
    pub async fn send_once(&self, call: &Call<'_>) -> Result<Response, GoogleError> {
        self.exchange(call).await.map_err(GoogleError::Transport)
    }

    /// [`Http::send_once`]'s exchange; the error names what failed.
    async fn exchange(&self, call: &Call<'_>) -> Result<Response, String> {
        let mut request = Request::builder().method(call.method.clone()).uri(call.url);
        for (name, value) in &call.headers {
            let value =
                HeaderValue::from_str(value).map_err(|_| format!("bad value for header {name}"))?;
            request = request.header(HeaderName::from_static(name), value);
        }
        // hyper sends an empty body with neither `Content-Length` nor
        // chunked encoding; Google's front end answers such a POST (or PUT,
        // PATCH) with 411 Length Required, so the length is always given.
        let sends_body = matches!(call.method, Method::POST | Method::PUT | Method::PATCH);
        if sends_body
            && call.body.is_empty()
            && !call
                .headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        {
            request = request.header(hyper::header::CONTENT_LENGTH, HeaderValue::from_static("0"));
        }
        let request = request
            .body(Full::new(call.body.clone()))
            .map_err(|e| format!("bad request to {}: {e}", call.url))?;
        let exchange = async {
            let response = self.client.request(request).await.map_err(|e| {
                use std::error::Error;
                // hyper's message alone ("client error (Connect)") hides why.
                match e.source() {
                    Some(cause) => format!("{e}: {cause}"),
                    None => e.to_string(),
                }
            })?;
            let (parts, body) = response.into_parts();
            let body = body
                .collect()
                .await
                .map_err(|e| format!("reading the answer failed: {e}"))?
                .to_bytes();
            Ok(Response {
                status: parts.status.as_u16(),
                headers: parts.headers,
                body,
            })
        };
        tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .unwrap_or_else(|_| Err(format!("no answer within {}s", REQUEST_TIMEOUT.as_secs())))
    }
}
