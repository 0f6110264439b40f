//! The first wait of every connection: nothing is set up for it until the client has sent
//! something.
//!
//! actix-http gives each connection its dispatcher with an 8 KiB read and an 8 KiB write buffer
//! the moment it is accepted, and rustls its session state; a client that connects and sends
//! nothing held them until its request timeout (`make chaos`'s hostile clients: 10,000 idle
//! connections on one port took the agent from 15 to 127 MiB RSS, 11.8 KiB each; 1.7 KiB with
//! this gate, the rest of the connection's future boxed behind it). Until a connection is
//! readable it costs the socket and this small future; it is closed, unanswered, when nothing
//! comes within the port's time for a request head (Go's `http.Server`, which kubelet's servers
//! are, also reads nothing and answers nothing to a client that sends nothing).

use std::time::Duration;

use actix_web::rt::net::TcpStream;

/// A connection that sent nothing in its time.
#[derive(Debug, thiserror::Error)]
#[error("the client sent nothing within {0:?}")]
pub struct Silent(pub Duration);

/// Waits until `io` has bytes to read (or the client closed it: the dispatcher sees the end at
/// once), at most `within`. The bytes stay in the socket for the dispatcher. A peek, not
/// `readable()`: tokio's readiness may say readable before anything came (its documented false
/// positive; a new connection was passed on at once).
pub async fn readable(io: TcpStream, within: Duration) -> Result<TcpStream, Silent> {
    let mut first = [0u8; 1];
    match tokio::time::timeout(within, io.peek(&mut first)).await {
        Ok(Ok(_)) => Ok(io),
        // An error on the socket: the next read reports it, to whoever reads.
        Ok(Err(_)) => Ok(io),
        Err(_) => Err(Silent(within)),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::AsyncWriteExt;

    use super::readable;

    async fn pair() -> (tokio::net::TcpStream, actix_web::rt::net::TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        (client, server)
    }

    #[tokio::test]
    async fn a_client_that_sends_nothing_is_let_go_after_its_time() {
        let (_client, server) = pair().await;
        let err = readable(server, Duration::from_millis(300)).await.unwrap_err();
        assert_eq!(err.to_string(), "the client sent nothing within 300ms");
    }

    #[tokio::test]
    async fn a_client_that_writes_is_passed_on_with_its_bytes_unread() {
        let (mut client, server) = pair().await;
        client.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
        let server = readable(server, Duration::from_secs(5)).await.unwrap();
        let mut buf = [0u8; 64];
        let n = server.try_read(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"GET / HTTP/1.1\r\n");
    }

    #[tokio::test]
    async fn a_client_that_closes_is_passed_on_so_the_end_is_read() {
        let (client, server) = pair().await;
        drop(client);
        let server = readable(server, Duration::from_secs(5)).await.unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(server.try_read(&mut buf).unwrap(), 0);
    }
}
