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

/// How much of the host one scraper may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections served at once; more wait in the listen backlog (in the
    /// kernel, costing the process no file descriptor) until one ends.
    pub max_connections: usize,
    /// The longest one connection may last, idle or not.
    pub connection_time: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 32,
            connection_time: Duration::from_secs(30),
        }
    }
}

/// The endpoint's state as it is, for `status`: `None` while it serves,
/// the last accept error while accepting fails (it keeps retrying).
#[derive(Debug, Clone, Default)]
pub struct Health(std::sync::Arc<std::sync::Mutex<Option<String>>>);

impl Health {
    /// `None` while serving, or why accepting connections fails now.
    pub fn failing(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
    fn set(&self, v: Option<String>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = v;
    }
}

/// Serves `/metrics` on `listener` until the task is dropped, with the default
/// [`Limits`].
pub async fn serve(listener: TcpListener, metrics: Metrics) -> std::io::Result<()> {
    serve_limited(listener, metrics, Limits::default(), Health::default()).await;
    Ok(())
}

/// Serves `/metrics` on `listener` until the task is dropped. An accept error
/// (EMFILE, ENFILE, ENOBUFS...) is logged, recorded in `health` and retried after
/// a pause that grows to 1 s: the endpoint never stops for good. At most
/// `limits.max_connections` connections are open at once, each for at most
/// `limits.connection_time`.
pub async fn serve_limited(
    listener: TcpListener,
    metrics: Metrics,
    limits: Limits,
    health: Health,
) {
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(limits.max_connections.max(1)));
    let mut pause = Duration::from_millis(50);
    loop {
        // Take a slot before accepting: past the cap, connections wait in the
        // kernel's backlog and hold none of our descriptors.
        let Ok(permit) = slots.clone().acquire_owned().await else {
            return;
        };
        let stream = match listener.accept().await {
            Ok((stream, _)) => {
                if health.failing().is_some() {
                    tracing::info!("metrics endpoint: accepting connections again");
                    health.set(None);
                }
                pause = Duration::from_millis(50);
                stream
            }
            Err(e) => {
                let was = health.failing();
                let now = format!("accepting connections: {e}");
                if was.as_deref() != Some(now.as_str()) {
                    tracing::error!("metrics endpoint: {now}; retrying");
                }
                health.set(Some(now));
                drop(permit);
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
                continue;
            }
        };
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req| handle(req, metrics.clone()));
            // A client that goes away mid-request is not our problem; one that
            // stays too long is closed.
            let conn = http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .serve_connection(TokioIo::new(stream), svc);
            let _ = tokio::time::timeout(limits.connection_time, conn).await;
            drop(permit);
        });
    }
}

/// Binds `addr` and serves `/metrics` in a background task. Returns the bound
/// address (useful with port 0).
pub async fn spawn(addr: SocketAddr, metrics: Metrics) -> std::io::Result<SocketAddr> {
    let (local, _) = spawn_limited(addr, metrics, Limits::default()).await?;
    Ok(local)
}

/// [`spawn`] with `limits`; also returns the endpoint's [`Health`].
pub async fn spawn_limited(
    addr: SocketAddr,
    metrics: Metrics,
    limits: Limits,
) -> std::io::Result<(SocketAddr, Health)> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let health = Health::default();
    tokio::spawn(serve_limited(listener, metrics, limits, health.clone()));
    Ok((local, health))
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
        let m = Metrics::new(&asmguard_paths::Paths::default().sys);
        m.set_counter_source(std::sync::Arc::new(
            crate::exporter::Counters::default().with_denied(
                "DATA1",
                asmguard_filter_types::Hook::FileOpen,
                1,
            ),
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

    /// Idle connections beyond the cap wait in the backlog; each held one is
    /// closed after the time limit, and a scrape gets through after that.
    #[tokio::test]
    async fn connections_are_capped_and_time_limited() {
        let limits = Limits {
            max_connections: 2,
            connection_time: Duration::from_millis(300),
        };
        let (addr, health) = spawn_limited(
            "127.0.0.1:0".parse().unwrap(),
            Metrics::new(&asmguard_paths::Paths::default().sys),
            limits,
        )
        .await
        .unwrap();
        let idle: Vec<_> = futures_idle(addr, 2).await;
        let url = format!("http://{addr}/metrics");
        // Both slots are held: a scrape waits (no answer within 100 ms)...
        assert!(
            tokio::time::timeout(Duration::from_millis(100), scrape(&url, false))
                .await
                .is_err()
        );
        // ...and is served once the idle ones have been closed.
        let t = tokio::time::timeout(Duration::from_secs(5), scrape(&url, false))
            .await
            .expect("served after the time limit")
            .unwrap();
        assert!(t.contains("asmguard"), "{t}");
        assert!(health.failing().is_none());
        drop(idle);
    }

    async fn futures_idle(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
        let mut v = Vec::new();
        for _ in 0..n {
            v.push(TcpStream::connect(addr).await.unwrap());
        }
        // Let the server accept them.
        tokio::time::sleep(Duration::from_millis(50)).await;
        v
    }
}
