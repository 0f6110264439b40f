//! Authentication and authorization of the kubelet API, as kubelet does them
//! (`pkg/kubelet/server/auth.go`): who asks (a verified client certificate, or anonymous when
//! allowed), then may they — the request's attributes are the verb from the method, resource
//! `nodes`, the node's name and a subresource by path.

use std::sync::Arc;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::{HttpMessage, HttpResponse};

/// The authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    /// The user name (a certificate's CN; `system:anonymous`).
    pub name: String,
    /// Its groups (a certificate's O values; `system:unauthenticated`).
    pub groups: Vec<String>,
}

impl UserInfo {
    /// The anonymous user kubelet gives a request without credentials.
    pub fn anonymous() -> Self {
        UserInfo {
            name: "system:anonymous".into(),
            groups: vec!["system:unauthenticated".into()],
        }
    }
}

/// What a request asks for, as a SubjectAccessReview's resourceAttributes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attributes {
    /// `get`, `create`, `update`, `patch`, `delete` (from the HTTP method).
    pub verb: &'static str,
    /// The node's name.
    pub name: String,
    /// `stats`, `metrics`, `log`, `spec`, `pods`, `healthz`, `configz` or `proxy`.
    pub subresource: &'static str,
}

/// The verb kubelet derives from the HTTP method; none for a method it does not map (kubelet
/// then authorizes an empty verb, which no rule grants).
pub fn verb(method: &str) -> &'static str {
    match method {
        "POST" => "create",
        "GET" | "HEAD" => "get",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" => "delete",
        _ => "",
    }
}

/// Is `path` `prefix` or below it (`/stats`, `/stats/summary`, but not `/statsx`)?
fn is_subpath(path: &str, prefix: &str) -> bool {
    let prefix = prefix.trim_end_matches('/');
    path == prefix || path.strip_prefix(prefix).is_some_and(|rest| rest.starts_with('/'))
}

/// The attributes to authorize, most specific first: kubelet's fine-grained subresources
/// (`pods`, `healthz`, `configz`) are tried first and fall back to `proxy`; the others are
/// one check.
pub fn attributes(method: &str, path: &str, node_name: &str) -> Vec<Attributes> {
    let verb = verb(method);
    let one = |subresource| Attributes {
        verb,
        name: node_name.to_string(),
        subresource,
    };
    for (prefix, subresource) in [
        ("/stats", "stats"),
        ("/metrics", "metrics"),
        ("/logs", "log"),
        ("/spec", "spec"),
    ] {
        if is_subpath(path, prefix) {
            return vec![one(subresource)];
        }
    }
    for (prefix, subresource) in [("/pods", "pods"), ("/healthz", "healthz"), ("/configz", "configz")] {
        if is_subpath(path, prefix) {
            return vec![one(subresource), one("proxy")];
        }
    }
    vec![one("proxy")]
}

/// `--authorization-mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthorizationMode {
    /// Every authenticated request is allowed (asked for explicitly).
    AlwaysAllow,
    /// No authorizer is configured: every request is forbidden. The safe default while the
    /// SubjectAccessReview webhook is not available.
    AlwaysDeny,
}

/// How the kubelet API authenticates and authorizes.
#[derive(Debug, Clone)]
pub struct AuthConfig {
    /// The node's name (the `name` of every check).
    pub node_name: String,
    /// `--anonymous-auth`: a request without credentials is `system:anonymous`; otherwise 401.
    pub anonymous: bool,
    /// `--authorization-mode`.
    pub authorization: AuthorizationMode,
}

impl AuthConfig {
    fn allowed(&self, _user: &UserInfo, _attributes: &Attributes) -> bool {
        match self.authorization {
            AuthorizationMode::AlwaysAllow => true,
            AuthorizationMode::AlwaysDeny => false,
        }
    }

    /// Who `user` is allowed to be for `attributes` (a fine-grained check, then its fallback):
    /// `Ok` or the 403 body kubelet writes.
    pub fn authorize(&self, user: &UserInfo, checks: &[Attributes]) -> Result<(), String> {
        if checks.iter().any(|a| self.allowed(user, a)) {
            return Ok(());
        }
        let a = checks.last().expect("at least one check");
        Err(format!(
            "Forbidden (user={}, verb={}, resource=nodes, subresource={})",
            user.name, a.verb, a.subresource
        ))
    }
}

/// The middleware: 401 `Unauthorized` without credentials (unless anonymous is allowed), 403
/// with kubelet's message when not authorized; the [`UserInfo`] goes into the request's
/// extensions for the handlers.
pub async fn filter(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let Some(config) = req.app_data::<actix_web::web::Data<Arc<AuthConfig>>>().cloned() else {
        return Ok(req.into_response(HttpResponse::InternalServerError().body("no auth configuration")));
    };
    let from_cert = req.request().conn_data::<UserInfo>().cloned();
    let bearer = req
        .headers()
        .get(actix_web::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("Bearer "));
    let user = match from_cert {
        Some(user) => user,
        // Bearer tokens need the TokenReview webhook, which this agent does not run: refused,
        // never treated as anonymous.
        None if bearer => {
            tracing::info!(
                path = req.path(),
                "bearer token refused: no token authenticator configured"
            );
            return Ok(req.into_response(unauthorized()));
        }
        None if config.anonymous => UserInfo::anonymous(),
        None => return Ok(req.into_response(unauthorized())),
    };
    let checks = attributes(req.method().as_str(), req.path(), &config.node_name);
    if let Err(message) = config.authorize(&user, &checks) {
        tracing::info!(user = %user.name, path = req.path(), "kubelet API request forbidden");
        return Ok(req.into_response(
            HttpResponse::Forbidden()
                .content_type("text/plain; charset=utf-8")
                .body(message),
        ));
    }
    req.extensions_mut().insert(user);
    Ok(next.call(req).await?.map_into_boxed_body())
}

fn unauthorized() -> HttpResponse {
    HttpResponse::Unauthorized()
        .content_type("text/plain; charset=utf-8")
        .body("Unauthorized")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// kubelet's mapping: the verb from the method, the subresource by path prefix (whole path
    /// segments only), fine-grained ones falling back to `proxy`.
    #[test]
    fn attributes_follow_kubelet() {
        let subs = |method, path| -> Vec<(&str, &str)> {
            attributes(method, path, "n1")
                .into_iter()
                .map(|a| (a.verb, a.subresource))
                .collect()
        };
        assert_eq!(subs("GET", "/stats/summary"), [("get", "stats")]);
        assert_eq!(subs("GET", "/metrics/cadvisor"), [("get", "metrics")]);
        assert_eq!(subs("GET", "/logs/syslog"), [("get", "log")]);
        assert_eq!(subs("GET", "/spec/"), [("get", "spec")]);
        assert_eq!(subs("GET", "/pods"), [("get", "pods"), ("get", "proxy")]);
        assert_eq!(subs("GET", "/healthz/ping"), [("get", "healthz"), ("get", "proxy")]);
        assert_eq!(subs("GET", "/configz"), [("get", "configz"), ("get", "proxy")]);
        assert_eq!(subs("GET", "/containerLogs/ns/p/c"), [("get", "proxy")]);
        assert_eq!(subs("POST", "/exec/ns/p/c"), [("create", "proxy")]);
        assert_eq!(subs("GET", "/statsx"), [("get", "proxy")]);
        assert_eq!(subs("DELETE", "/pods"), [("delete", "pods"), ("delete", "proxy")]);
        assert_eq!(attributes("GET", "/pods", "n1")[0].name, "n1");
    }

    /// A denied request gets kubelet's 403 body, naming the fallback subresource.
    #[test]
    fn denial_names_user_verb_and_subresource() {
        let config = AuthConfig {
            node_name: "n1".into(),
            anonymous: false,
            authorization: AuthorizationMode::AlwaysDeny,
        };
        let user = UserInfo {
            name: "alice".into(),
            groups: vec![],
        };
        assert_eq!(
            config.authorize(&user, &attributes("GET", "/containerLogs/a/b/c", "n1")),
            Err("Forbidden (user=alice, verb=get, resource=nodes, subresource=proxy)".into())
        );
        let allow = AuthConfig {
            authorization: AuthorizationMode::AlwaysAllow,
            ..config
        };
        assert_eq!(allow.authorize(&user, &attributes("GET", "/pods", "n1")), Ok(()));
    }
}
