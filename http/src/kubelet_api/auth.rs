//! Authentication and authorization of the kubelet API, as kubelet does them
//! (`pkg/kubelet/server/auth.go`, k8s.io/apiserver's delegating authenticator): who asks (a
//! verified client certificate, a bearer token the API server's TokenReview vouches for, or
//! anonymous when allowed), then may they — the request's attributes are the verb from the
//! method, resource `nodes`, the node's name and a subresource by path, decided by
//! `AlwaysAllow`, deny-all or the API server's SubjectAccessReview ([`super::webhook`]).

use std::sync::Arc;
use std::time::Duration;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::{HttpMessage, HttpResponse};

pub use super::identity::{Attributes, UserInfo};
use super::webhook::{TokenAuthenticator, WebhookAuthorizer};

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
    for (prefix, subresource) in [
        ("/pods", "pods"),
        ("/healthz", "healthz"),
        ("/configz", "configz"),
        ("/runningpods", "pods"),
    ] {
        if is_subpath(path, prefix) {
            return vec![one(subresource), one("proxy")];
        }
    }
    vec![one("proxy")]
}

/// `--authorization-mode`, as configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthorizationMode {
    /// Every authenticated request is allowed (asked for explicitly).
    AlwaysAllow,
    /// No authorizer is configured (no API server and no mode asked for): every request is
    /// forbidden.
    AlwaysDeny,
    /// SubjectAccessReviews to the API server (the default with one).
    Webhook {
        /// `--authorization-webhook-cache-authorized-ttl` (5 m).
        authorized_ttl: Duration,
        /// `--authorization-webhook-cache-unauthorized-ttl` (30 s).
        unauthorized_ttl: Duration,
    },
}

/// Who decides whether a request is allowed.
#[derive(Debug)]
pub enum Authorizer {
    /// Everything is allowed.
    AlwaysAllow,
    /// Nothing is allowed.
    AlwaysDeny,
    /// The API server, through SubjectAccessReviews.
    Webhook(WebhookAuthorizer),
}

/// How the kubelet API authenticates and authorizes.
#[derive(Debug)]
pub struct AuthConfig {
    /// The node's name (the `name` of every check).
    pub node_name: String,
    /// `--anonymous-auth`: a request without credentials is `system:anonymous`; otherwise 401.
    pub anonymous: bool,
    /// `--authentication-token-webhook`: bearer tokens through TokenReview; without it a
    /// bearer token is 401 (never taken as anonymous).
    pub tokens: Option<TokenAuthenticator>,
    /// `--authorization-mode`.
    pub authorizer: Authorizer,
}

/// Why a request is not let through: kubelet's status and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// 403, or 500 when the authorizer could not decide.
    pub status: u16,
    /// `Forbidden (user=…, verb=…, resource=nodes, subresource=…)`.
    pub message: String,
}

impl AuthConfig {
    /// Whether `user` may do any of `checks` (a fine-grained check, then its fallback), tried
    /// in order: `Ok`, or kubelet's 403 naming the last check, or its 500 naming the check
    /// the authorizer failed on.
    pub async fn authorize(&self, user: &UserInfo, checks: &[Attributes]) -> Result<(), Refusal> {
        let describe = |a: &Attributes| {
            format!(
                "(user={}, verb={}, resource=nodes, subresource={})",
                user.name, a.verb, a.subresource
            )
        };
        for a in checks {
            let allowed = match &self.authorizer {
                Authorizer::AlwaysAllow => true,
                Authorizer::AlwaysDeny => false,
                Authorizer::Webhook(webhook) => match webhook.allowed(user, a).await {
                    Ok(allowed) => allowed,
                    Err(e) => {
                        tracing::error!(error = %e, user = %user.name, verb = a.verb, subresource = a.subresource, "authorization error");
                        return Err(Refusal {
                            status: 500,
                            message: format!("Authorization error {}", describe(a)),
                        });
                    }
                },
            };
            if allowed {
                return Ok(());
            }
        }
        let a = checks.last().expect("at least one check");
        Err(Refusal {
            status: 403,
            message: format!("Forbidden {}", describe(a)),
        })
    }

    /// Who sent the request: its verified certificate's subject, else its bearer token's user
    /// (TokenReview), else anonymous when allowed; `None` is 401. A bearer token that does not
    /// authenticate is never taken as anonymous.
    pub async fn authenticate(&self, certificate: Option<UserInfo>, bearer: Option<&str>) -> Option<UserInfo> {
        if let Some(user) = certificate {
            return Some(user.with_authenticated_group());
        }
        match (bearer, &self.tokens) {
            (Some(token), Some(tokens)) => match tokens.authenticate(token).await {
                Ok(user) => user.map(UserInfo::with_authenticated_group),
                Err(e) => {
                    tracing::error!(error = %e, "unable to authenticate the request due to an error");
                    None
                }
            },
            (Some(_), None) => {
                tracing::info!(
                    "bearer token refused: no token authenticator configured (--authentication-token-webhook)"
                );
                None
            }
            (None, _) if self.anonymous => Some(UserInfo::anonymous()),
            (None, _) => None,
        }
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
    let bearer = bearer_token(req.headers());
    let Some(user) = config.authenticate(from_cert, bearer.as_deref()).await else {
        return Ok(req.into_response(unauthorized()));
    };
    let checks = attributes(req.method().as_str(), req.path(), &config.node_name);
    if let Err(refusal) = config.authorize(&user, &checks).await {
        tracing::info!(user = %user.name, path = req.path(), status = refusal.status, "kubelet API request refused");
        let status =
            actix_web::http::StatusCode::from_u16(refusal.status).unwrap_or(actix_web::http::StatusCode::FORBIDDEN);
        return Ok(req.into_response(
            HttpResponse::build(status)
                .content_type("text/plain; charset=utf-8")
                .body(refusal.message),
        ));
    }
    req.extensions_mut().insert(user);
    Ok(next.call(req).await?.map_into_boxed_body())
}

/// The token of `Authorization: Bearer <token>` (scheme case-insensitive, as Go's
/// bearertoken authenticator reads it); none for other schemes or an empty token.
fn bearer_token(headers: &actix_web::http::header::HeaderMap) -> Option<String> {
    let value = headers
        .get(actix_web::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .trim();
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then(|| token.to_string())
}

fn unauthorized() -> HttpResponse {
    HttpResponse::Unauthorized()
        .content_type("text/plain; charset=utf-8")
        .body("Unauthorized")
}

#[cfg(test)]
mod tests {
    use super::super::webhook::tests::FakeReviewer;
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
        assert_eq!(subs("GET", "/runningpods/"), [("get", "pods"), ("get", "proxy")]);
        assert_eq!(attributes("GET", "/pods", "n1")[0].name, "n1");
    }

    fn config(authorizer: Authorizer, tokens: bool) -> (AuthConfig, Arc<FakeReviewer>) {
        let fake = Arc::new(FakeReviewer::default());
        let config = AuthConfig {
            node_name: "n1".into(),
            anonymous: false,
            tokens: tokens.then(|| TokenAuthenticator::new(fake.clone(), Duration::from_secs(120))),
            authorizer,
        };
        (config, fake)
    }

    fn alice() -> UserInfo {
        UserInfo {
            name: "alice".into(),
            ..Default::default()
        }
    }

    fn block<T>(f: impl std::future::Future<Output = T>) -> T {
        futures::executor::block_on(f)
    }

    /// A denied request gets kubelet's 403 body, naming the fallback subresource.
    #[test]
    fn denial_names_user_verb_and_subresource() {
        let (deny, _) = config(Authorizer::AlwaysDeny, false);
        assert_eq!(
            block(deny.authorize(&alice(), &attributes("GET", "/containerLogs/a/b/c", "n1"))),
            Err(Refusal {
                status: 403,
                message: "Forbidden (user=alice, verb=get, resource=nodes, subresource=proxy)".into()
            })
        );
        let (allow, _) = config(Authorizer::AlwaysAllow, false);
        assert_eq!(
            block(allow.authorize(&alice(), &attributes("GET", "/pods", "n1"))),
            Ok(())
        );
    }

    /// The webhook tries the fine-grained subresource, then `proxy`: alice, allowed only
    /// `get nodes/proxy`, reads `/pods` after two reviews; `create` is forbidden naming `proxy`.
    #[test]
    fn webhook_falls_back_to_proxy() {
        let fake = Arc::new(FakeReviewer::default());
        let (mut cfg, _) = config(Authorizer::AlwaysDeny, false);
        cfg.authorizer = Authorizer::Webhook(WebhookAuthorizer::new(
            fake.clone(),
            Duration::from_secs(300),
            Duration::from_secs(30),
        ));
        assert_eq!(
            block(cfg.authorize(&alice(), &attributes("GET", "/pods", "n1"))),
            Ok(())
        );
        assert_eq!(fake.accesses.load(std::sync::atomic::Ordering::SeqCst), 2);
        assert_eq!(
            block(cfg.authorize(&alice(), &attributes("POST", "/exec/a/b/c", "n1")))
                .unwrap_err()
                .message,
            "Forbidden (user=alice, verb=create, resource=nodes, subresource=proxy)"
        );
    }

    /// Certificates win over tokens; a token is the TokenReview's user (plus
    /// `system:authenticated`); a bad or unreviewable token, or a token without a
    /// configured authenticator, is no one — even when anonymous is allowed.
    #[test]
    fn authentication_order() {
        let (mut cfg, _) = config(Authorizer::AlwaysAllow, true);
        cfg.anonymous = true;
        let cert = UserInfo {
            name: "admin".into(),
            groups: vec!["system:masters".into()],
            ..Default::default()
        };
        let user = block(cfg.authenticate(Some(cert), Some("good"))).unwrap();
        assert_eq!(user.name, "admin");
        assert_eq!(user.groups, ["system:masters", "system:authenticated"]);
        let user = block(cfg.authenticate(None, Some("good"))).unwrap();
        assert_eq!((user.name.as_str(), user.uid.as_str()), ("alice", "u-1"));
        assert_eq!(user.groups, ["devs", "system:authenticated"]);
        assert_eq!(block(cfg.authenticate(None, Some("bad"))), None);
        assert_eq!(block(cfg.authenticate(None, Some("broken"))), None);
        assert_eq!(block(cfg.authenticate(None, None)), Some(UserInfo::anonymous()));
        cfg.tokens = None;
        assert_eq!(block(cfg.authenticate(None, Some("good"))), None);
    }

    /// `Bearer` in any case, one token; other schemes are no token.
    #[test]
    fn bearer_header_parsing() {
        let headers = |v: &str| {
            let mut h = actix_web::http::header::HeaderMap::new();
            h.insert(
                actix_web::http::header::AUTHORIZATION,
                actix_web::http::header::HeaderValue::from_str(v).unwrap(),
            );
            h
        };
        assert_eq!(bearer_token(&headers("Bearer abc")), Some("abc".into()));
        assert_eq!(bearer_token(&headers("bearer abc")), Some("abc".into()));
        assert_eq!(bearer_token(&headers("Basic abc")), None);
        assert_eq!(bearer_token(&headers("Bearer ")), None);
    }
}
