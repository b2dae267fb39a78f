//! The `/metrics` endpoint (hyper 1 on tokio) and a small scraping client.
//!
//! [`DEFAULT_LISTEN`] (127.0.0.1:9790) is the default of the standalone
//! `asmguard-iolat` only; the daemon serves on its config's `[metrics] listen`
//! (default 127.0.0.1:9465, asmguard-config). A scraper that accepts
//! `application/openmetrics-text` (Prometheus does) gets OpenMetrics; anyone else
//! (curl, `promtool check metrics`) gets the Prometheus text format 0.0.4.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{ACCEPT, CONTENT_TYPE, HOST};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};

use crate::exporter::Metrics;

/// Where the exporter listens unless configured otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9790";

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Serves `/metrics` on `listener` until the task is dropped or accept fails.
pub async fn serve(listener: TcpListener, metrics: Metrics) -> std::io::Result<()> {
    loop {
        let (stream, _) = listener.accept().await?;
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req| handle(req, metrics.clone()));
            // A client that goes away mid-request is not our problem.
            let _ = http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

/// Binds `addr` and serves `/metrics` in a background task. Returns the bound
/// address (useful with port 0).
pub async fn spawn(addr: SocketAddr, metrics: Metrics) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    tokio::spawn(serve(listener, metrics));
    Ok(local)
}

async fn handle(
    req: Request<Incoming>,
    metrics: Metrics,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let reply = |status, ctype: &str, body: String| {
        Response::builder()
            .status(status)
            .header(CONTENT_TYPE, ctype)
            .body(Full::new(Bytes::from(body)))
            .expect("static response parts are valid")
    };
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return Ok(reply(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "GET only\n".into(),
        ));
    }
    match req.uri().path() {
        "/metrics" => {
            let openmetrics = req
                .headers()
                .get_all(ACCEPT)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .any(|v| v.contains("application/openmetrics-text"));
            // Reading the maps is a handful of syscalls: do it off the reactor.
            let body = tokio::task::spawn_blocking(move || {
                if openmetrics {
                    metrics.encode_openmetrics()
                } else {
                    metrics.encode_prometheus_text()
                }
            })
            .await
            .unwrap_or_default();
            let ctype = if openmetrics {
                OPENMETRICS
            } else {
                PROMETHEUS_TEXT
            };
            Ok(reply(StatusCode::OK, ctype, body))
        }
        "/" => Ok(reply(
            StatusCode::OK,
            "text/plain",
            "asmguard exporter: see /metrics\n".into(),
        )),
        _ => Ok(reply(
            StatusCode::NOT_FOUND,
            "text/plain",
            "not found\n".into(),
        )),
    }
}

/// Why a scrape failed.
#[derive(Debug, thiserror::Error)]
pub enum ScrapeError {
    /// The URL is not `http://host:port/path`.
    #[error("bad URL {0}: expected http://HOST:PORT/PATH")]
    Url(String),
    /// Connecting or talking HTTP failed.
    #[error("scraping {url}: {what}")]
    Http {
        /// The URL.
        url: String,
        /// What went wrong.
        what: String,
    },
    /// The endpoint answered with an error status.
    #[error("scraping {url}: HTTP status {status}")]
    Status {
        /// The URL.
        url: String,
        /// The status.
        status: u16,
    },
}

/// GETs `url` (plain http) and returns the body. `openmetrics` asks for the
/// OpenMetrics format instead of Prometheus text 0.0.4.
pub async fn scrape(url: &str, openmetrics: bool) -> Result<String, ScrapeError> {
    let uri: Uri = url.parse().map_err(|_| ScrapeError::Url(url.into()))?;
    if uri.scheme_str() != Some("http") {
        return Err(ScrapeError::Url(url.into()));
    }
    let authority = uri
        .authority()
        .ok_or_else(|| ScrapeError::Url(url.into()))?
        .clone();
    let port = authority.port_u16().unwrap_or(80);
    let http_err = |what: String| ScrapeError::Http {
        url: url.into(),
        what,
    };
    let stream = TcpStream::connect((authority.host(), port))
        .await
        .map_err(|e| http_err(e.to_string()))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| http_err(e.to_string()))?;
    tokio::spawn(conn);
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let accept = if openmetrics {
        "application/openmetrics-text; version=1.0.0"
    } else {
        "text/plain; version=0.0.4"
    };
    let req = Request::get(path)
        .header(HOST, authority.as_str())
        .header(ACCEPT, accept)
        .body(http_body_util::Empty::<Bytes>::new())
        .map_err(|e| http_err(e.to_string()))?;
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| http_err(e.to_string()))?;
    if !resp.status().is_success() {
        return Err(ScrapeError::Status {
            url: url.into(),
            status: resp.status().as_u16(),
        });
    }
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| http_err(e.to_string()))?
        .to_bytes();
    String::from_utf8(body.to_vec()).map_err(|_| http_err("body is not UTF-8".into()))
}

/// [`scrape`] for callers without a tokio runtime (asmguardctl).
pub fn scrape_blocking(url: &str, openmetrics: bool) -> Result<String, ScrapeError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| ScrapeError::Http {
            url: url.into(),
            what: e.to_string(),
        })?;
    rt.block_on(scrape(url, openmetrics))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn serves_both_formats_and_404() {
        let m = Metrics::new();
        m.set_counter_source(std::sync::Arc::new(
            crate::exporter::Counters::default().with_denied("DATA1", "file_open", 1),
        ));
        let addr = spawn("127.0.0.1:0".parse().unwrap(), m).await.unwrap();
        let url = format!("http://{addr}/metrics");
        let text = scrape(&url, false).await.unwrap();
        assert!(text.contains("# TYPE asmguard_writes_denied_total counter"));
        assert!(!text.contains("# EOF"));
        let om = scrape(&url, true).await.unwrap();
        assert!(om.ends_with("# EOF\n"));
        assert!(om.contains("# TYPE asmguard_writes_denied counter"));
        let missing = scrape(&format!("http://{addr}/nope"), false).await;
        assert!(matches!(
            missing,
            Err(ScrapeError::Status { status: 404, .. })
        ));
        assert!(matches!(
            scrape("ftp://x/metrics", false).await,
            Err(ScrapeError::Url(_))
        ));
    }
}
