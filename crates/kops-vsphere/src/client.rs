//! The SOAP client: one session with a vCenter (or the simulator), the
//! calls it made counted by method. Only the calls kops-rs uses are
//! written out (see [`crate::vcenter`]); each is a hand-written request
//! body in vim25's element order and a read of the answer's elements.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::Request;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::rt::TokioExecutor;

use crate::trust::Trust;
use crate::xml::{self, Element};
use crate::VsphereError;

/// How long one SOAP call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// How many times a call that did not reach the SOAP service is sent.
pub const ATTEMPTS: u32 = 6;
/// The wait before the second attempt (doubled each time, up to
/// [`MAX_PAUSE`]).
const FIRST_PAUSE: Duration = Duration::from_millis(100);
const MAX_PAUSE: Duration = Duration::from_secs(3);

/// One request's outcome.
enum Exchange {
    /// vCenter's answer or fault.
    Answer(Result<Element, Fault>),
    /// It did not reach the SOAP service (why): it may be sent again.
    Again(String),
}

/// A managed object reference (`type` and value, e.g. `Folder` `group-v3`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MoRef {
    pub kind: String,
    pub value: String,
}

impl MoRef {
    pub fn new(kind: &str, value: &str) -> MoRef {
        MoRef {
            kind: kind.to_string(),
            value: value.to_string(),
        }
    }

    /// The reference as the element `tag` of a request.
    pub fn xml(&self, tag: &str) -> String {
        format!(
            "<{tag} type=\"{}\">{}</{tag}>",
            xml::escape(&self.kind),
            xml::escape(&self.value)
        )
    }

    /// The reference an element of an answer holds.
    pub fn from_element(e: &Element) -> Option<MoRef> {
        Some(MoRef::new(e.attr("type")?, e.text.trim()))
    }
}

/// What a SOAP call can fail with besides transport errors.
#[derive(Debug, Clone)]
pub struct Fault {
    /// The fault's type (`InvalidLogin`, `NotAuthenticated`, ...).
    pub kind: String,
    pub message: String,
}

/// A session with one vCenter.
pub struct Client {
    http: HyperClient<HttpsConnector<HttpConnector>, Full<Bytes>>,
    /// `https://host/sdk`.
    url: String,
    /// What the user named (for messages).
    pub server: String,
    cookie: Mutex<Option<String>>,
    /// Login's body once a login succeeded: a session vCenter ended
    /// (expired, terminated by an administrator) is renewed with it.
    login: Mutex<Option<String>>,
    calls: Mutex<BTreeMap<String, u64>>,
    /// Whether a certificate was pinned (for the message when refused).
    pinned: bool,
    /// The fingerprint of the last certificate refused.
    refused: Arc<Mutex<Option<String>>>,
}

impl Client {
    /// A client for `server` (a host name, `host:port` or a URL; https
    /// unless the URL says http) trusting the OS store. Nothing is sent yet.
    pub fn new(server: &str) -> Result<Client, VsphereError> {
        Client::with_trust(server, &Trust::System)
    }

    /// A client for `server` accepting the certificates `trust` names.
    pub fn with_trust(server: &str, trust: &Trust) -> Result<Client, VsphereError> {
        let url = sdk_url(server);
        let (tls, refused) =
            crate::trust::client_config(trust).map_err(|reason| VsphereError::Unreachable {
                server: server.to_string(),
                reason,
            })?;
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .build();
        Ok(Client {
            http: HyperClient::builder(TokioExecutor::new()).build(connector),
            url,
            server: server.to_string(),
            cookie: Mutex::new(None),
            login: Mutex::new(None),
            calls: Mutex::new(BTreeMap::new()),
            pinned: matches!(trust, Trust::Thumbprint(_)),
            refused,
        })
    }

    /// The server's URL without `/sdk` (`https://host`), under which it
    /// serves datastore files (`/folder/...`).
    pub fn base_url(&self) -> &str {
        self.url.strip_suffix("/sdk").unwrap_or(&self.url)
    }

    /// The calls made so far, by method name.
    pub fn calls(&self) -> BTreeMap<String, u64> {
        self.calls.lock().map(|c| c.clone()).unwrap_or_default()
    }

    /// Calls `method` with the body's inner XML; the answer's
    /// `<methodResponse>` element, or the fault.
    pub async fn call(&self, method: &str, inner: &str) -> Result<Element, VsphereError> {
        match self.call_or_fault(method, inner).await? {
            Ok(answer) => Ok(answer),
            Err(fault) => Err(VsphereError::Fault {
                method: method.to_string(),
                kind: fault.kind,
                message: fault.message,
            }),
        }
    }

    /// Keeps Login's body (`inner`) to log in again when vCenter answers
    /// `NotAuthenticated` (see [`Client::call_or_fault`]).
    pub fn remember_login(&self, inner: &str) {
        if let Ok(mut login) = self.login.lock() {
            *login = Some(inner.to_string());
        }
    }

    /// [`Client::call`], a fault given back to the caller to judge.
    ///
    /// A session vCenter ended (a `NotAuthenticated` fault: it expired
    /// during a long run, or an administrator terminated it) is renewed
    /// once per call: a new Login with the remembered body, then the call
    /// is sent again; if that Login fails, the first fault is the answer.
    pub async fn call_or_fault(
        &self,
        method: &str,
        inner: &str,
    ) -> Result<Result<Element, Fault>, VsphereError> {
        let answer = self.send(method, inner).await?;
        let ended = matches!(&answer, Err(f) if f.kind.ends_with("NotAuthenticated"));
        if !ended || matches!(method, "Login" | "Logout") {
            return Ok(answer);
        }
        let Some(login) = self.login.lock().ok().and_then(|l| l.clone()) else {
            return Ok(answer);
        };
        tracing::info!(
            "vCenter {}: the session ended ({method}: NotAuthenticated); logging in again",
            self.server
        );
        if let Ok(mut cookie) = self.cookie.lock() {
            *cookie = None;
        }
        match self.send("Login", &login).await? {
            Ok(_) => self.send(method, inner).await,
            Err(_) => Ok(answer),
        }
    }

    /// One call, its fault given back.
    ///
    /// A call that did not reach vCenter's SOAP service is sent again
    /// (up to [`ATTEMPTS`] times, waiting longer each time): a dropped or
    /// refused connection, and an answer that is no SOAP envelope with
    /// HTTP 429 or 5xx (a busy or restarting vCenter, a proxy in front of
    /// it). A SOAP fault is vCenter's answer and is never repeated. Sent
    /// again after a connection dropped mid-answer, a call vCenter did
    /// carry out fails as a repeat would (a clone's name taken, a VM
    /// already powered on), which the next `update` reconciles by listing.
    async fn send(
        &self,
        method: &str,
        inner: &str,
    ) -> Result<Result<Element, Fault>, VsphereError> {
        let body = Bytes::from(format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\
             <soapenv:Envelope xmlns:soapenv=\"http://schemas.xmlsoap.org/soap/envelope/\" \
             xmlns:xsd=\"http://www.w3.org/2001/XMLSchema\" \
             xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\">\
             <soapenv:Body><{method} xmlns=\"urn:vim25\">{inner}</{method}></soapenv:Body>\
             </soapenv:Envelope>"
        ));
        let mut pause = FIRST_PAUSE;
        for attempt in 1..=ATTEMPTS {
            if let Ok(mut calls) = self.calls.lock() {
                *calls.entry(method.to_string()).or_default() += 1;
            }
            match self.exchange(body.clone()).await? {
                Exchange::Answer(answer) => return Ok(answer),
                Exchange::Again(reason) if attempt < ATTEMPTS => {
                    tracing::debug!("{method} to {}: {reason}; trying again", self.server);
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MAX_PAUSE);
                }
                Exchange::Again(reason) => {
                    return Err(self.unreachable(format!("{reason} ({ATTEMPTS} attempts)")))
                }
            }
        }
        unreachable!("the last attempt returns")
    }

    /// One request and its answer: the SOAP answer or fault, or why the
    /// call may be sent again.
    async fn exchange(&self, body: Bytes) -> Result<Exchange, VsphereError> {
        let mut request = Request::post(&self.url)
            .header("content-type", "text/xml; charset=utf-8")
            .header("soapaction", "urn:vim25/7.0");
        let cookie = self.cookie.lock().ok().and_then(|c| c.clone());
        if let Some(cookie) = cookie {
            request = request.header("cookie", cookie);
        }
        let request = request
            .body(Full::new(body))
            .map_err(|e| self.unreachable(format!("bad request: {e}")))?;
        let exchange = async {
            let response = self.http.request(request).await.map_err(|e| {
                use std::error::Error;
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
            Ok::<_, String>((parts, body))
        };
        let (parts, body) = match tokio::time::timeout(CALL_TIMEOUT, exchange).await {
            Err(_) => {
                return Err(self.unreachable(format!("no answer within {CALL_TIMEOUT:?}")));
            }
            Ok(Err(reason)) => {
                // A refused certificate stays refused: no second attempt.
                let refused = self.refused.lock().ok().and_then(|mut r| r.take());
                if let Some(fingerprint) = refused {
                    return Err(VsphereError::Untrusted {
                        server: self.server.clone(),
                        fingerprint,
                        pinned: self.pinned,
                    });
                }
                return Ok(Exchange::Again(reason));
            }
            Ok(Ok(answer)) => answer,
        };
        if let Some(session) = parts
            .headers
            .get_all("set-cookie")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find(|v| v.starts_with("vmware_soap_session="))
        {
            let pair = session.split(';').next().unwrap_or(session).to_string();
            if let Ok(mut cookie) = self.cookie.lock() {
                *cookie = Some(pair);
            }
        }
        let status = parts.status.as_u16();
        let text = String::from_utf8_lossy(&body);
        let envelope = match xml::parse(&text) {
            Ok(envelope) => envelope,
            Err(_) if status == 429 || status >= 500 => {
                return Ok(Exchange::Again(format!(
                    "HTTP {status} without a SOAP answer"
                )));
            }
            Err(e) => {
                return Err(self.unreachable(format!(
                    "HTTP {status} with no SOAP answer ({e}); is it a vCenter?"
                )));
            }
        };
        let soap_body = envelope
            .child("Body")
            .ok_or_else(|| self.unreachable("a SOAP answer without a body".into()))?;
        if let Some(fault) = soap_body.child("Fault") {
            let kind = fault
                .child("detail")
                .and_then(|d| d.children.first())
                .map(|d| {
                    d.xsi_type()
                        .map(str::to_string)
                        .unwrap_or_else(|| d.name.trim_end_matches("Fault").to_string())
                })
                .unwrap_or_default();
            let message = fault
                .text_at(&["faultstring"])
                .unwrap_or("")
                .trim()
                .to_string();
            return Ok(Exchange::Answer(Err(Fault { kind, message })));
        }
        let answer = soap_body
            .children
            .first()
            .cloned()
            .ok_or_else(|| self.unreachable("an empty SOAP body".into()))?;
        Ok(Exchange::Answer(Ok(answer)))
    }

    fn unreachable(&self, reason: String) -> VsphereError {
        VsphereError::Unreachable {
            server: self.server.clone(),
            reason,
        }
    }
}

/// `https://<server>/sdk` from what the user gave (a host, `host:port`, or
/// a URL with or without the `/sdk` path).
pub fn sdk_url(server: &str) -> String {
    let server = server.trim().trim_end_matches('/');
    let with_scheme = if server.starts_with("http://") || server.starts_with("https://") {
        server.to_string()
    } else {
        format!("https://{server}")
    };
    if with_scheme.ends_with("/sdk") {
        with_scheme
    } else {
        format!("{with_scheme}/sdk")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sdk_urls() {
        assert_eq!(sdk_url("vc.example.com"), "https://vc.example.com/sdk");
        assert_eq!(
            sdk_url("http://127.0.0.1:8989/sdk"),
            "http://127.0.0.1:8989/sdk"
        );
        assert_eq!(sdk_url("https://10.0.0.1/"), "https://10.0.0.1/sdk");
    }
}
