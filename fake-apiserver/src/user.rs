//! The user a credential stands for (a leaf module: the authenticators, TokenReview and the
//! strategies that record the requester all use it).

/// A user: what a bearer token a test registered, a bootstrap token or a client certificate
/// stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenUser {
    /// `status.user.username`.
    pub name: String,
    /// `status.user.uid`.
    pub uid: String,
    /// `status.user.groups` (`system:authenticated` is added).
    pub groups: Vec<String>,
}
