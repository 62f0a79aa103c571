//! The connection to STS, through the proxy the environment names.
//!
//! Instances in a private network often reach AWS through a proxy
//! (`HTTPS_PROXY`, excepted hosts in `NO_PROXY`, as the AWS SDK and Go
//! read them; the lowercase spellings too). The controller replays tokens
//! to STS over its own HTTP client, so it reads them itself: through a
//! proxy the connection is a CONNECT tunnel, and TLS still ends at STS.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use hyper::Uri;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A proxy: where it listens and its `Proxy-Authorization`, if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proxy {
    /// `http://host:port`.
    pub uri: Uri,
    pub authorization: Option<String>,
}

/// The proxy for `destination`, from `lookup` (the environment):
/// `HTTPS_PROXY` for an `https://` URL, `HTTP_PROXY` for `http://`, unless
/// `NO_PROXY` names the host (`*`, the host, or a domain it is in).
/// A proxy reached over TLS (`https://`) or another protocol (`socks5://`)
/// is refused: this client speaks plain HTTP to its proxy, and would send
/// the proxy's credentials in clear to what was meant to be a TLS peer.
pub fn proxy_for(
    destination: &Uri,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<Proxy>, String> {
    let Some(setting) = proxy_setting(destination, lookup) else {
        return Ok(None);
    };
    let (name, setting) = setting;
    let setting = setting.trim();
    let scheme = setting
        .split_once("://")
        .map(|(scheme, _)| scheme.to_ascii_lowercase());
    match scheme.as_deref() {
        None | Some("http") => {}
        Some(other) => {
            return Err(format!(
                "{name}: a `{}://` proxy is not supported (kops-controller reaches its proxy over plain HTTP, and the tunnel inside is TLS); set {name} to the proxy's `http://host:port`",
                crate::text::escape(other)
            ))
        }
    }
    let rest = setting.split_once("://").map_or(setting, |(_, rest)| rest);
    let rest = rest.split('/').next().unwrap_or_default();
    let (userinfo, hostport) = match rest.rsplit_once('@') {
        Some((user, hostport)) => (Some(user), hostport),
        None => (None, rest),
    };
    let Ok(uri) = format!("http://{hostport}").parse::<Uri>() else {
        return Err(format!(
            "{name}: `{}` is not a proxy's `http://host:port`",
            crate::text::escape(hostport)
        ));
    };
    let authorization = userinfo.map(|user| {
        use base64::Engine;
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(user)
        )
    });
    Ok(Some(Proxy { uri, authorization }))
}

/// The variable naming `destination`'s proxy and its value, unless none
/// is set or `NO_PROXY` excepts the host.
fn proxy_setting(
    destination: &Uri,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Option<(&'static str, String)> {
    let var = |name: &str| {
        lookup(name)
            .or_else(|| lookup(&name.to_ascii_lowercase()))
            .filter(|v| !v.trim().is_empty())
    };
    let host = destination
        .host()?
        .trim_start_matches('[')
        .trim_end_matches(']');
    let excepted = var("NO_PROXY").is_some_and(|list| {
        list.split(',').map(str::trim).any(|entry| {
            let domain = entry.trim_start_matches('.');
            entry == "*"
                || (!domain.is_empty()
                    && (host.eq_ignore_ascii_case(domain)
                        || host
                            .to_ascii_lowercase()
                            .ends_with(&format!(".{}", domain.to_ascii_lowercase()))))
        })
    });
    if excepted {
        return None;
    }
    let name = match destination.scheme_str() {
        Some("https") => "HTTPS_PROXY",
        _ => "HTTP_PROXY",
    };
    Some((name, var(name)?))
}

/// Connects directly, or through a proxy with CONNECT.
#[derive(Clone)]
pub struct Connector {
    http: HttpConnector,
    proxy: Option<Proxy>,
}

impl Connector {
    pub fn new(proxy: Option<Proxy>) -> Connector {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        Connector { http, proxy }
    }
}

impl tower_service::Service<Uri> for Connector {
    type Response = TokioIo<TcpStream>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.http.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, destination: Uri) -> Self::Future {
        let mut http = self.http.clone();
        let proxy = self.proxy.clone();
        Box::pin(async move {
            let Some(proxy) = proxy else {
                return Ok(http.call(destination).await?);
            };
            let mut stream = http.call(proxy.uri.clone()).await?.into_inner();
            let host = destination.host().ok_or("the STS URL has no host")?;
            let port =
                destination
                    .port_u16()
                    .unwrap_or(if destination.scheme_str() == Some("http") {
                        80
                    } else {
                        443
                    });
            let mut connect = format!("CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n");
            if let Some(auth) = &proxy.authorization {
                connect.push_str(&format!("Proxy-Authorization: {auth}\r\n"));
            }
            connect.push_str("\r\n");
            stream.write_all(connect.as_bytes()).await?;
            // The proxy's answer: a status line and headers, then the tunnel.
            let mut head = Vec::new();
            while !head.ends_with(b"\r\n\r\n") {
                if head.len() > 8192 {
                    return Err("the proxy's answer to CONNECT is too long".into());
                }
                let byte = stream.read_u8().await?;
                head.push(byte);
            }
            let status = String::from_utf8_lossy(&head);
            let status = status.lines().next().unwrap_or_default();
            let ok = status.starts_with("HTTP/1.") && status.split(' ').nth(1) == Some("200");
            if !ok {
                return Err(format!(
                    "the proxy {} refused CONNECT {host}:{port}: {}",
                    proxy.uri,
                    crate::text::escape(status)
                )
                .into());
            }
            Ok(TokioIo::new(stream))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn proxies_come_from_the_environment() {
        let sts: Uri = "https://sts.us-east-1.amazonaws.com/".parse().unwrap();
        let vars = [("HTTPS_PROXY", "http://user:secret@proxy.internal:3128")];
        let proxy = proxy_for(&sts, &env(&vars)).unwrap().unwrap();
        assert_eq!(
            proxy.uri,
            "http://proxy.internal:3128/".parse::<Uri>().unwrap()
        );
        assert_eq!(
            proxy.authorization.as_deref(),
            Some("Basic dXNlcjpzZWNyZXQ=")
        );
        let vars = [("https_proxy", "proxy.internal:3128")];
        assert!(proxy_for(&sts, &env(&vars))
            .unwrap()
            .unwrap()
            .authorization
            .is_none());
        // Excepted, or for the other scheme.
        for no_proxy in [
            "*",
            ".amazonaws.com",
            "amazonaws.com",
            "sts.us-east-1.amazonaws.com",
        ] {
            let vars = [("HTTPS_PROXY", "proxy:3128"), ("NO_PROXY", no_proxy)];
            assert_eq!(proxy_for(&sts, &env(&vars)), Ok(None), "{no_proxy}");
        }
        let vars = [
            ("HTTPS_PROXY", "proxy:3128"),
            ("NO_PROXY", "example.com,zonaws.com"),
        ];
        assert!(proxy_for(&sts, &env(&vars)).unwrap().is_some());
        assert_eq!(
            proxy_for(&sts, &env(&[("HTTP_PROXY", "proxy:3128")])),
            Ok(None)
        );
    }

    #[test]
    fn tls_and_other_proxies_are_refused_without_their_credentials() {
        let sts: Uri = "https://sts.us-east-1.amazonaws.com/".parse().unwrap();
        for setting in [
            "https://user:secret@proxy.internal:3128",
            "HTTPS://proxy.internal:3128",
            "socks5://user:secret@proxy.internal:1080",
        ] {
            let vars = [("HTTPS_PROXY", setting)];
            let refused = proxy_for(&sts, &env(&vars)).unwrap_err();
            assert!(refused.starts_with("HTTPS_PROXY: a `"), "{refused}");
            assert!(refused.contains("is not supported"), "{refused}");
            assert!(!refused.contains("secret"), "{refused}");
        }
    }
}
