//! `kubeplace probe URL…`: GETs each URL and says whether it answered 2xx. The chart's
//! `helm test` runs it in the kubeplace image (distroless: no shell, no curl) against the
//! release's Services: readiness, the webhook over TLS checked against its CA, and the
//! Placement API.

use super::exit::Exit;
use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode, Uri, header};
use http_body_util::Empty;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::serving::certs;

/// Flags of `kubeplace probe`.
#[derive(clap::Args, Debug, Clone)]
pub struct ProbeArgs {
    /// http:// or https:// URLs to GET.
    #[arg(required = true, num_args = 1.., value_parser = parse_url)]
    pub urls: Vec<Uri>,
    /// The CA (PEM) that https:// URLs are checked against (no system roots are built in).
    #[arg(long, value_name = "PATH")]
    pub ca_file: Option<PathBuf>,
    /// Longest each GET may take, connecting included.
    #[arg(long, value_name = "SECONDS", default_value_t = 5)]
    pub timeout_seconds: u64,
}

/// A URL with a scheme of http or https and a host.
fn parse_url(text: &str) -> Result<Uri, String> {
    let expected =
        || format!("{text:?}: expected http://HOST[:PORT]/PATH or https://HOST[:PORT]/PATH");
    let uri: Uri = text.parse().map_err(|_| expected())?;
    match uri.scheme_str() {
        Some("http" | "https") if uri.host().is_some() => Ok(uri),
        _ => Err(expected()),
    }
}

/// Probes every URL; 0 when each answered 2xx, 1 when any did not, 2 on bad input.
pub fn main(args: &ProbeArgs) -> Exit {
    let tls = match &args.ca_file {
        Some(path) => match std::fs::read_to_string(path)
            .map_err(|e| e.to_string())
            .and_then(|pem| certs::client_config(&pem).map_err(|e| e.to_string()))
        {
            Ok(config) => Some(TlsConnector::from(config)),
            Err(e) => {
                eprintln!("kubeplace probe: --ca-file {}: {e}", path.display());
                return Exit::BadInput;
            }
        },
        None => None,
    };
    if tls.is_none()
        && let Some(url) = args.urls.iter().find(|u| u.scheme_str() == Some("https"))
    {
        eprintln!("kubeplace probe: {url}: give --ca-file to check the server's certificate");
        return Exit::BadInput;
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("kubeplace probe: cannot start the runtime: {e}");
            return Exit::Failed;
        }
    };
    let timeout = Duration::from_secs(args.timeout_seconds);
    let mut failed = false;
    for url in &args.urls {
        let result = runtime.block_on(async {
            tokio::time::timeout(timeout, get(url, tls.as_ref()))
                .await
                .unwrap_or_else(|_| Err(format!("no answer within {} s", timeout.as_secs())))
        });
        match result {
            Ok(status) if status.is_success() => println!("{url}: {status}"),
            Ok(status) => {
                failed = true;
                println!("{url}: {status}");
            }
            Err(e) => {
                failed = true;
                println!("{url}: {e}");
            }
        }
    }
    if failed { Exit::Failed } else { Exit::Ok }
}

async fn get(url: &Uri, tls: Option<&TlsConnector>) -> Result<StatusCode, String> {
    let host = url.host().unwrap_or_default();
    let https = url.scheme_str() == Some("https");
    let port = url.port_u16().unwrap_or(if https { 443 } else { 80 });
    // An IPv6 literal comes bracketed in the URL.
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let tcp = TcpStream::connect((bare, port))
        .await
        .map_err(|e| format!("cannot connect: {e}"))?;
    match (https, tls) {
        (true, Some(connector)) => {
            let name = ServerName::try_from(bare.to_string())
                .map_err(|e| format!("{bare:?} is not a server name: {e}"))?;
            let stream = connector
                .connect(name, tcp)
                .await
                .map_err(|e| format!("TLS failed: {e}"))?;
            send(stream, url).await
        }
        _ => send(tcp, url).await,
    }
}

async fn send<IO>(io: IO, url: &Uri) -> Result<StatusCode, String>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| format!("HTTP failed: {e}"))?;
    tokio::spawn(connection);
    let path = url.path_and_query().map_or("/", |p| p.as_str());
    let request = Request::get(path)
        .header(header::HOST, url.authority().map_or("", |a| a.as_str()))
        .body(Empty::<Bytes>::new())
        .map_err(|e| e.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| format!("no answer: {e}"))?;
    Ok(response.status())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_need_a_scheme_and_a_host() {
        assert!(parse_url("http://kubeplace-metrics.ns.svc:8080/readyz").is_ok());
        assert!(parse_url("https://[::1]:8443/healthz").is_ok());
        let e = parse_url("kubeplace-metrics:8080/readyz").unwrap_err();
        assert!(e.contains("expected http://HOST"), "{e}");
        assert!(parse_url("ftp://host/x").is_err());
    }
}
