//! The HTTP(S) client the controller and the node use for cloud APIs (AWS
//! STS, Google's Compute API, the GCE metadata server), through the
//! environment's proxy where one is named ([`crate::proxy`]).

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::client::legacy::Client;

/// An HTTPS (and, for a local endpoint, HTTP) client through the
/// environment's proxy, if any.
pub type HttpClient = Client<hyper_rustls::HttpsConnector<crate::proxy::Connector>, Full<Bytes>>;

/// A client for `url`'s host: through the proxy the environment names
/// for it, if any (`what` names the service in the log line saying so).
pub fn http_client(url: &str, what: &str) -> Result<HttpClient, String> {
    let uri: http::Uri = url
        .parse()
        .map_err(|e| format!("{what} URL `{url}`: {e}"))?;
    let proxy = crate::proxy::proxy_for(&uri, &|name| std::env::var(name).ok())?;
    if let Some(proxy) = &proxy {
        tracing::info!("{what} calls go through the proxy {}", proxy.uri);
    }
    client_through(proxy)
}

/// An HTTP(S) client connecting directly (`None`) or through `proxy`.
pub fn client_through(proxy: Option<crate::proxy::Proxy>) -> Result<HttpClient, String> {
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_native_roots()
        .map_err(|e| format!("cannot load the system's CA certificates: {e}"))?
        .https_or_http()
        .enable_http1()
        .wrap_connector(crate::proxy::Connector::new(proxy));
    Ok(Client::builder(hyper_util::rt::TokioExecutor::new()).build(connector))
}
