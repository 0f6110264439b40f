//! The kubelet API on `--address:--port` (10250): HTTPS (rustls), kubelet's authentication and
//! authorization in front of every route, then `/healthz` (and `/healthz/ping`, `/log`,
//! `/syncloop`), `/pods`, `/runningpods/`, `/configz`,
//! `/containerLogs/{namespace}/{pod}/{container}`, `/exec`, `/attach` (SPDY/3.1 or WebSocket)
//! and `/run` `/{namespace}/{pod}[/{uid}]/{container}`, and `/portForward/{namespace}/{pod}[/{uid}]`.
//!
//! # Layout
//! - [`tls`]: the serving certificate (given, or self-signed under `--cert-dir`), TLS versions,
//!   cipher suites, client certificates against `--client-ca-file`.
//! - [`auth`]: who asks (certificate CN/O, bearer token, anonymous) and whether they may
//!   (kubelet's request attributes; `AlwaysAllow`, `Webhook`, or every request forbidden).
//! - [`webhook`]: TokenReview and SubjectAccessReview through a [`webhook::Reviewer`] the
//!   agent gives, with kubelet's caches.
//! - [`logs`]: `PodLogOptions` from the query and the log streamed from the runtime.
//! - [`streams`]: the transports: the SPDY/3.1 upgrade and connection driver, WebSocket channels,
//!   SPDY tunnelled in WebSocket.
//! - [`exec`]: `/exec`, `/attach` and `/run` on them, through the runtime's
//!   [`InteractiveExec`] and [`Attach`].
//! - [`port_forward`]: `/portForward/{namespace}/{pod}[/{uid}]` over SPDY, WebSocket and SPDY
//!   tunnelled in WebSocket, into the pod's network namespace.

pub mod auth;
pub mod exec;
pub mod identity;
pub mod logs;
pub mod port_forward;
pub mod streams;
pub mod tls;
pub mod webhook;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use actix_web::dev::Server;
use actix_web::{middleware, web, App, HttpResponse};
use dockerlet_runtime::{Attach, ContainerLogs, InteractiveExec, PortForward};

use dockerlet_messages::status::GetRunningPods;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use k8s_openapi::List;

pub use crate::debug_routes::DebugRoutes;

use crate::error::ApiError;
use crate::Handles;

/// The pod `namespace/name` among the node's pods (`GetPods`), if it runs here: the lookup
/// behind logs, exec, attach, run and port-forward.
async fn find_pod(
    api: &KubeletApi,
    namespace: &str,
    name: &str,
) -> Result<Option<k8s_openapi::api::core::v1::Pod>, ApiError> {
    let pods = api
        .handles
        .pods
        .send(dockerlet_messages::status::GetPods)
        .await
        .map_err(|e| ApiError::ActorUnavailable {
            actor: "status",
            reason: e.to_string(),
        })?;
    Ok(pods.into_iter().find(|p| {
        p.metadata.namespace.as_deref().unwrap_or("default") == namespace && p.metadata.name.as_deref() == Some(name)
    }))
}

/// How long a client may take to send its request head.
pub const READ_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a client may take for its TLS handshake (actix-tls' default, set explicitly so the
/// log of a timed-out handshake names it).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(3);

/// TLS handshakes under way at once (per worker; actix-tls' default is 256). A connection that
/// sends no ClientHello holds its place for [`HANDSHAKE_TIMEOUT`], so with the default 256 idle
/// connections kept every new client waiting (`make chaos`'s hostile clients found it); waiting
/// handshakes cost memory, not CPU, so the limit is as high as the connections a node expects.
const MAX_TLS_HANDSHAKES: usize = 16_384;

/// How long an idle keep-alive connection is kept.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(120);

/// What the kubelet API's handlers reach.
#[derive(Clone)]
pub struct KubeletApi {
    /// The actors.
    pub handles: Handles,
    /// Containers' logs.
    pub logs: Arc<dyn ContainerLogs>,
    /// Commands run with the client's stdio (`/exec`, `/run`).
    pub exec: Arc<dyn InteractiveExec>,
    /// Containers' stdio (`/attach`).
    pub attach: Arc<dyn Attach>,
    /// Connections into pods' network namespaces (`/portForward`).
    pub port_forward: Arc<dyn PortForward>,
    /// The `/configz` document (`{"kubeletconfig": {...}}`), made by the agent from its
    /// effective configuration.
    pub configz: Arc<serde_json::Value>,
    /// `--streaming-connection-idle-timeout`: exec, attach and port-forward connections idle
    /// this long are closed; none for no limit.
    pub stream_idle_timeout: Option<Duration>,
    /// Which debugging routes are served (`enableDebuggingHandlers` and its kin).
    pub debug_routes: DebugRoutes,
}

/// The routes, behind [`auth::filter`]: the ones kubelet always serves, then the debugging
/// ones when `routes` has them on, or their 405 answers ([`crate::debug_routes`]).
pub fn configure(cfg: &mut web::ServiceConfig, routes: DebugRoutes) {
    let mut scope = web::scope("")
        .wrap(middleware::from_fn(auth::filter))
        .route("/healthz", web::get().to(crate::healthz::healthz))
        .route("/healthz/syncloop", web::get().to(crate::healthz::healthz))
        .route("/healthz/ping", web::get().to(ok))
        .route("/healthz/log", web::get().to(ok))
        .route("/pods", web::get().to(crate::read_only::pods))
        .route("/pods/", web::get().to(crate::read_only::pods))
        .route("/metrics", web::get().to(crate::metrics::metrics))
        .route("/metrics/probes", web::get().to(crate::metrics::probes))
        .route("/stats/summary", web::get().to(crate::stats::summary))
        .route("/stats/summary", web::post().to(crate::stats::summary))
        .route("/metrics/resource", web::get().to(crate::stats::resource_metrics))
        .route("/metrics/cadvisor", web::get().to(crate::stats::cadvisor_metrics));
    let served = if routes.debugging {
        debugging_routes()
    } else {
        Vec::new()
    };
    for resource in crate::debug_routes::disabled_routes(routes).into_iter().chain(served) {
        scope = scope.service(resource);
    }
    cfg.service(scope);
}

/// kubelet's debugging handlers: `/configz`, `/runningpods/`, `/containerLogs`, `/exec`,
/// `/attach`, `/run`, `/portForward`.
fn debugging_routes() -> Vec<actix_web::Resource> {
    let get_and_post =
        |path: &str, get: actix_web::Route, post: actix_web::Route| web::resource(path).route(get).route(post);
    vec![
        web::resource("/configz").route(web::get().to(configz)),
        web::resource("/runningpods/").route(web::get().to(running_pods)),
        web::resource("/runningpods").route(web::get().to(running_pods)),
        web::resource("/containerLogs/{namespace}/{pod}/{container}").route(web::get().to(logs::container_logs)),
        get_and_post(
            "/exec/{namespace}/{pod}/{container}",
            web::get().to(exec::exec),
            web::post().to(exec::exec),
        ),
        get_and_post(
            "/exec/{namespace}/{pod}/{uid}/{container}",
            web::get().to(exec::exec),
            web::post().to(exec::exec),
        ),
        get_and_post(
            "/attach/{namespace}/{pod}/{container}",
            web::get().to(exec::attach),
            web::post().to(exec::attach),
        ),
        get_and_post(
            "/attach/{namespace}/{pod}/{uid}/{container}",
            web::get().to(exec::attach),
            web::post().to(exec::attach),
        ),
        web::resource("/run/{namespace}/{pod}/{container}").route(web::post().to(exec::run)),
        web::resource("/run/{namespace}/{pod}/{uid}/{container}").route(web::post().to(exec::run)),
        get_and_post(
            "/portForward/{namespace}/{pod}",
            web::get().to(port_forward::port_forward),
            web::post().to(port_forward::port_forward),
        ),
        get_and_post(
            "/portForward/{namespace}/{pod}/{uid}",
            web::get().to(port_forward::port_forward),
            web::post().to(port_forward::port_forward),
        ),
    ]
}

async fn configz(api: web::Data<KubeletApi>) -> HttpResponse {
    HttpResponse::Ok().json(api.configz.as_ref())
}

/// `GET /runningpods/`: a v1 PodList of the pods with running containers according to the
/// runtime (kubelet's getRunningPods: name, namespace, UID; each running container's name and
/// image), from the pod cache. 500 until the first relist, as kubelet answers a runtime error.
async fn running_pods(handles: web::Data<Handles>) -> Result<HttpResponse, ApiError> {
    let items = handles
        .running
        .send(GetRunningPods)
        .await
        .map_err(|e| ApiError::ActorUnavailable {
            actor: "supervisor",
            reason: e.to_string(),
        })?
        .ok_or_else(|| ApiError::Internal {
            reason: "the container runtime has not been listed yet".to_string(),
        })?;
    Ok(HttpResponse::Ok().json(List {
        items,
        metadata: ListMeta::default(),
    }))
}

async fn ok() -> HttpResponse {
    HttpResponse::Ok().content_type("text/plain; charset=utf-8").body("ok")
}

/// Bind and start the kubelet API over TLS; returns the bound address. The request head is
/// limited by actix-http (larger heads are answered 431), the head must arrive within
/// [`READ_TIMEOUT`] and idle connections close after [`IDLE_TIMEOUT`].
///
/// Assembled from actix's parts as `HttpServer` does (rustls acceptor, ALPN `h2`/`http/1.1`,
/// `HttpService`), with [`streams::shim::UpgradeShim`] between TLS and HTTP so that SPDY
/// upgrades reach their handlers with the connection as payload. Failed handshakes are logged
/// with the client's address and the reason, rate-limited ([`tls::HandshakeLog`]).
pub fn serve(
    addr: SocketAddr,
    api: KubeletApi,
    auth: auth::AuthConfig,
    tls: rustls::ServerConfig,
) -> std::io::Result<(Server, SocketAddr)> {
    use actix_http::{HttpService, Protocol};
    use actix_service::{apply_fn_factory, fn_service, Service as _};
    use actix_service::{map_config, ServiceFactoryExt as _};
    use actix_tls::accept::rustls_0_23::{Acceptor, AcceptorService, TlsStream};
    use actix_tls::accept::TlsError;
    use actix_web::dev::AppConfig;
    use actix_web::rt::net::TcpStream;

    let handles = web::Data::new(api.handles.clone());
    let debug_routes = api.debug_routes;
    let refusals = Arc::new(tls::HandshakeLog::default());
    let api = web::Data::new(api);
    let auth = web::Data::new(Arc::new(auth));
    let mut tls = tls;
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let listener = crate::listen(addr)
        .map_err(|e| std::io::Error::new(e.kind(), format!("kubelet API server: cannot bind {addr}: {e}")))?;
    let bound = listener.local_addr().unwrap_or(addr);
    actix_tls::accept::max_concurrent_tls_connect(MAX_TLS_HANDSHAKES);
    let server = actix_server::Server::build()
        .workers(1)
        .disable_signals()
        .listen("kubelet-api", listener, move || {
            let app = App::new()
                .app_data(handles.clone())
                .app_data(api.clone())
                .app_data(auth.clone())
                .configure(move |cfg| configure(cfg, debug_routes));
            let http = HttpService::build()
                .client_request_timeout(READ_TIMEOUT)
                .keep_alive(IDLE_TIMEOUT)
                .on_connect_ext(|io: &streams::shim::UpgradeShim<TlsStream<TcpStream>>, ext| {
                    // The verified client certificate (rustls checked it against --client-ca-file).
                    let (_, session) = io.get_ref().get_ref();
                    if let Some(user) = session
                        .peer_certificates()
                        .and_then(|c| c.first())
                        .and_then(tls::user_of)
                    {
                        ext.insert(user);
                    }
                })
                .finish(map_config(app, |_| AppConfig::default()))
                .map_err(TlsError::Service);
            let silent = refusals.clone();
            let refusals = refusals.clone();
            let mut acceptor = Acceptor::new(tls.clone());
            acceptor.set_handshake_timeout(HANDSHAKE_TIMEOUT);
            // No TLS session until the client has sent something (its ClientHello): crate::gate.
            let gate = fn_service(move |io: TcpStream| {
                let silent = silent.clone();
                async move {
                    let peer = io.peer_addr().ok();
                    crate::gate::readable(io, HANDSHAKE_TIMEOUT).await.map_err(|e| {
                        if let Some(peer) = peer {
                            silent.refused(peer, &tls::Refusal::timed_out(HANDSHAKE_TIMEOUT), &e);
                        }
                        TlsError::Timeout
                    })
                }
            });
            let handshake = apply_fn_factory::<Acceptor, Acceptor, _, _, TcpStream, TcpStream, _, _>(
                acceptor,
                move |io: TcpStream, acceptor: &AcceptorService| {
                    // The address is read before the handshake: a failed one leaves no stream.
                    let peer = io.peer_addr().ok();
                    let handshake = acceptor.call(io);
                    let refusals = refusals.clone();
                    async move {
                        let result = handshake.await;
                        if let (Err(e), Some(peer)) = (&result, peer) {
                            match e {
                                TlsError::Tls(e) => refusals.refused(peer, &tls::refusal(e), e),
                                TlsError::Timeout => {
                                    refusals.refused(peer, &tls::Refusal::timed_out(HANDSHAKE_TIMEOUT), &"timeout")
                                }
                                TlsError::Service(never) => match *never {},
                            }
                        }
                        result
                    }
                },
            )
            .map_init_err(|_| unreachable!("the TLS acceptor does not fail to start"))
            .map_err(TlsError::into_service_error);
            let session = handshake
                .and_then(|io: TlsStream<TcpStream>| async move {
                    let h2 = io.get_ref().1.alpn_protocol() == Some(b"h2".as_slice());
                    let peer = io.get_ref().0.peer_addr().ok();
                    let protocol = if h2 { Protocol::Http2 } else { Protocol::Http1 };
                    Ok((streams::shim::UpgradeShim::new(io, !h2), protocol, peer))
                })
                .and_then(http);
            // Boxed: a connection waiting at the gate holds a pointer to what follows, not the
            // handshake's and the dispatcher's state.
            gate.and_then(actix_service::boxed::factory(session))
        })?
        .run();
    tracing::info!(server = "kubelet-api", address = %bound, "listening");
    Ok((server, bound))
}

#[cfg(test)]
mod tests {
    use super::auth::{AuthConfig, Authorizer};
    use super::*;
    use crate::tests::fake_handles;
    use actix_web::{test, App};

    fn api() -> KubeletApi {
        KubeletApi {
            handles: fake_handles(true),
            logs: Arc::new(dockerlet_runtime::fake::FakeRuntime::default()),
            exec: Arc::new(dockerlet_runtime::fake::FakeRuntime::default()),
            attach: Arc::new(dockerlet_runtime::fake::FakeRuntime::default()),
            configz: Arc::new(serde_json::json!({"kubeletconfig": {"port": 10250}})),
            port_forward: Arc::new(port_forward::tests::Loopback),
            stream_idle_timeout: None,
            debug_routes: DebugRoutes::default(),
        }
    }

    async fn call(auth: AuthConfig, path: &str, bearer: bool) -> (u16, String) {
        call_with(auth, DebugRoutes::default(), test::TestRequest::get().uri(path), bearer).await
    }

    async fn call_with(auth: AuthConfig, routes: DebugRoutes, req: test::TestRequest, bearer: bool) -> (u16, String) {
        let api = api();
        let app = test::init_service(
            App::new()
                .app_data(web::Data::new(api.handles.clone()))
                .app_data(web::Data::new(api))
                .app_data(web::Data::new(Arc::new(auth)))
                .configure(move |cfg| configure(cfg, routes)),
        )
        .await;
        let mut req = req;
        if bearer {
            req = req.insert_header(("Authorization", "Bearer t"));
        }
        let resp = test::call_service(&app, req.to_request()).await;
        let status = resp.status().as_u16();
        let body = test::read_body(resp).await;
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    fn auth(anonymous: bool, authorizer: Authorizer) -> AuthConfig {
        AuthConfig {
            node_name: "n1".into(),
            anonymous,
            tokens: None,
            authorizer,
        }
    }

    /// No identity is 401 on every route; anonymous needs the flag and is then authorized like
    /// anyone (403 with kubelet's message when denied); a token is never taken as anonymous.
    #[actix_web::test]
    async fn the_filter_authenticates_then_authorizes() {
        for path in ["/pods", "/healthz", "/configz", "/containerLogs/a/b/c"] {
            assert_eq!(
                call(auth(false, Authorizer::AlwaysAllow), path, false).await,
                (401, "Unauthorized".into())
            );
        }
        assert_eq!(call(auth(true, Authorizer::AlwaysAllow), "/pods", true).await.0, 401);
        assert_eq!(
            call(auth(true, Authorizer::AlwaysDeny), "/configz", false).await,
            (
                403,
                "Forbidden (user=system:anonymous, verb=get, resource=nodes, subresource=proxy)".into()
            )
        );
        let (status, body) = call(auth(true, Authorizer::AlwaysAllow), "/configz", false).await;
        assert_eq!((status, body.as_str()), (200, r#"{"kubeletconfig":{"port":10250}}"#));
        assert_eq!(
            call(auth(true, Authorizer::AlwaysAllow), "/healthz/ping", false).await,
            (200, "ok".into())
        );
        let (status, body) = call(
            auth(true, Authorizer::AlwaysAllow),
            "/containerLogs/default/web-n1/nope",
            false,
        )
        .await;
        assert_eq!(status, 404, "{body}");
    }

    /// `/runningpods/` is a PodList of the runtime's pods, authorized as `proxy`.
    #[actix_web::test]
    async fn running_pods_are_a_pod_list_authorized_as_proxy() {
        let (status, body) = call(auth(true, Authorizer::AlwaysAllow), "/runningpods/", false).await;
        assert_eq!(status, 200, "{body}");
        let list: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            (list["kind"].as_str(), list["apiVersion"].as_str()),
            (Some("PodList"), Some("v1"))
        );
        assert_eq!(list["items"][0]["metadata"]["uid"], "u1");
        assert_eq!(list["items"][0]["spec"]["containers"][0]["image"], "busybox");
        assert_eq!(
            call(auth(true, Authorizer::AlwaysDeny), "/runningpods/", false).await,
            (
                403,
                "Forbidden (user=system:anonymous, verb=get, resource=nodes, subresource=proxy)".into()
            )
        );
    }

    /// `enableDebuggingHandlers: false` answers every debugging path (and below) with kubelet's
    /// 405 "Debug endpoints are disabled.", after authentication, and drops `/configz`; `/pods`
    /// and `/healthz` stay. The finer switches answer their own paths with their own messages.
    #[actix_web::test]
    async fn debugging_handlers_off_answer_405_as_kubelet() {
        let off = DebugRoutes {
            debugging: false,
            ..DebugRoutes::default()
        };
        let get = |path: &str| test::TestRequest::get().uri(path);
        let post = |path: &str| test::TestRequest::post().uri(path);
        let allow = || auth(true, Authorizer::AlwaysAllow);
        for req in [
            post("/run/default/web-n1/c"),
            get("/exec/default/web-n1/c?command=ls"),
            post("/attach/default/web-n1/u/c"),
            get("/portForward/default/web-n1"),
            get("/containerLogs/default/web-n1/c"),
            get("/runningpods/"),
            get("/debug/pprof/heap"),
            get("/logs/"),
            get("/logs/syslog"),
        ] {
            assert_eq!(
                call_with(allow(), off, req, false).await,
                (405, "Debug endpoints are disabled.\n".into())
            );
        }
        assert_eq!(call_with(allow(), off, get("/configz"), false).await.0, 404);
        // Without the slash, Go's ServeMux redirects to the subtree.
        assert_eq!(
            call_with(allow(), off, get("/runningpods?x=1"), false).await,
            (301, "<a href=\"/runningpods/?x=1\">Moved Permanently</a>.\n\n".into())
        );
        assert_eq!(
            call_with(allow(), off, post("/exec"), false).await,
            (301, String::new())
        );
        assert_eq!(call_with(allow(), off, get("/pods"), false).await.0, 200);
        assert_eq!(
            call_with(allow(), off, get("/healthz/ping"), false).await,
            (200, "ok".into())
        );
        // Authentication still comes first.
        assert_eq!(
            call_with(auth(false, Authorizer::AlwaysAllow), off, get("/exec/a/b/c"), false).await,
            (401, "Unauthorized".into())
        );
        let finer = DebugRoutes {
            system_log: false,
            profiling: false,
            debug_flags: false,
            ..DebugRoutes::default()
        };
        for (path, body) in [
            ("/logs/x", "logs endpoint is disabled.\n"),
            ("/debug/pprof/", "profiling endpoint is disabled.\n"),
            ("/debug/flags/v", "flags endpoint is disabled.\n"),
        ] {
            assert_eq!(call_with(allow(), finer, get(path), false).await, (405, body.into()));
        }
        assert_eq!(call_with(allow(), finer, get("/configz"), false).await.0, 200);
        // On (the default), the paths are served: a pod that is not here is 404.
        assert_eq!(
            call_with(
                allow(),
                DebugRoutes::default(),
                get("/containerLogs/default/nope/c"),
                false
            )
            .await
            .0,
            404
        );
    }
}
