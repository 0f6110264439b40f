//! TokenReview and SubjectAccessReview, as kube-apiserver answers them for a kubelet's
//! webhook authenticator and authorizer.
//!
//! A TokenReview authenticates the tokens a test registered ([`super::ApiServer::add_user_token`]),
//! the server's own bearer token (user `test-admin`, group `system:masters`) and the service
//! account tokens it issued (`system:serviceaccount:<ns>:<name>`, kube-apiserver's groups and
//! extra); every authenticated user also gets `system:authenticated`.
//!
//! A SubjectAccessReview is decided as kube-apiserver's union of authorizers: with node
//! authorization on, the Node authorizer for nodes first ([`crate::node_authorizer`]); then
//! the [`AccessRule`]s a test added, first match wins; with none matching, members of
//! `system:masters` are allowed and everyone else gets no opinion (`allowed: false`, with the
//! Node authorizer's reason for a node), as an RBAC cluster without other bindings answers.

use super::error::{ApiError, Cause};
use super::node_authorizer::{node_identity, Attributes, Decision};
use super::resources::ResourceInfo;
use super::token::{go_quoted_list, ServiceAccountClaims, TokenError, SERVICE_ACCOUNT_ISSUER};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewStatus, UserInfo};
use k8s_openapi::api::authorization::v1::{SubjectAccessReview, SubjectAccessReviewStatus};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// `tokenreviews`, for body decoding messages (not a stored resource).
pub(crate) static TOKEN_REVIEWS: ResourceInfo = ResourceInfo {
    group: "authentication.k8s.io",
    version: "v1",
    plural: "tokenreviews",
    singular: "tokenreview",
    kind: "TokenReview",
    namespaced: false,
    short_names: &[],
    has_status: false,
    field_labels: &[],
    create_on_update: false,
};

/// `subjectaccessreviews`, for body decoding messages (not a stored resource).
pub(crate) static ACCESS_REVIEWS: ResourceInfo = ResourceInfo {
    group: "authorization.k8s.io",
    version: "v1",
    plural: "subjectaccessreviews",
    singular: "subjectaccessreview",
    kind: "SubjectAccessReview",
    namespaced: false,
    short_names: &[],
    has_status: false,
    field_labels: &[],
    create_on_update: false,
};

pub use super::user::TokenUser;

/// One authorization rule: a subject (user or group, or anyone) may (or may not) do a verb on
/// a resource and subresource; unset fields match anything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccessRule {
    /// Allow (`true`) or deny.
    pub allow: bool,
    /// The user it is for.
    pub user: Option<String>,
    /// A group it is for.
    pub group: Option<String>,
    /// `get`, `create`, …
    pub verb: Option<String>,
    /// `nodes`, `pods`, …
    pub resource: Option<String>,
    /// `proxy`, `log`, `pods`, `healthz`, … (`""` matches reviews without one).
    pub subresource: Option<String>,
    /// The object's name.
    pub name: Option<String>,
}

impl AccessRule {
    /// A rule that allows.
    pub fn allow() -> Self {
        AccessRule {
            allow: true,
            ..Default::default()
        }
    }

    /// A rule that denies (`status.denied`).
    pub fn deny() -> Self {
        AccessRule::default()
    }

    /// For this user.
    pub fn user(mut self, user: &str) -> Self {
        self.user = Some(user.into());
        self
    }

    /// For members of this group.
    pub fn group(mut self, group: &str) -> Self {
        self.group = Some(group.into());
        self
    }

    /// This verb only.
    pub fn verb(mut self, verb: &str) -> Self {
        self.verb = Some(verb.into());
        self
    }

    /// This resource only.
    pub fn resource(mut self, resource: &str) -> Self {
        self.resource = Some(resource.into());
        self
    }

    /// This subresource only.
    pub fn subresource(mut self, subresource: &str) -> Self {
        self.subresource = Some(subresource.into());
        self
    }

    /// This object name only.
    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(name.into());
        self
    }

    fn matches(&self, user: &str, groups: &[String], attrs: &BTreeMap<&str, String>) -> bool {
        let field = |want: &Option<String>, key: &str| {
            want.as_deref()
                .is_none_or(|w| attrs.get(key).map(String::as_str).unwrap_or_default() == w)
        };
        self.user.as_deref().is_none_or(|u| u == user)
            && self.group.as_deref().is_none_or(|g| groups.iter().any(|x| x == g))
            && field(&self.verb, "verb")
            && field(&self.resource, "resource")
            && field(&self.subresource, "subresource")
            && field(&self.name, "name")
    }

    fn describe(&self) -> String {
        let subject = match (&self.user, &self.group) {
            (Some(u), _) => format!("user {u:?}"),
            (None, Some(g)) => format!("group {g:?}"),
            (None, None) => "everyone".to_string(),
        };
        format!("test rule for {subject}")
    }
}

fn decode<T: serde::de::DeserializeOwned>(kind: &str, body: &Value) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(body.clone()).map_err(|e| {
        ApiError::bad_request(format!(
            "{kind} in version \"v1\" cannot be handled as a {kind}: json: {}: {}",
            e.path(),
            e.inner()
        ))
    })
}

fn with_authenticated(mut groups: Vec<String>) -> Vec<String> {
    if !groups.iter().any(|g| g == "system:authenticated") {
        groups.push("system:authenticated".into());
    }
    groups
}

/// Answers a TokenReview (`pkg/registry/authentication/tokenreview/storage.go`).
/// `authenticate` maps a token and the audiences asked for (the review's, else the API
/// server's own) to its user and the audiences it is good for among them, or why not. The
/// review comes back as sent (token included) with its `status`.
pub fn token_review(
    body: &Value,
    authenticate: impl FnOnce(&str, &[String]) -> Result<(UserInfo, Vec<String>), TokenRefusal>,
) -> Result<Value, ApiError> {
    let mut review: TokenReview = decode("TokenReview", body)?;
    if review.spec.token.is_empty() {
        return Err(ApiError::bad_request(
            "token is required for TokenReview in authentication",
        ));
    }
    let requested = review.spec.audiences.clone().filter(|a| !a.is_empty());
    let wanted = requested.unwrap_or_else(|| vec![SERVICE_ACCOUNT_ISSUER.to_string()]);
    review.status = Some(match authenticate(&review.spec.token, &wanted) {
        Ok((user, audiences)) => TokenReviewStatus {
            authenticated: Some(true),
            user: Some(UserInfo {
                groups: user.groups.map(with_authenticated),
                ..user
            }),
            audiences: Some(audiences),
            error: None,
        },
        Err(error) => TokenReviewStatus {
            authenticated: Some(false),
            user: Some(UserInfo::default()),
            error: Some(error.to_string()),
            audiences: None,
        },
    });
    review.metadata.creation_timestamp = None;
    serde_json::to_value(&review).map_err(|e| ApiError::internal(e.to_string()))
}

/// Why a token authenticates no one, as the TokenReview's `status.error` says it: the union of
/// kube-apiserver's authenticators reports `invalid bearer token`, with the service account
/// authenticator's reason when that one recognised the token.
#[derive(Debug, thiserror::Error)]
pub enum TokenRefusal {
    /// No authenticator knows the token (or not for the audiences asked for).
    #[error("invalid bearer token")]
    Invalid,
    /// A service account token refused by its authenticator.
    #[error("[invalid bearer token, {0}]")]
    ServiceAccount(#[source] TokenError),
}

/// What [`token_user`] asks of the server (the HTTP side's shared state implements it, so this
/// file does not import the server that imports it).
pub(crate) trait Authenticators {
    /// The server's own bearer token.
    fn server_token(&self) -> &str;
    /// The user of a registered token (a token file's line).
    fn registered(&self, token: &str) -> Option<TokenUser>;
    /// A service account token's claims, its signature checked.
    fn decode(&self, token: &str) -> Result<ServiceAccountClaims, TokenError>;
    /// The claims checked by the validator: time, the account and the bound objects.
    fn validate(&self, claims: ServiceAccountClaims) -> Result<ServiceAccountClaims, TokenError>;
}

/// The user `token` stands for among the server's authenticators, for the audiences `wanted`,
/// with the audiences it is good for; or why not, in kube-apiserver's words:
/// - the server's own token and registered tokens (a token file: audience-agnostic, good for
///   the server's own audience only) are `invalid bearer token` for any other audience;
/// - service account tokens (`pkg/serviceaccount/jwt.go`) are checked for their signature,
///   then audiences, then by the validator (time, the account and bound objects); a refusal
///   is `[invalid bearer token, <why>]`, as the union of authenticators reports it.
pub(crate) fn token_user(
    shared: &dyn Authenticators,
    token: &str,
    wanted: &[String],
) -> Result<(UserInfo, Vec<String>), TokenRefusal> {
    let implicit = [SERVICE_ACCOUNT_ISSUER.to_string()];
    let static_user = if token == shared.server_token() {
        Some(UserInfo {
            username: Some("test-admin".into()),
            groups: Some(vec!["system:masters".into()]),
            ..Default::default()
        })
    } else {
        shared.registered(token).map(|u| UserInfo {
            username: Some(u.name.clone()),
            uid: Some(u.uid.clone()).filter(|u| !u.is_empty()),
            groups: Some(u.groups.clone()),
            extra: None,
        })
    };
    if let Some(user) = static_user {
        let audiences: Vec<String> = implicit.iter().filter(|a| wanted.contains(a)).cloned().collect();
        return if audiences.is_empty() {
            Err(TokenRefusal::Invalid)
        } else {
            Ok((user, audiences))
        };
    }
    if !token.contains('.') {
        return Err(TokenRefusal::Invalid);
    }
    let claims = shared.decode(token).map_err(TokenRefusal::ServiceAccount)?;
    let audiences: Vec<String> = claims.aud.iter().filter(|a| wanted.contains(a)).cloned().collect();
    if audiences.is_empty() {
        return Err(TokenRefusal::ServiceAccount(TokenError::Audience {
            token: go_quoted_list(&claims.aud),
            target: go_quoted_list(wanted),
        }));
    }
    let claims = shared.validate(claims).map_err(TokenRefusal::ServiceAccount)?;
    Ok((service_account_user(&claims), audiences))
}

/// `ServiceAccountInfo.UserInfo()` (`staging/src/k8s.io/apiserver/pkg/authentication/serviceaccount`):
/// the account's user and groups; pod name and UID, credential ID, node name (and UID when
/// known) as extra.
pub(crate) fn service_account_user(claims: &crate::token::ServiceAccountClaims) -> UserInfo {
    let k = &claims.kubernetes;
    let ns = &k.namespace;
    let mut extra = BTreeMap::new();
    let mut put = |key: &str, value: &str| {
        extra.insert(format!("authentication.kubernetes.io/{key}"), vec![value.to_string()]);
    };
    if let Some(pod) = k.pod.as_ref().filter(|p| !p.name.is_empty() && !p.uid.is_empty()) {
        put("pod-name", &pod.name);
        put("pod-uid", &pod.uid);
    }
    put("credential-id", &format!("JTI={}", claims.jti));
    if let Some(node) = k.node.as_ref().filter(|n| !n.name.is_empty()) {
        put("node-name", &node.name);
        if !node.uid.is_empty() {
            put("node-uid", &node.uid);
        }
    }
    UserInfo {
        username: Some(format!("system:serviceaccount:{ns}:{}", k.serviceaccount.name)),
        uid: Some(k.serviceaccount.uid.clone()),
        groups: Some(vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{ns}"),
        ]),
        extra: Some(extra),
    }
}

/// The authorizer attributes of a SubjectAccessReview's spec.
fn review_attributes(spec: &k8s_openapi::api::authorization::v1::SubjectAccessReviewSpec) -> Attributes {
    let mut attrs = Attributes {
        user: spec.user.clone().unwrap_or_default(),
        ..Attributes::default()
    };
    let text = |v: &Option<String>| v.clone().unwrap_or_default();
    if let Some(ra) = &spec.resource_attributes {
        attrs.resource_request = true;
        attrs.verb = text(&ra.verb);
        attrs.api_group = text(&ra.group);
        attrs.resource = text(&ra.resource);
        attrs.subresource = text(&ra.subresource);
        attrs.namespace = text(&ra.namespace);
        attrs.name = text(&ra.name);
    } else if let Some(nra) = &spec.non_resource_attributes {
        attrs.verb = text(&nra.verb);
        attrs.path = text(&nra.path);
    }
    attrs
}

/// Answers a SubjectAccessReview (`pkg/registry/authorization/subjectaccessreview/rest.go`) as
/// the union of authorizers would: the Node authorizer for nodes (`node_authorizer`, when node
/// authorization is on: `Some` of its decision), the test's `rules`, then RBAC's default
/// (`system:masters` allowed). A refusal without an explicit deny is `allowed: false` with the
/// reasons given.
pub fn access_review(
    body: &Value,
    rules: &[AccessRule],
    node_authorizer: impl Fn(&str, &Attributes) -> Option<Decision>,
) -> Result<Value, ApiError> {
    let mut review: SubjectAccessReview = decode("SubjectAccessReview", body)?;
    let spec = &review.spec;
    let user = spec.user.clone().unwrap_or_default();
    let groups = spec.groups.clone().unwrap_or_default();
    let mut causes = Vec::new();
    match (&spec.resource_attributes, &spec.non_resource_attributes) {
        (Some(_), Some(nra)) => causes.push(Cause::invalid(
            "spec",
            &serde_json::to_value(nra).unwrap_or_default(),
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )),
        (None, None) => causes.push(Cause::invalid(
            "spec",
            &json!(null),
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )),
        _ => {}
    }
    if user.is_empty() && groups.is_empty() {
        causes.push(Cause::invalid(
            "spec.user",
            &json!(""),
            "at least one of user or group must be specified",
        ));
    }
    if !causes.is_empty() {
        return Err(ApiError::invalid(
            "SubjectAccessReview.authorization.k8s.io",
            "",
            causes,
        ));
    }
    let attrs = review_attributes(spec);
    let node_decision = node_identity(&user, &groups).and_then(|node| node_authorizer(node, &attrs));
    let mut resource_attrs = BTreeMap::new();
    if let Some(ra) = &spec.resource_attributes {
        for (key, value) in [
            ("verb", &ra.verb),
            ("resource", &ra.resource),
            ("subresource", &ra.subresource),
            ("name", &ra.name),
        ] {
            resource_attrs.insert(key, value.clone().unwrap_or_default());
        }
    }
    let matched = spec
        .resource_attributes
        .as_ref()
        .and_then(|_| rules.iter().find(|r| r.matches(&user, &groups, &resource_attrs)));
    let no_opinion = |reason: String| SubjectAccessReviewStatus {
        allowed: false,
        reason: Some(reason).filter(|r| !r.is_empty()),
        ..Default::default()
    };
    review.status = Some(match (node_decision, matched) {
        (Some(Decision::Allow), _) => SubjectAccessReviewStatus {
            allowed: true,
            ..Default::default()
        },
        (_, Some(rule)) if rule.allow => SubjectAccessReviewStatus {
            allowed: true,
            reason: Some(format!("allowed by {}", rule.describe())),
            ..Default::default()
        },
        (_, Some(rule)) => SubjectAccessReviewStatus {
            allowed: false,
            denied: Some(true),
            reason: Some(format!("denied by {}", rule.describe())),
            ..Default::default()
        },
        (_, None) if groups.iter().any(|g| g == "system:masters") => SubjectAccessReviewStatus {
            allowed: true,
            ..Default::default()
        },
        (Some(Decision::NoOpinion(reason)), None) => no_opinion(reason),
        (None, None) => no_opinion(String::new()),
    });
    review.metadata.creation_timestamp = None;
    serde_json::to_value(&review).map_err(|e| ApiError::internal(e.to_string()))
}

/// `/apis/authentication.k8s.io/v1` or `/apis/authorization.k8s.io/v1`.
pub fn resource_list(group: &str) -> Option<Value> {
    let (name, kind) = match group {
        "authentication.k8s.io" => ("tokenreviews", "TokenReview"),
        "authorization.k8s.io" => ("subjectaccessreviews", "SubjectAccessReview"),
        _ => return None,
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": format!("{group}/v1"),
        "resources": [{
            "name": name,
            "singularName": kind.to_ascii_lowercase(),
            "namespaced": false,
            "kind": kind,
            "verbs": ["create"],
        }],
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An unknown token is unauthenticated with the reason; a known one gets its user and
    /// `system:authenticated`, and the server's audience.
    #[test]
    fn token_reviews_answer_as_kube_apiserver() {
        let body = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": "t"}});
        let no = token_review(&body, |_, _| Err(TokenRefusal::Invalid)).unwrap();
        assert_eq!(no["status"]["authenticated"], false);
        assert_eq!(no["status"]["error"], "invalid bearer token");
        let yes = token_review(&body, |_, wanted| {
            assert_eq!(wanted, [SERVICE_ACCOUNT_ISSUER], "no audiences asked: the server's own");
            Ok((
                UserInfo {
                    username: Some("alice".into()),
                    groups: Some(vec!["devs".into()]),
                    ..Default::default()
                },
                vec![SERVICE_ACCOUNT_ISSUER.into()],
            ))
        })
        .unwrap();
        assert_eq!(yes["status"]["authenticated"], true);
        assert_eq!(yes["status"]["user"]["groups"], json!(["devs", "system:authenticated"]));
        assert_eq!(yes["status"]["audiences"], json!([SERVICE_ACCOUNT_ISSUER]));
        let empty = json!({"spec": {"token": ""}});
        assert_eq!(token_review(&empty, |_, _| unreachable!()).unwrap_err().code, 400);
    }

    /// Rules in order, then masters allowed, others no opinion; malformed reviews are 422.
    #[test]
    fn access_reviews_follow_the_rules() {
        let sar = |user: &str, groups: &[&str], verb: &str, sub: &str| {
            json!({"spec": {"user": user, "groups": groups, "resourceAttributes":
                {"verb": verb, "resource": "nodes", "subresource": sub, "name": "n1", "version": "v1"}}})
        };
        let rules = [
            AccessRule::deny().user("mallory"),
            AccessRule::allow()
                .group("readers")
                .verb("get")
                .resource("nodes")
                .subresource("proxy"),
        ];
        let status = |body: Value| access_review(&body, &rules, |_, _| None).unwrap()["status"].clone();
        assert_eq!(status(sar("bob", &["readers"], "get", "proxy"))["allowed"], true);
        assert_eq!(status(sar("bob", &["readers"], "create", "proxy"))["allowed"], false);
        let denied = status(sar("mallory", &["system:masters"], "get", "proxy"));
        assert_eq!(
            (denied["allowed"].clone(), denied["denied"].clone()),
            (json!(false), json!(true))
        );
        assert_eq!(
            status(sar("root", &["system:masters"], "create", "proxy"))["allowed"],
            true
        );
        let bad = json!({"spec": {"resourceAttributes": {"verb": "get"}}});
        assert_eq!(access_review(&bad, &rules, |_, _| None).unwrap_err().code, 422);
    }
}
