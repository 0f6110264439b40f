//! Who asks the kubelet API and what they ask for: the caller's [`UserInfo`] and a request's
//! [`Attributes`], shared by authentication and authorization ([`super::auth`]) and the API
//! server's reviews ([`super::webhook`]). In a file of their own so neither of those imports the
//! other.

use std::collections::BTreeMap;

/// A user's `extra`, as TokenReview and SubjectAccessReview carry it.
pub type Extra = BTreeMap<String, Vec<String>>;

/// The authenticated caller.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserInfo {
    /// The user name (a certificate's CN; `system:anonymous`).
    pub name: String,
    /// The user's UID (from a TokenReview; none for certificates).
    pub uid: String,
    /// Its groups (a certificate's O values; `system:unauthenticated`).
    pub groups: Vec<String>,
    /// Extra attributes (from a TokenReview).
    pub extra: Extra,
}

impl UserInfo {
    /// The anonymous user kubelet gives a request without credentials.
    pub fn anonymous() -> Self {
        UserInfo {
            name: "system:anonymous".into(),
            groups: vec!["system:unauthenticated".into()],
            ..Default::default()
        }
    }

    /// An authenticated user gets the group `system:authenticated`, as k8s.io/apiserver's
    /// AuthenticatedGroupAdder gives it (not to anonymous).
    pub(super) fn with_authenticated_group(mut self) -> Self {
        if !self.groups.iter().any(|g| g == "system:authenticated") {
            self.groups.push("system:authenticated".into());
        }
        self
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
