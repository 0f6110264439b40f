//! The fixture's listener: actix-web streams the connection to a handler only for WebSocket
//! upgrades, so SPDY/3.1 upgrades (`kubectl exec`, `attach`, `port-forward` over SPDY) would
//! lose their bytes. This front accepts every connection (terminating TLS when serving it),
//! reads the first request head, hands a non-WebSocket upgrade to
//! [`super::proxy::raw_upgrade`], and splices everything else to actix-web on an internal
//! plain-HTTP port — telling it, by the internal connection's source port, whether a verified
//! client certificate came.

use super::http::Shared;
use super::ClientCertificate;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Largest request head read before giving up on sniffing (actix-web's own limit applies
/// after the splice).
const HEAD_LIMIT: usize = 64 * 1024;

/// Internal connections (by their source address) whose client sent a certificate the CA
/// signed, with the identity it stands for.
pub type Verified = Arc<Mutex<HashMap<SocketAddr, ClientCertificate>>>;

/// Accepts until the runtime ends.
pub async fn accept_loop(
    listener: tokio::net::TcpListener,
    internal: SocketAddr,
    shared: Arc<Shared>,
    tls: Option<Arc<rustls::ServerConfig>>,
    verified: Verified,
) {
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        let (shared, acceptor, verified) = (shared.clone(), acceptor.clone(), verified.clone());
        actix_web::rt::spawn(async move {
            match acceptor {
                Some(acceptor) => {
                    let Ok(tls) = acceptor.accept(tcp).await else { return };
                    let certificate = tls
                        .get_ref()
                        .1
                        .peer_certificates()
                        .and_then(|chain| chain.first())
                        .map(|der| ClientCertificate(super::authn::certificate_user(der)));
                    connection(tls, internal, shared, certificate, verified).await;
                }
                None => connection(tcp, internal, shared, None, verified).await,
            }
        });
    }
}

async fn connection<S>(
    mut client: S,
    internal: SocketAddr,
    shared: Arc<Shared>,
    certificate: Option<ClientCertificate>,
    verified: Verified,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut read = Vec::new();
    {
        let mut buf = [0u8; 4096];
        loop {
            let mut headers = [httparse::EMPTY_HEADER; 128];
            let mut req = httparse::Request::new(&mut headers);
            match req.parse(&read) {
                Ok(httparse::Status::Complete(len)) => {
                    let head = super::proxy::RawHead {
                        method: req.method.unwrap_or_default().to_string(),
                        target: req.path.unwrap_or_default().to_string(),
                        headers: req
                            .headers
                            .iter()
                            .map(|h| (h.name.to_string(), h.value.to_vec()))
                            .collect(),
                    };
                    if head.is_non_websocket_upgrade() {
                        let rest = read[len..].to_vec();
                        return super::proxy::raw_upgrade(shared, head, rest, client, certificate).await;
                    }
                    break;
                }
                Ok(httparse::Status::Partial) if read.len() < HEAD_LIMIT => {}
                // Not HTTP/1 we understand: actix-web answers it.
                _ => break,
            }
            match client.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => read.extend_from_slice(&buf[..n]),
            }
        }
    }
    let Ok(socket) = tokio::net::TcpSocket::new_v4() else {
        return;
    };
    if socket.bind(SocketAddr::from(([127, 0, 0, 1], 0))).is_err() {
        return;
    }
    let Ok(local) = socket.local_addr() else { return };
    if let Some(certificate) = certificate {
        verified
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(local, certificate);
    }
    let Ok(mut upstream) = socket.connect(internal).await else {
        verified.lock().unwrap_or_else(|e| e.into_inner()).remove(&local);
        return;
    };
    if upstream.write_all(&read).await.is_ok() {
        let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
    }
    verified.lock().unwrap_or_else(|e| e.into_inner()).remove(&local);
}
