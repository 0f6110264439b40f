//! What the admission plugins ([`super::admission`], [`super::cluster`],
//! [`super::node_authorizer`], [`super::node_restriction`]) read of the store, and which
//! subresource a write addresses. The store implements [`Lookup`] and calls the plugins; they
//! take a `&dyn Lookup`, so no plugin imports the store that imports it.

use serde_json::Value;

use super::error::ApiError;
use super::resources::ResourceInfo;

/// Reads of the stored objects.
pub trait Lookup {
    /// One object, or 404.
    fn get(&self, resource: &'static ResourceInfo, ns: &str, name: &str) -> Result<Value, ApiError>;

    /// Every stored object of a resource.
    fn all(&self, resource: &'static ResourceInfo) -> Vec<Value>;
}

/// Which subresource a write addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subresource {
    /// The object itself: `status` changes are ignored where a status subresource exists.
    Main,
    /// `/status`: everything but `status` (and metadata labels/annotations) is ignored.
    Status,
    /// A pod's `/ephemeralcontainers`: only `spec.ephemeralContainers` changes.
    EphemeralContainers,
    /// A CertificateSigningRequest's `/approval`: only the Approved and Denied conditions
    /// change (`csrApprovalStrategy` in `pkg/registry/certificates/certificates/strategy.go`).
    Approval,
}
