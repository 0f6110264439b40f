//! TokenReview and SubjectAccessReview, as kube-apiserver answers them for a kubelet's
//! webhook authenticator and authorizer.
//!
//! A TokenReview authenticates the tokens a test registered ([`super::ApiServer::add_user_token`]),
//! the server's own bearer token (user `test-admin`, group `system:masters`) and the service
//! account tokens it issued (`system:serviceaccount:<ns>:<name>`, kube-apiserver's groups and
//! extra); every authenticated user also gets `system:authenticated`.
//!
//! A SubjectAccessReview is decided by the [`AccessRule`]s a test added, first match wins;
//! with none matching, members of `system:masters` are allowed and everyone else gets no
//! opinion (`allowed: false`), as an RBAC-only cluster without bindings answers.

use super::error::{ApiError, Cause};
use super::resources::ResourceInfo;
use super::token::SERVICE_ACCOUNT_ISSUER;
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

/// A user a test-registered bearer token stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenUser {
    /// `status.user.username`.
    pub name: String,
    /// `status.user.uid`.
    pub uid: String,
    /// `status.user.groups` (`system:authenticated` is added).
    pub groups: Vec<String>,
}

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

/// Answers a TokenReview. `authenticate` maps a token to its user and audiences, or why not.
pub fn token_review(
    body: &Value,
    authenticate: impl FnOnce(&str) -> Result<(UserInfo, Vec<String>), String>,
) -> Result<Value, ApiError> {
    let mut review: TokenReview = decode("TokenReview", body)?;
    if review.spec.token.is_empty() {
        return Err(ApiError::bad_request(
            "token is required for TokenReview in authentication",
        ));
    }
    let requested = review.spec.audiences.clone().unwrap_or_default();
    review.status = Some(match authenticate(&review.spec.token) {
        Ok((user, token_audiences)) => {
            // No audiences asked for: the API server's own (kube-apiserver's implicit audiences).
            let wanted = if requested.is_empty() {
                vec![SERVICE_ACCOUNT_ISSUER.to_string()]
            } else {
                requested.clone()
            };
            let common: Vec<String> = wanted.iter().filter(|a| token_audiences.contains(a)).cloned().collect();
            if common.is_empty() {
                TokenReviewStatus {
                    authenticated: Some(false),
                    user: Some(UserInfo::default()),
                    error: Some("token audiences don't match".into()),
                    audiences: None,
                }
            } else {
                TokenReviewStatus {
                    authenticated: Some(true),
                    user: Some(UserInfo {
                        groups: user.groups.map(with_authenticated),
                        ..user
                    }),
                    audiences: Some(common),
                    error: None,
                }
            }
        }
        Err(error) => TokenReviewStatus {
            authenticated: Some(false),
            user: Some(UserInfo::default()),
            error: Some(error),
            audiences: None,
        },
    });
    review.spec.token = String::new();
    review.metadata.creation_timestamp = None;
    serde_json::to_value(&review).map_err(|e| ApiError::internal(e.to_string()))
}

/// Answers a SubjectAccessReview by `rules`, then the default (`system:masters` allowed).
pub fn access_review(body: &Value, rules: &[AccessRule]) -> Result<Value, ApiError> {
    let mut review: SubjectAccessReview = decode("SubjectAccessReview", body)?;
    let spec = &review.spec;
    let user = spec.user.clone().unwrap_or_default();
    let groups = spec.groups.clone().unwrap_or_default();
    let mut causes = Vec::new();
    if user.is_empty() && groups.is_empty() {
        causes.push(Cause::required(
            "spec.user",
            "at least one of user or group must be specified",
        ));
    }
    if spec.resource_attributes.is_some() == spec.non_resource_attributes.is_some() {
        causes.push(Cause::invalid(
            "spec.resourceAttributes",
            &json!(null),
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        ));
    }
    if !causes.is_empty() {
        return Err(ApiError::invalid("SubjectAccessReview", "", causes));
    }
    let mut attrs = BTreeMap::new();
    if let Some(ra) = &spec.resource_attributes {
        for (key, value) in [
            ("verb", &ra.verb),
            ("resource", &ra.resource),
            ("subresource", &ra.subresource),
            ("name", &ra.name),
        ] {
            attrs.insert(key, value.clone().unwrap_or_default());
        }
    }
    let matched = spec
        .resource_attributes
        .as_ref()
        .and_then(|_| rules.iter().find(|r| r.matches(&user, &groups, &attrs)));
    review.status = Some(match matched {
        Some(rule) if rule.allow => SubjectAccessReviewStatus {
            allowed: true,
            reason: Some(format!("allowed by {}", rule.describe())),
            ..Default::default()
        },
        Some(rule) => SubjectAccessReviewStatus {
            allowed: false,
            denied: Some(true),
            reason: Some(format!("denied by {}", rule.describe())),
            ..Default::default()
        },
        None if groups.iter().any(|g| g == "system:masters") => SubjectAccessReviewStatus {
            allowed: true,
            ..Default::default()
        },
        None => SubjectAccessReviewStatus {
            allowed: false,
            ..Default::default()
        },
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
        let no = token_review(&body, |_| Err("invalid bearer token".into())).unwrap();
        assert_eq!(no["status"]["authenticated"], false);
        assert_eq!(no["status"]["error"], "invalid bearer token");
        let yes = token_review(&body, |_| {
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
        assert_eq!(token_review(&empty, |_| unreachable!()).unwrap_err().code, 400);
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
        let status = |body: Value| access_review(&body, &rules).unwrap()["status"].clone();
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
        assert_eq!(access_review(&bad, &rules).unwrap_err().code, 422);
    }
}
