//! TCP connections inside a pod's network namespace, for port-forward: a short-lived thread
//! enters the namespace of the pod's sandbox process (`/proc/<pid>/ns/net`, `setns`), connects
//! to `localhost:<port>` (IPv4, then IPv6, as containerd's port-forward does), and ends; the
//! socket keeps its namespace and is used from anywhere. The thread is never reused, so no
//! other work runs in the pod's namespace.

use std::fs::File;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::time::Duration;

use rustix::thread::{move_into_link_name_space, LinkNameSpaceType};

/// How long a connect inside the namespace may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why no connection was made.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    /// The process's namespace file cannot be opened (the sandbox is gone). Final.
    #[error("cannot open network namespace {path}: {source}")]
    Open {
        /// `/proc/<pid>/ns/net`.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// `setns` refused (the agent lacks CAP_SYS_ADMIN). Final.
    #[error("cannot enter network namespace {path}: {source}")]
    Enter {
        /// `/proc/<pid>/ns/net`.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// Nothing accepted on `localhost:<port>` in either family; worded as containerd words it.
    #[error(
        "failed to connect to localhost:{port} inside namespace {namespace:?}, IPv4: {} IPv6 {} ",
        dial_error("tcp4", &SocketAddr::from((Ipv4Addr::LOCALHOST, *port)), v4),
        dial_error("tcp6", &SocketAddr::from((Ipv6Addr::LOCALHOST, *port)), v6)
    )]
    Connect {
        /// The port.
        port: u16,
        /// The namespace's name in messages (the sandbox's ID).
        namespace: String,
        /// The IPv4 attempt's error.
        v4: io::Error,
        /// The IPv6 attempt's error.
        v6: io::Error,
    },
    /// The connecting thread could not be started or panicked. Final.
    #[error("port-forward connect thread failed: {0}")]
    Thread(String),
}

/// Connect to `localhost:port` in the network namespace of process `pid`; `namespace` names it
/// in errors. Blocks up to twice [`CONNECT_TIMEOUT`]: call it on the blocking pool.
pub fn connect_localhost(pid: u32, port: u16, namespace: &str) -> Result<TcpStream, NetnsError> {
    let path = PathBuf::from(format!("/proc/{pid}/ns/net"));
    let ns = File::open(&path).map_err(|source| NetnsError::Open {
        path: path.clone(),
        source,
    })?;
    let namespace = namespace.to_string();
    let worker = std::thread::Builder::new()
        .name("netns-connect".into())
        .spawn(move || {
            move_into_link_name_space(ns.as_fd(), Some(LinkNameSpaceType::Network))
                .map_err(|e| NetnsError::Enter { path, source: e.into() })?;
            connect_either(port, namespace)
        })
        .map_err(|e| NetnsError::Thread(e.to_string()))?;
    worker
        .join()
        .map_err(|_| NetnsError::Thread("the thread panicked".to_string()))?
}

/// `localhost:port` over IPv4, else IPv6, in the calling thread's namespace.
fn connect_either(port: u16, namespace: String) -> Result<TcpStream, NetnsError> {
    let v4 = match TcpStream::connect_timeout(&SocketAddr::from((Ipv4Addr::LOCALHOST, port)), CONNECT_TIMEOUT) {
        Ok(stream) => return Ok(stream),
        Err(e) => e,
    };
    match TcpStream::connect_timeout(&SocketAddr::from((Ipv6Addr::LOCALHOST, port)), CONNECT_TIMEOUT) {
        Ok(stream) => Ok(stream),
        Err(v6) => Err(NetnsError::Connect {
            port,
            namespace,
            v4,
            v6,
        }),
    }
}

/// A failed dial as Go prints it (`dial tcp4 127.0.0.1:80: connect: connection refused`), the
/// wording kubectl users know from kubelet and containerd.
fn dial_error(network: &str, addr: &SocketAddr, error: &io::Error) -> String {
    let text = error.to_string();
    let text = text.split(" (os error").next().unwrap_or(&text);
    let mut chars = text.chars();
    let lowered = match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    };
    let op = if error.kind() == io::ErrorKind::TimedOut {
        "i/o timeout".to_string()
    } else {
        format!("connect: {lowered}")
    };
    format!("dial {network} {addr}: {op}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// A refused connection is worded as containerd words it, Go's dial errors included.
    #[test]
    fn refused_connections_are_worded_as_upstream() {
        let err = NetnsError::Connect {
            port: 9999,
            namespace: "abc".into(),
            v4: io::Error::from_raw_os_error(111),
            v6: io::Error::from_raw_os_error(99),
        };
        assert_eq!(
            err.to_string(),
            "failed to connect to localhost:9999 inside namespace \"abc\", IPv4: dial tcp4 127.0.0.1:9999: \
             connect: connection refused IPv6 dial tcp6 [::1]:9999: connect: cannot assign requested address "
        );
    }

    /// In the agent's own namespace (its own PID), the connection reaches a local listener,
    /// and a closed port is refused with the upstream wording.
    #[test]
    fn connects_inside_the_namespace_of_a_process() {
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let pid = std::process::id();
        match connect_localhost(pid, port, "self") {
            // Entering even one's own namespace needs CAP_SYS_ADMIN; without it there is
            // nothing more to check here (the integration tests run as root).
            Err(NetnsError::Enter { .. }) => return,
            Err(e) => panic!("{e}"),
            Ok(mut client) => {
                let (mut server, _) = listener.accept().unwrap();
                client.write_all(b"ping").unwrap();
                let mut buf = [0; 4];
                server.read_exact(&mut buf).unwrap();
                assert_eq!(&buf, b"ping");
            }
        }
        drop(listener);
        let err = connect_localhost(pid, port, "self").unwrap_err();
        assert!(
            err.to_string().contains("IPv4: dial tcp4 127.0.0.1:") && err.to_string().contains("connection refused"),
            "{err}"
        );
        let err = connect_localhost(u32::MAX, port, "gone").unwrap_err();
        assert!(matches!(err, NetnsError::Open { .. }), "{err}");
    }
}
