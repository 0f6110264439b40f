//! The HTTP side: one actix-web handler that routes every request as kube-apiserver lays out its
//! paths, and streams watches as newline-delimited JSON over chunked transfer.

use super::error::ApiError;
use super::list_options::ListOptions;
use super::options::{write_options, Verb};
use super::patch::PatchType;
use super::protobuf::unrecognized;
use super::resources::{self, ResourceInfo};
use super::selectors::{FieldSelector, LabelSelector};
use super::store::{DeleteOptions, Store, Subresource, WatchSpec, WriteOptions};
use super::table::{self, OutputFormat};
use super::validate::FieldValidation;
use super::{Fault, RecordedRequest};
use actix_web::http::{Method, StatusCode};
use actix_web::{web, HttpRequest, HttpResponse};
use bytes::Bytes;
use serde_json::{json, Value};
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::Instant;

/// How many requests the log keeps.
const REQUEST_LOG: usize = 10_000;

/// State shared by the HTTP workers and the [`super::ApiServer`] handle.
pub struct Shared {
    /// The objects.
    pub store: Mutex<Store>,
    /// Signs and verifies service account tokens.
    pub issuer: super::token::Issuer,
    /// The tokens issued, oldest first.
    pub issued: Mutex<Vec<super::token::IssuedToken>>,
    /// The bearer token clients must send.
    pub token: String,
    /// Serving TLS: requests need the token or a client certificate.
    pub tls: bool,
    /// Where the server listens (for `/api`'s `serverAddressByClientCIDRs`).
    pub addr: SocketAddr,
    /// Recent requests, oldest first.
    pub requests: Mutex<VecDeque<RecordedRequest>>,
    /// Injected failures.
    pub faults: Mutex<Vec<Fault>>,
    /// How often a watch with `allowWatchBookmarks=true` gets a bookmark.
    pub bookmark_interval: Duration,
    /// Print one line per request to stderr.
    pub log_requests: bool,
    /// Bearer tokens a test registered, with the user each stands for (TokenReview).
    pub user_tokens: Mutex<HashMap<String, super::review::TokenUser>>,
    /// SubjectAccessReview rules, first match wins.
    pub access_rules: Mutex<Vec<super::review::AccessRule>>,
    /// The specs of TokenReviews received (tokens included), oldest first.
    pub token_reviews: Mutex<Vec<Value>>,
    /// The specs of SubjectAccessReviews received, oldest first.
    pub access_reviews: Mutex<Vec<Value>>,
    /// TLS to kubelets, with the API server's kubelet client certificate.
    pub kubelet_client: Arc<rustls::ClientConfig>,
    /// Requests from nodes go through the Node authorizer and NodeRestriction.
    pub node_authorization: bool,
    /// Every 403 a node got (`<METHOD> <path>: <message>`), oldest first.
    pub node_refusals: Mutex<Vec<String>>,
}

impl Shared {
    /// The store, even if a panicking holder poisoned the lock.
    pub fn store(&self) -> MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The token authenticators of TokenReview ([`super::review::token_user`]).
impl super::review::Authenticators for Shared {
    fn server_token(&self) -> &str {
        &self.token
    }

    fn registered(&self, token: &str) -> Option<super::review::TokenUser> {
        self.user_tokens
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(token)
            .cloned()
    }

    fn decode(&self, token: &str) -> Result<super::token::ServiceAccountClaims, super::token::TokenError> {
        self.issuer.decode(token)
    }

    fn validate(
        &self,
        claims: super::token::ServiceAccountClaims,
    ) -> Result<super::token::ServiceAccountClaims, super::token::TokenError> {
        super::token::Issuer::validate(&self.store(), claims)
    }
}

fn json_response(code: u16, body: &Value, warnings: &[String]) -> HttpResponse {
    let mut builder = HttpResponse::build(StatusCode::from_u16(code).unwrap_or(StatusCode::OK));
    builder.content_type("application/json");
    for w in warnings {
        builder.append_header((
            "Warning",
            format!("299 - {}", serde_json::to_string(w).unwrap_or_default()),
        ));
    }
    builder.body(serde_json::to_vec(body).unwrap_or_default())
}

pub(crate) fn error_response(err: &ApiError) -> HttpResponse {
    let mut builder = HttpResponse::build(StatusCode::from_u16(err.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR));
    builder.content_type("application/json");
    if err.code == 429 || err.code == 503 {
        builder.insert_header(("Retry-After", "1"));
    }
    builder.body(serde_json::to_vec(&err.status()).unwrap_or_default())
}

type Query = HashMap<String, String>;

/// Every request comes here.
pub async fn dispatch(req: HttpRequest, body: web::Bytes, shared: web::Data<Shared>) -> HttpResponse {
    let query: Query = web::Query::<Query>::from_query(req.query_string())
        .map(web::Query::into_inner)
        .unwrap_or_default();
    record(&shared, &req, &body);
    let path = req.path().trim_end_matches('/').to_string();
    let open = matches!(path.as_str(), "/version" | "/healthz" | "/livez" | "/readyz");
    let user = match user_of(&shared, &req) {
        Ok(user) => user,
        Err(_) if open => None,
        Err(e) => {
            if shared.log_requests {
                eprintln!("test-apiserver: {} {}: 401: {e}", req.method(), req.path());
            }
            return error_response(&ApiError::unauthorized());
        }
    };
    let node = requesting_node(&shared, user.as_ref());
    let refusal = node
        .as_ref()
        .and_then(|(user, node)| node_refusal(&shared, &req, user, node, &path, &query))
        .or_else(|| bootstrapper_refusal(&shared, &req, user.as_ref(), &path, &query));
    let result = match refusal.or_else(|| take_fault(&shared, req.method().as_str(), &path)) {
        Some(err) => Err(err),
        None => route(
            &req,
            &path,
            &query,
            &body,
            &shared,
            node.as_ref().map(|(_, n)| n.as_str()),
            user.as_ref(),
        ),
    };
    let restricted = node.is_some()
        || user
            .as_ref()
            .is_some_and(|u| u.groups.iter().any(|g| g == super::authn::BOOTSTRAPPERS_GROUP));
    let response = match result {
        Ok(resp) => resp,
        Err(err) => {
            if restricted && err.code == 403 {
                record_node_refusal(&shared, req.method().as_str(), req.path(), &err);
            }
            error_response(&err)
        }
    };
    if shared.log_requests {
        let q = req.query_string();
        let sep = if q.is_empty() { "" } else { "?" };
        eprintln!(
            "test-apiserver: {} {}{sep}{q} -> {}",
            req.method(),
            req.path(),
            response.status().as_u16()
        );
    }
    response
}

/// The user a request is, by kube-apiserver's authenticators: the bearer token (the fixture's
/// own, one a test registered, a service account token it issued for its own audience, a
/// bootstrap token, see [`super::authn`]), else the client certificate (user = CN, groups =
/// O). `Err` is a 401: a token that matches nothing, an expired or not yet valid certificate,
/// or no credentials over TLS. Like kube-apiserver's old insecure port, plain HTTP needs no
/// credentials (kubectl does not send a bearer token over plain HTTP): `Ok(None)`.
pub(crate) fn request_user(
    shared: &Shared,
    authorization: Option<&str>,
    certificate: Option<&super::ClientCertificate>,
) -> Result<Option<super::TokenUser>, super::authn::AuthnError> {
    use super::authn::AuthnError;
    if let Some(auth) = authorization {
        let bearer = auth.strip_prefix("Bearer ").ok_or(AuthnError::Token)?;
        return bearer_user(shared, bearer).map(Some).ok_or(AuthnError::Token);
    }
    match certificate {
        Some(super::ClientCertificate(Ok(user))) => Ok(Some(user.clone())),
        Some(super::ClientCertificate(Err(e))) => Err(e.clone()),
        None if shared.tls => Err(AuthnError::NoCredentials),
        None => Ok(None),
    }
}

fn bearer_user(shared: &Shared, bearer: &str) -> Option<super::TokenUser> {
    if bearer == shared.token {
        return Some(super::TokenUser {
            name: "test-admin".into(),
            uid: String::new(),
            groups: vec!["system:masters".into()],
        });
    }
    if let Some(user) = shared.user_tokens.lock().unwrap_or_else(|e| e.into_inner()).get(bearer) {
        return Some(user.clone());
    }
    if let Some(user) = super::authn::bootstrap_user(&*shared.store(), bearer) {
        return Some(user);
    }
    let claims = shared.issuer.verify(&shared.store(), bearer).ok()?;
    if !claims.aud.iter().any(|a| a == super::token::SERVICE_ACCOUNT_ISSUER) {
        return None;
    }
    let info = super::review::service_account_user(&claims);
    Some(super::TokenUser {
        name: info.username.unwrap_or_default(),
        uid: info.uid.unwrap_or_default(),
        groups: info.groups.unwrap_or_default(),
    })
}

/// [`request_user`] of an actix request.
fn user_of(shared: &Shared, req: &HttpRequest) -> Result<Option<super::TokenUser>, super::authn::AuthnError> {
    let authorization = req
        .headers()
        .get("Authorization")
        .map(|v| v.to_str().unwrap_or("\u{0}"));
    request_user(shared, authorization, req.conn_data::<super::ClientCertificate>())
}

/// The user and node a request comes from, when node authorization is on and the user is a
/// node (`system:node:<name>` in `system:nodes`, by token or client certificate).
fn requesting_node(shared: &Shared, user: Option<&super::TokenUser>) -> Option<(String, String)> {
    if !shared.node_authorization {
        return None;
    }
    let user = user?;
    let node = super::node_authorizer::node_identity(&user.name, &user.groups)?;
    Some((user.name.clone(), node.to_string()))
}

/// RBAC's 403 for a bootstrap token's request (node authorization on), if it refuses it.
fn bootstrapper_refusal(
    shared: &Shared,
    req: &HttpRequest,
    user: Option<&super::TokenUser>,
    path: &str,
    query: &Query,
) -> Option<ApiError> {
    let user =
        user.filter(|u| shared.node_authorization && u.groups.iter().any(|g| g == super::authn::BOOTSTRAPPERS_GROUP))?;
    let attrs = super::node_authorizer::Attributes::of_request(&user.name, req.method().as_str(), path, query);
    super::authn::bootstrapper_refusal(&attrs)
}

/// Keeps a 403 a node got, for [`super::ApiServer::node_refusals`].
fn record_node_refusal(shared: &Shared, method: &str, path: &str, err: &ApiError) {
    shared
        .node_refusals
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(format!("{method} {path}: {}", err.message));
}

/// The Node authorizer's 403 for a node's request, if it refuses it.
fn node_refusal(
    shared: &Shared,
    req: &HttpRequest,
    user: &str,
    node: &str,
    path: &str,
    query: &Query,
) -> Option<ApiError> {
    use super::node_authorizer::{authorize, Attributes, Decision};
    let attrs = Attributes::of_request(user, req.method().as_str(), path, query);
    match authorize(&*shared.store(), node, &attrs) {
        Decision::Allow => None,
        Decision::NoOpinion(reason) => Some(attrs.forbidden(&reason)),
    }
}

/// For handlers outside [`dispatch`] (the kubelet proxy): records the request, then its
/// refusal if its credentials are bad or a fault is injected for it.
pub(crate) fn admit(shared: &Shared, req: &HttpRequest) -> Option<HttpResponse> {
    record(shared, req, &Bytes::new());
    if shared.log_requests {
        eprintln!(
            "test-apiserver: {} {}?{} (kubelet proxy)",
            req.method(),
            req.path(),
            req.query_string()
        );
    }
    let Ok(user) = user_of(shared, req) else {
        return Some(error_response(&ApiError::unauthorized()));
    };
    if let Some((user, node)) = requesting_node(shared, user.as_ref()) {
        let query: Query = web::Query::<Query>::from_query(req.query_string())
            .map(web::Query::into_inner)
            .unwrap_or_default();
        if let Some(err) = node_refusal(shared, req, &user, &node, req.path(), &query) {
            record_node_refusal(shared, req.method().as_str(), req.path(), &err);
            return Some(error_response(&err));
        }
    }
    let query: Query = web::Query::<Query>::from_query(req.query_string())
        .map(web::Query::into_inner)
        .unwrap_or_default();
    if let Some(err) = bootstrapper_refusal(shared, req, user.as_ref(), req.path(), &query) {
        record_node_refusal(shared, req.method().as_str(), req.path(), &err);
        return Some(error_response(&err));
    }
    take_fault(shared, req.method().as_str(), req.path()).map(|e| error_response(&e))
}

fn record(shared: &Shared, req: &HttpRequest, body: &Bytes) {
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    record_request(
        shared,
        RecordedRequest {
            method: req.method().to_string(),
            path: req.path().to_string(),
            query: req.query_string().to_string(),
            content_type: header("Content-Type"),
            accept: header("Accept"),
            user_agent: header("User-Agent"),
            body: String::from_utf8_lossy(body).into_owned(),
        },
    );
}

/// Keeps `request` in the log.
pub(crate) fn record_request(shared: &Shared, request: RecordedRequest) {
    let mut log = shared.requests.lock().unwrap_or_else(|e| e.into_inner());
    log.push_back(request);
    while log.len() > REQUEST_LOG {
        log.pop_front();
    }
}

pub(crate) fn take_fault(shared: &Shared, method: &str, path: &str) -> Option<ApiError> {
    let mut faults = shared.faults.lock().unwrap_or_else(|e| e.into_inner());
    let i = faults.iter().position(|f| {
        f.remaining > 0
            && f.method.as_deref().is_none_or(|m| m.eq_ignore_ascii_case(method))
            && path.contains(&f.path_contains)
    })?;
    faults[i].remaining -= 1;
    let code = faults[i].status;
    faults.retain(|f| f.remaining > 0);
    Some(ApiError::with_code(
        code,
        format!("injected failure {code} (test-apiserver)"),
    ))
}

pub(crate) fn not_found_path() -> ApiError {
    let mut err = ApiError::not_found("", "");
    err.message = "the server could not find the requested resource".into();
    err.details = None;
    err
}

fn route(
    req: &HttpRequest,
    path: &str,
    query: &Query,
    body: &Bytes,
    shared: &web::Data<Shared>,
    node: Option<&str>,
    user: Option<&super::TokenUser>,
) -> Result<HttpResponse, ApiError> {
    let ok = |v: Value| Ok(json_response(200, &v, &[]));
    match path {
        "/version" => return ok(resources::version()),
        "/healthz" | "/livez" | "/readyz" => return Ok(HttpResponse::Ok().content_type("text/plain").body("ok")),
        "/api" => return ok(resources::api_versions(&shared.addr.to_string())),
        "/apis" => return ok(resources::api_group_list()),
        "/openapi/v3" => return ok(resources::openapi_v3_root()),
        "/.well-known/openid-configuration" => {
            let scheme = if shared.tls { "https" } else { "http" };
            let url = format!("{scheme}://{}", shared.addr);
            return ok(shared.issuer.openid_configuration(&url));
        }
        "/openid/v1/jwks" => {
            let body = serde_json::to_vec(&shared.issuer.jwks()).unwrap_or_default();
            return Ok(HttpResponse::Ok().content_type("application/jwk-set+json").body(body));
        }
        _ => {}
    }
    if let Some(gv) = path.strip_prefix("/openapi/v3/") {
        let (group, version) = match gv.strip_prefix("api/") {
            Some(v) => ("", v),
            None => gv
                .strip_prefix("apis/")
                .and_then(|g| g.split_once('/'))
                .ok_or_else(not_found_path)?,
        };
        return resources::openapi_v3_group(group, version)
            .map(|d| json_response(200, &d, &[]))
            .ok_or_else(not_found_path);
    }
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let post_only = |what: &str| -> Result<(), ApiError> {
        if *req.method() == Method::POST {
            Ok(())
        } else {
            Err(ApiError::method_not_allowed(format!(
                "the server does not allow this method on the requested resource ({}) for {what}",
                req.method()
            )))
        }
    };
    match segs.as_slice() {
        ["apis", "authentication.k8s.io", "v1", "tokenreviews"] => {
            post_only("tokenreviews")?;
            let body = parse_body(&super::review::TOKEN_REVIEWS, input_format(content_type(req))?, body)?;
            shared
                .token_reviews
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(body["spec"].clone());
            let answer = super::review::token_review(&body, |t, audiences| {
                super::review::token_user(shared.get_ref(), t, audiences)
            })?;
            return Ok(json_response(201, &answer, &[]));
        }
        ["apis", "authorization.k8s.io", "v1", "subjectaccessreviews"] => {
            post_only("subjectaccessreviews")?;
            let body = parse_body(&super::review::ACCESS_REVIEWS, input_format(content_type(req))?, body)?;
            shared
                .access_reviews
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(body["spec"].clone());
            let rules = shared.access_rules.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let answer = super::review::access_review(&body, &rules, |node, attrs| {
                shared
                    .node_authorization
                    .then(|| super::node_authorizer::authorize(&*shared.store(), node, attrs))
            })?;
            return Ok(json_response(201, &answer, &[]));
        }
        ["apis", group @ ("authentication.k8s.io" | "authorization.k8s.io"), "v1"] => {
            return super::review::resource_list(group)
                .map(|d| json_response(200, &d, &[]))
                .ok_or_else(not_found_path);
        }
        _ => {}
    }
    let (group, version, rest) = match segs.as_slice() {
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group] => {
            if matches!(
                *group,
                "coordination.k8s.io"
                    | "node.k8s.io"
                    | "authentication.k8s.io"
                    | "authorization.k8s.io"
                    | "certificates.k8s.io"
            ) {
                return ok(resources::api_group(group));
            }
            return Err(not_found_path());
        }
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return Err(not_found_path()),
    };
    if rest.is_empty() {
        return resources::resource_list(group, version)
            .map(|d| json_response(200, &d, &[]))
            .ok_or_else(not_found_path);
    }
    let (watch_path, rest) = match rest {
        ["watch", rest @ ..] => (true, rest),
        _ => (false, rest),
    };
    let (ns, rest) = match rest {
        ["namespaces", ns, resource, rest @ ..] if resources::by_url(group, version, resource).is_some() => {
            (Some(*ns), [&[*resource][..], rest].concat())
        }
        _ => (None, rest.to_vec()),
    };
    let resource = resources::by_url(group, version, rest[0]).ok_or_else(not_found_path)?;
    if rest.len() > 3
        || (resource.namespaced != ns.is_some() && rest.len() > 1)
        || (!resource.namespaced && ns.is_some())
    {
        return Err(not_found_path());
    }
    let name = rest.get(1).copied();
    let sub = match rest.get(2).copied() {
        None => None,
        Some("status") if resource.has_status => Some(Subresource::Status),
        Some("ephemeralcontainers") if resource.kind == "Pod" => Some(Subresource::EphemeralContainers),
        Some("approval") if resource.kind == "CertificateSigningRequest" => Some(Subresource::Approval),
        Some("binding") if resource.kind == "Pod" => None,
        Some("token") if resource.kind == "ServiceAccount" => None,
        Some(_) => return Err(not_found_path()),
    };
    let binding = rest.get(2) == Some(&"binding");
    let token = rest.get(2) == Some(&"token");
    if token {
        if *req.method() != Method::POST {
            return Err(ApiError::method_not_allowed(format!(
                "the server does not allow this method on the requested resource ({})",
                req.method()
            )));
        }
        let content_type = req
            .headers()
            .get("Content-Type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let input = input_format(content_type)?;
        let opts = WriteOptions {
            node: node.map(str::to_string),
            ..write_options(query, Verb::Create)?
        };
        let body = parse_body(resource, input, body)?;
        let name = rest.get(1).copied().unwrap_or_default();
        let jti = shared.store().new_uid();
        let (answer, warnings, issued) = {
            let store = shared.store();
            super::token::token_request(&store, &shared.issuer, ns.unwrap_or_default(), name, &body, &opts, jti)?
        };
        shared.issued.lock().unwrap_or_else(|e| e.into_inner()).push(issued);
        return Ok(json_response(201, &answer, &warnings));
    }
    let ns_str = ns.unwrap_or_default();
    let format = OutputFormat::from_accept(
        req.headers()
            .get("Accept")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("application/json"),
        query.get("includeObject").map(String::as_str),
    );
    let content_type = req
        .headers()
        .get("Content-Type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let method = req.method();
    let watch = watch_path || super::list_options::query_bool(query, "watch").unwrap_or(false);
    if *method == Method::GET && (name.is_none() || watch) && sub.is_none() && !binding {
        let list_opts = ListOptions::parse(query, watch_path)?;
        list_opts.validate()?;
        let mut fields = FieldSelector::parse(query.get("fieldSelector").map_or("", String::as_str), resource)?;
        if let Some(name) = name {
            if !fields.is_empty() && fields.required("metadata.name") != Some(name) {
                return Err(ApiError::bad_request(
                    "fieldSelector metadata.name doesn't match requested name",
                ));
            }
            fields = FieldSelector::name(name);
        }
        let labels = LabelSelector::parse(query.get("labelSelector").map_or("", String::as_str))?;
        if list_opts.watch {
            return start_watch(shared, resource, ns, fields, labels, format, &list_opts);
        }
        let at = list_opts.read_at()?;
        let list = shared
            .store()
            .list(resource, ns, &fields, &labels, &at, list_opts.limit)?;
        return ok(table::render_list(resource, list, &format));
    }
    let Some(name) = name else {
        return match *method {
            Method::POST => {
                let input = input_format(content_type)?;
                let opts = WriteOptions {
                    node: node.map(str::to_string),
                    user: user.cloned(),
                    ..write_options(query, Verb::Create)?
                };
                let body = parse_body(resource, input, body)?;
                let (obj, warnings) = shared.store().create(resource, ns_str, body, &opts)?;
                Ok(json_response(201, &obj, &warnings))
            }
            // deletecollection: every selected object deleted as one DELETE would, the list
            // of them answered (a namespaced kind only within a namespace).
            Method::DELETE if sub.is_none() && !binding && (ns.is_some() || !resource.namespaced) => {
                let opts = DeleteOptions {
                    node: node.map(str::to_string),
                    ..delete_options(query, body)?
                };
                let fields = FieldSelector::parse(query.get("fieldSelector").map_or("", String::as_str), resource)?;
                let labels = LabelSelector::parse(query.get("labelSelector").map_or("", String::as_str))?;
                let list = shared
                    .store()
                    .delete_collection(resource, ns, &fields, &labels, &opts)?;
                ok(list)
            }
            _ => Err(ApiError::method_not_allowed(format!(
                "the server does not allow this method on the requested resource ({method})"
            ))),
        };
    };
    let subresource = sub.unwrap_or(Subresource::Main);
    match *method {
        Method::GET if !binding => {
            let obj = shared.store().get(resource, ns_str, name)?;
            ok(table::render_one(resource, &obj, &format))
        }
        Method::POST if binding => {
            let body = parse_json(body)?;
            let status = shared.store().bind(ns_str, name, &body)?;
            Ok(json_response(201, &status, &[]))
        }
        Method::PUT if !binding => {
            let input = input_format(content_type)?;
            let opts = WriteOptions {
                node: node.map(str::to_string),
                ..write_options(query, Verb::Update)?
            };
            let body = parse_body(resource, input, body)?;
            let (obj, warnings, created) = shared
                .store()
                .update(resource, ns_str, name, body, subresource, &opts)?;
            Ok(json_response(if created { 201 } else { 200 }, &obj, &warnings))
        }
        Method::PATCH if !binding => {
            // As PatchResource: the content type, then the options, then the body.
            let patch_type = PatchType::from_content_type(content_type)?;
            let opts = WriteOptions {
                node: node.map(str::to_string),
                ..write_options(query, Verb::Patch(patch_type))?
            };
            let patch = parse_patch(patch_type, opts.field_validation, body)?;
            let (obj, warnings, created) =
                shared
                    .store()
                    .patch(resource, ns_str, name, patch_type, &patch, subresource, &opts)?;
            Ok(json_response(if created { 201 } else { 200 }, &obj, &warnings))
        }
        Method::DELETE if sub.is_none() && !binding => {
            let opts = DeleteOptions {
                node: node.map(str::to_string),
                ..delete_options(query, body)?
            };
            let result = shared.store().delete(resource, ns_str, name, &opts)?;
            ok(result)
        }
        _ => Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource ({method})"
        ))),
    }
}

fn content_type(req: &HttpRequest) -> &str {
    req.headers()
        .get("Content-Type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

fn parse_json(body: &Bytes) -> Result<Value, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding the request body: json: {e}")))
}

fn parse_yaml(body: &Bytes) -> Result<Value, ApiError> {
    let text = std::str::from_utf8(body).map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
    serde_saphyr::from_str::<Value>(text).map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))
}

/// A PATCH body, decoded as the patch handler decodes each type: apply as YAML, the others as
/// JSON (`error decoding patch: ...` for JSON and merge patches under Strict/Warn, the bare
/// error for strategic merge patches; `Invalid JSON Patch` for a merge patch under Ignore).
fn parse_patch(patch_type: PatchType, validation: FieldValidation, body: &Bytes) -> Result<Value, ApiError> {
    if patch_type == PatchType::Apply {
        return parse_yaml(body);
    }
    serde_json::from_slice(body).map_err(|e| {
        let message = match (patch_type, validation) {
            (PatchType::Strategic, _) => e.to_string(),
            (PatchType::Merge, FieldValidation::Ignore) => "Invalid JSON Patch".to_string(),
            (_, FieldValidation::Ignore) => e.to_string(),
            _ => format!("error decoding patch: {e}"),
        };
        ApiError::bad_request(message)
    })
}

/// The media types a request body may come in (the core API's serializers, in order).
const INPUT_MEDIA_TYPES: &str = "application/json, application/yaml, application/vnd.kubernetes.protobuf";

/// How a create or update body is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Input {
    Json,
    Yaml,
    Protobuf,
}

/// `negotiation.NegotiateInputSerializer`: no content type is JSON, an unknown one is 415.
fn input_format(content_type: &str) -> Result<Input, ApiError> {
    match content_type.split(';').next().unwrap_or_default().trim() {
        "application/json" | "" => Ok(Input::Json),
        "application/yaml" => Ok(Input::Yaml),
        super::protobuf::MEDIA_TYPE => Ok(Input::Protobuf),
        _ => Err(ApiError::unsupported_media_type(format!(
            "the body of the request was in an unknown format - accepted media types include: {INPUT_MEDIA_TYPES}"
        ))),
    }
}

/// A create or update body as JSON: decoded from its encoding; a body that is no object (or no
/// JSON or YAML at all) is the unrecognized-object 400.
fn parse_body(resource: &ResourceInfo, input: Input, body: &Bytes) -> Result<Value, ApiError> {
    let value = match input {
        Input::Protobuf => return super::protobuf::decode(resource, body),
        Input::Json => serde_json::from_slice::<Value>(body).map_err(|e| {
            unrecognized(
                resource,
                &format!("couldn't get version/kind; json parse error: {e}"),
                body,
            )
        })?,
        Input::Yaml => {
            let text = String::from_utf8_lossy(body);
            serde_saphyr::from_str::<Value>(&text)
                .map_err(|e| unrecognized(resource, &format!("error converting YAML to JSON: {e}"), body))?
        }
    };
    if !value.is_object() {
        return Err(unrecognized(
            resource,
            &format!(
                "couldn't get version/kind; json parse error: json: cannot unmarshal {} into Go value of type \
                 struct {{ APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }}",
                super::strategic::json_type(&value)
            ),
            body,
        ));
    }
    Ok(value)
}

fn delete_options(query: &Query, body: &Bytes) -> Result<DeleteOptions, ApiError> {
    let mut opts = DeleteOptions::default();
    if let Some(g) = query.get("gracePeriodSeconds") {
        opts.grace_period_seconds = Some(
            g.parse()
                .map_err(|_| ApiError::bad_request(format!("gracePeriodSeconds: invalid value \"{g}\"")))?,
        );
    }
    opts.dry_run = query.get("dryRun").is_some_and(|d| d == "All");
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(opts);
    }
    let body = parse_json(body)?;
    let decoded: k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions =
        serde_path_to_error::deserialize(body.clone())
            .map_err(|e| ApiError::bad_request(format!("DeleteOptions: {}: {}", e.path(), e.inner())))?;
    if let Some(g) = decoded.grace_period_seconds {
        opts.grace_period_seconds = Some(g);
    }
    if let Some(pre) = decoded.preconditions {
        opts.uid = pre.uid;
        opts.resource_version = pre.resource_version;
    }
    if decoded.dry_run.is_some_and(|d| d.iter().any(|x| x == "All")) {
        opts.dry_run = true;
    }
    Ok(opts)
}

fn start_watch(
    shared: &web::Data<Shared>,
    resource: &'static ResourceInfo,
    ns: Option<&str>,
    fields: FieldSelector,
    labels: LabelSelector,
    format: OutputFormat,
    opts: &ListOptions,
) -> Result<HttpResponse, ApiError> {
    let bookmarks = opts.allow_watch_bookmarks;
    let start = opts.watch_start()?;
    // Without timeoutSeconds kube-apiserver picks one between --min-request-timeout (30 min) and
    // twice that (get.go); this takes the lower end.
    let timeout = opts.timeout.unwrap_or(Duration::from_secs(1800));
    let spec = WatchSpec {
        resource,
        namespace: ns.map(str::to_string),
        fields,
        labels,
        format,
        bookmarks,
    };
    let rx = match shared.store().watch(spec.clone(), start) {
        Ok(rx) => rx,
        Err(err) if err.code == 410 || err.code == 504 => {
            // Past validation, the watch cache answers with 200 and one ERROR event carrying the
            // Status (cacher.go `newErrWatcher`): 410 for a resourceVersion older than its
            // history (clients then re-list), 504 for an initial state newer than its own.
            let line = json!({"type": "ERROR", "object": err.status()});
            let mut bytes = serde_json::to_vec(&line).unwrap_or_default();
            bytes.push(b'\n');
            return Ok(HttpResponse::Ok().content_type("application/json").body(bytes));
        }
        Err(err) => return Err(err),
    };
    let now = Instant::now();
    let deadline = now + timeout;
    let next_bookmark = if bookmarks {
        now + shared.bookmark_interval
    } else {
        deadline + Duration::from_secs(3600)
    };
    let state = WatchState {
        rx,
        spec,
        deadline,
        next_bookmark,
        interval: shared.bookmark_interval,
        shared: shared.clone().into_inner(),
        done: false,
    };
    let stream = futures::stream::unfold(state, next_chunk);
    Ok(HttpResponse::Ok().content_type("application/json").streaming(stream))
}

struct WatchState {
    rx: UnboundedReceiver<Bytes>,
    spec: WatchSpec,
    deadline: Instant,
    next_bookmark: Instant,
    interval: Duration,
    shared: Arc<Shared>,
    done: bool,
}

impl WatchState {
    /// Everything queued, then a bookmark at the current resourceVersion, read under the store's
    /// lock so the bookmark never overtakes an event.
    fn flush_with_bookmark(&mut self) -> Bytes {
        let store = self.shared.store();
        let mut out = Vec::new();
        while let Ok(b) = self.rx.try_recv() {
            out.extend_from_slice(&b);
        }
        out.extend_from_slice(&self.spec.bookmark_line(store.resource_version(), false));
        Bytes::from(out)
    }
}

async fn next_chunk(mut st: WatchState) -> Option<(Result<Bytes, actix_web::Error>, WatchState)> {
    if st.done {
        return None;
    }
    tokio::select! {
        biased;
        msg = st.rx.recv() => msg.map(|b| (Ok(b), st)),
        _ = tokio::time::sleep_until(st.deadline) => {
            st.done = true;
            if st.spec.bookmarks {
                let b = st.flush_with_bookmark();
                Some((Ok(b), st))
            } else {
                None
            }
        }
        _ = tokio::time::sleep_until(st.next_bookmark) => {
            st.next_bookmark = Instant::now() + st.interval;
            let b = st.flush_with_bookmark();
            Some((Ok(b), st))
        }
    }
}
