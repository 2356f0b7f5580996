//! The HTTPS client of an [`super::Endpoint`]: HTTP/1.1 over rustls on hyper's connection API,
//! one request at a time on a connection, and the connection kept for the next call.
//!
//! A webhook call is in the path of every write it admits or converts, so the client does no
//! more per call than the call needs: the URL is read once, when the endpoint is made; a call
//! takes a kept connection, sends the request already framed, reads the answer and hands the
//! connection back. A connection that failed or was closed is not kept. A request that a kept
//! connection dropped before sending it (the webhook closed it while it was idle) is sent once
//! more on a new connection, as Go's transport does.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use rustls::pki_types::ServerName;

/// Where an endpoint connects, and the name its certificate must hold.
pub(super) struct Client {
    tls: tokio_rustls::TlsConnector,
    server_name: ServerName<'static>,
    /// The `Host` header: the URL's authority.
    authority: String,
    target: Target,
    /// Connections kept between calls, each ready for a request.
    idle: Mutex<Vec<SendRequest<Full<Bytes>>>>,
}

/// What a connection dials.
pub(super) enum Target {
    /// The URL's host (looked up on each new connection) and port.
    Host(String, u16),
    /// An address found for a Service.
    Address(SocketAddr),
}

/// An answer: its status and body, or `None` for a body past `limit`.
pub(super) type Answer = (u16, Option<Vec<u8>>);

/// Why a call failed: the innermost cause, in its own words.
pub(super) type Failure = Box<dyn std::error::Error + Send + Sync>;

/// At most this many idle connections are kept per endpoint.
const IDLE: usize = 16;

impl Client {
    /// A client for `authority` (`host[:port]` as the URL writes it) at `target`, verifying the
    /// certificate against `tls`.
    pub(super) fn new(tls: rustls::ClientConfig, authority: &str, target: Target) -> Result<Client, String> {
        let host =
            authority.rsplit_once(':').filter(|(_, port)| port.parse::<u16>().is_ok()).map_or(authority, |a| a.0);
        let name = host.trim_start_matches('[').trim_end_matches(']');
        let server_name =
            ServerName::try_from(name.to_string()).map_err(|err| format!("invalid webhook host {name:?}: {err}"))?;
        Ok(Client {
            tls: tokio_rustls::TlsConnector::from(Arc::new(tls)),
            server_name,
            authority: authority.to_string(),
            target,
            idle: Mutex::new(Vec::new()),
        })
    }

    /// POSTs `body` to `path` (with its query) with `headers`, and reads the answer's body up
    /// to `limit` bytes.
    pub(super) async fn post(
        &self,
        path: &http::Uri,
        headers: &[(http::HeaderName, http::HeaderValue)],
        body: Bytes,
        limit: usize,
    ) -> Result<Answer, Failure> {
        let request = || {
            let mut request = http::Request::post(path.clone()).header(http::header::HOST, self.authority.as_str());
            for (name, value) in headers {
                request = request.header(name, value);
            }
            request.body(Full::new(body.clone()))
        };
        let (mut sender, reused) = match self.take_idle().await {
            Some(sender) => (sender, true),
            None => (self.connect().await?, false),
        };
        let answer = match sender.send_request(request()?).await {
            Err(err) if reused && err.is_canceled() => {
                sender = self.connect().await?;
                sender.send_request(request()?).await?
            }
            answer => answer?,
        };
        let status = answer.status().as_u16();
        let mut body = answer.into_body();
        let mut read = Vec::new();
        while let Some(frame) = body.frame().await {
            if let Ok(data) = frame?.into_data() {
                read.extend_from_slice(&data);
                if read.len() > limit {
                    return Ok((status, None));
                }
            }
        }
        self.keep(sender);
        Ok((status, Some(read)))
    }

    /// A kept connection that is still open, once it is ready for a request.
    async fn take_idle(&self) -> Option<SendRequest<Full<Bytes>>> {
        loop {
            let mut sender = self.idle.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop()?;
            if !sender.is_closed() && sender.ready().await.is_ok() {
                return Some(sender);
            }
        }
    }

    fn keep(&self, sender: SendRequest<Full<Bytes>>) {
        let mut idle = self.idle.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !sender.is_closed() && idle.len() < IDLE {
            idle.push(sender);
        }
    }

    /// A new connection, its TLS verified, driven by a task of its own.
    async fn connect(&self) -> Result<SendRequest<Full<Bytes>>, Failure> {
        let tcp = match &self.target {
            Target::Address(address) => tokio::net::TcpStream::connect(address).await?,
            Target::Host(host, port) => tokio::net::TcpStream::connect((host.as_str(), *port)).await?,
        };
        tcp.set_nodelay(true)?;
        let tls = self.tls.connect(self.server_name.clone(), tcp).await?;
        let (sender, connection) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls)).await?;
        tokio::spawn(async move {
            if let Err(err) = connection.await {
                tracing::debug!(error = %err, "webhook connection ended");
            }
        });
        Ok(sender)
    }
}
