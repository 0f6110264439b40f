//! Which debugging routes the kubelet API serves, as kubelet's `NewServer` decides
//! (`pkg/kubelet/server/server.go`): with `enableDebuggingHandlers: false`,
//! `InstallDebuggingDisabledHandlers` answers `/run/`, `/exec/`, `/attach/`, `/portForward/`,
//! `/containerLogs/`, `/runningpods/`, `/debug/pprof/` and `/logs/` (and everything under them)
//! with 405 "Debug endpoints are disabled." and `/configz` is not served; with it on,
//! `enableSystemLogHandler: false`, `enableProfilingHandler: false` and
//! `enableDebugFlagsHandler: false` answer `/logs/`, `/debug/pprof/` and `/debug/flags/v` with
//! 405 and their own message (`getHandlerForDisabledEndpoint`). The answers are Go's
//! `http.Error`: plain text, `nosniff`, the message and a newline; the paths without their
//! slash (`/exec`) get Go's `ServeMux` 301 to the subtree. kubelet's read-only server
//! is made without a configuration, so it has them all off.

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};

/// Which of kubelet's debugging routes are served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DebugRoutes {
    /// `enableDebuggingHandlers` (default true): exec, attach, run, port-forward, container
    /// logs, running pods, `/configz`.
    pub debugging: bool,
    /// `enableSystemLogHandler` (default true): `/logs/` (not served by dockerlet either way;
    /// false answers 405 as kubelet).
    pub system_log: bool,
    /// `enableProfilingHandler` (default true): `/debug/pprof/` (as `system_log`).
    pub profiling: bool,
    /// `enableDebugFlagsHandler` (default true): `/debug/flags/v` (as `system_log`).
    pub debug_flags: bool,
}

impl Default for DebugRoutes {
    fn default() -> Self {
        Self {
            debugging: true,
            system_log: true,
            profiling: true,
            debug_flags: true,
        }
    }
}

/// The path prefixes `InstallDebuggingDisabledHandlers` answers (Go `ServeMux` subtree
/// patterns: the prefix and everything under it).
pub const DISABLED_PREFIXES: &[&str] = &[
    "/run/",
    "/exec/",
    "/attach/",
    "/portForward/",
    "/containerLogs/",
    "/runningpods/",
    "/debug/pprof/",
    "/logs/",
];

/// Go's `http.Error(w, message, 405)`.
fn method_not_allowed(message: &'static str) -> HttpResponse {
    HttpResponse::build(StatusCode::METHOD_NOT_ALLOWED)
        .content_type("text/plain; charset=utf-8")
        .insert_header(("X-Content-Type-Options", "nosniff"))
        .body(format!("{message}\n"))
}

/// Go's `ServeMux` answer for a subtree pattern's path without its slash (`/exec` for
/// `/exec/`): 301 to the path with the slash, the query kept; a GET's body is Go's
/// `http.Redirect` link.
fn redirect_to_subtree(prefix: &'static str) -> actix_web::Resource {
    web::resource(prefix.trim_end_matches('/')).route(web::route().to(move |req: actix_web::HttpRequest| async move {
        let location = match req.query_string() {
            "" => prefix.to_string(),
            query => format!("{prefix}?{query}"),
        };
        let mut resp = HttpResponse::build(StatusCode::MOVED_PERMANENTLY);
        resp.insert_header(("Location", location.clone()));
        match *req.method() {
            actix_web::http::Method::GET | actix_web::http::Method::HEAD => {
                resp.content_type("text/html; charset=utf-8").body(format!(
                    "<a href=\"{}\">Moved Permanently</a>.\n\n",
                    html_escape(&location)
                ))
            }
            _ => resp.finish(),
        }
    }))
}

/// Go's `htmlEscape` (net/http): `&`, `<`, `>`, `"` and `'`.
fn html_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&#34;")
        .replace('\'', "&#39;")
}

/// A resource answering every method under `prefix` with 405 and `message`.
fn disabled(prefix: &str, message: &'static str) -> actix_web::Resource {
    web::resource(format!("{prefix}{{tail:.*}}"))
        .route(web::route().to(move || async move { method_not_allowed(message) }))
}

/// The 405 routes of the turned-off handlers, to register before the served ones.
pub fn disabled_routes(routes: DebugRoutes) -> Vec<actix_web::Resource> {
    if !routes.debugging {
        return DISABLED_PREFIXES
            .iter()
            .flat_map(|prefix| {
                [
                    disabled(prefix, "Debug endpoints are disabled."),
                    redirect_to_subtree(prefix),
                ]
            })
            .collect();
    }
    let mut resources = Vec::new();
    if !routes.system_log {
        resources.push(disabled("/logs/", "logs endpoint is disabled."));
    }
    if !routes.profiling {
        resources.push(disabled("/debug/pprof/", "profiling endpoint is disabled."));
    }
    if !routes.debug_flags {
        resources.push(
            web::resource("/debug/flags/v")
                .route(web::route().to(|| async { method_not_allowed("flags endpoint is disabled.") })),
        );
    }
    resources
}
