//! Who a request is, for the credentials kube-apiserver reads besides the fixture's own token:
//!
//! - x509 client certificates (`staging/src/k8s.io/apiserver/pkg/authentication/request/x509/x509.go`,
//!   `CommonNameUserConversion`): a certificate the CA signed is user = CN, groups = O. Its
//!   chain and signature are checked in the TLS handshake; its validity period here, so an
//!   expired or not yet valid certificate is a 401 (as the x509 authenticator's `Verify` error
//!   is) rather than a failed handshake, which is what rustls' verifier would make of it.
//! - bootstrap tokens (`plugin/pkg/auth/authenticator/token/bootstrap/bootstrap.go`,
//!   `staging/src/k8s.io/cluster-bootstrap/token/api/types.go`): `<id>.<secret>` matches the
//!   Secret `kube-system/bootstrap-token-<id>` of type `bootstrap.kubernetes.io/token` with
//!   `token-id`, `token-secret`, `usage-bootstrap-authentication: "true"` and no past
//!   `expiration`; the user is `system:bootstrap:<id>` in `system:bootstrappers` and the
//!   `auth-extra-groups`.
//! - what RBAC lets a bootstrapper do on a kubeadm cluster (`system:node-bootstrapper`'s CSR
//!   create/get/list/watch, `plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go`, bound
//!   by kubeadm to its token group; `system:discovery`, `system:basic-user`,
//!   `system:public-info-viewer` to everyone authenticated).

use super::error::ApiError;
use super::node_authorizer::Attributes;
use super::user::TokenUser;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{CertificateError, DigitallySignedStruct, DistinguishedName, Error, SignatureScheme};
use std::sync::Arc;

/// The bootstrap token Secrets' namespace.
pub const BOOTSTRAP_NAMESPACE: &str = "kube-system";
/// `BootstrapTokenSecretPrefix`.
pub const BOOTSTRAP_SECRET_PREFIX: &str = "bootstrap-token-";
/// `SecretTypeBootstrapToken`.
pub const BOOTSTRAP_SECRET_TYPE: &str = "bootstrap.kubernetes.io/token";
/// `BootstrapUserPrefix`.
pub const BOOTSTRAP_USER_PREFIX: &str = "system:bootstrap:";
/// `BootstrapDefaultGroup`.
pub const BOOTSTRAPPERS_GROUP: &str = "system:bootstrappers";

/// rustls' WebPKI client verifier, except that a certificate outside its validity period
/// passes the handshake (the authenticator refuses it with a 401, see the module docs).
#[derive(Debug)]
pub struct TimeLenientVerifier(pub Arc<dyn ClientCertVerifier>);

impl ClientCertVerifier for TimeLenientVerifier {
    fn offer_client_auth(&self) -> bool {
        self.0.offer_client_auth()
    }

    fn client_auth_mandatory(&self) -> bool {
        self.0.client_auth_mandatory()
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.0.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, Error> {
        match self.0.verify_client_cert(end_entity, intermediates, now) {
            Err(Error::InvalidCertificate(
                CertificateError::Expired
                | CertificateError::ExpiredContext { .. }
                | CertificateError::NotValidYet
                | CertificateError::NotValidYetContext { .. },
            )) => Ok(ClientCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// Why a request authenticates as no one (a 401).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthnError {
    /// The client certificate does not parse.
    #[error("x509: cannot parse the client certificate: {0}")]
    Certificate(String),
    /// The client certificate is outside its validity period (Go's `CertificateInvalidError`).
    #[error("{0}")]
    CertificateTime(String),
    /// The client certificate has no common name (`CommonNameUserConversion`).
    #[error("x509: the client certificate's common name is empty")]
    NoCommonName,
    /// The `Authorization` header is not `Bearer <token>`, or the token is no one's.
    #[error("invalid bearer token")]
    Token,
    /// Over TLS, neither a token nor a client certificate came.
    #[error("no credentials")]
    NoCredentials,
}

/// The user a verified client certificate stands for, or why it stands for none.
pub fn certificate_user(der: &[u8]) -> Result<TokenUser, AuthnError> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).map_err(|e| AuthnError::Certificate(e.to_string()))?;
    let validity = cert.validity();
    let now = x509_parser::time::ASN1Time::now();
    if now < validity.not_before || now > validity.not_after {
        // Go's `x509.CertificateInvalidError` for `Expired`.
        return Err(AuthnError::CertificateTime(format!(
            "x509: certificate has expired or is not yet valid: current time {} is {} {}",
            now.to_datetime(),
            if now < validity.not_before { "before" } else { "after" },
            if now < validity.not_before {
                validity.not_before
            } else {
                validity.not_after
            }
            .to_datetime(),
        )));
    }
    let subject = cert.subject();
    let name = subject
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .unwrap_or_default()
        .to_string();
    if name.is_empty() {
        return Err(AuthnError::NoCommonName);
    }
    let groups = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok())
        .map(str::to_string)
        .collect();
    Ok(TokenUser {
        name,
        uid: String::new(),
        groups,
    })
}

/// `bootstraptokenutil.ParseToken`: `[a-z0-9]{6}.[a-z0-9]{16}`.
fn parse_token(token: &str) -> Option<(&str, &str)> {
    let (id, secret) = token.split_once('.')?;
    let ok = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    (ok(id, 6) && ok(secret, 16)).then_some((id, secret))
}

/// `bootstrapsecretutil.GetData`: a data value, decoded.
fn secret_data(secret: &serde_json::Value, key: &str) -> String {
    use base64::Engine as _;
    secret["data"][key]
        .as_str()
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// `AuthenticateToken` over the stored Secrets.
pub fn bootstrap_user(store: &dyn super::lookup::Lookup, token: &str) -> Option<TokenUser> {
    let (id, secret_part) = parse_token(token)?;
    let secrets = super::resources::by_name("secrets").expect("secrets are served");
    let secret = store
        .get(secrets, BOOTSTRAP_NAMESPACE, &format!("{BOOTSTRAP_SECRET_PREFIX}{id}"))
        .ok()?;
    if !secret["metadata"]["deletionTimestamp"].is_null() || secret["type"] != BOOTSTRAP_SECRET_TYPE {
        return None;
    }
    if secret_data(&secret, "token-secret") != secret_part || secret_data(&secret, "token-id") != id {
        return None;
    }
    let expiration = secret_data(&secret, "expiration");
    if !expiration.is_empty() {
        // `HasExpired`: an unparsable expiration counts as expired.
        let at = expiration.parse::<jiff::Timestamp>().ok()?;
        if at <= jiff::Timestamp::now() {
            return None;
        }
    }
    if secret_data(&secret, "usage-bootstrap-authentication") != "true" {
        return None;
    }
    // `GetGroups`: the default group and the extra ones, each `system:bootstrappers:…`, sorted.
    let mut groups = vec![BOOTSTRAPPERS_GROUP.to_string()];
    for group in secret_data(&secret, "auth-extra-groups").split(',') {
        let group = group.trim();
        if group.is_empty() {
            continue;
        }
        if !group.starts_with("system:bootstrappers:") {
            return None;
        }
        groups.push(group.to_string());
    }
    groups.sort();
    groups.dedup();
    Some(TokenUser {
        name: format!("{BOOTSTRAP_USER_PREFIX}{id}"),
        uid: String::new(),
        groups,
    })
}

/// Paths every authenticated user may GET (`system:discovery`, `system:public-info-viewer`).
fn discovery(path: &str) -> bool {
    matches!(
        path,
        "/livez" | "/readyz" | "/healthz" | "/version" | "/version/" | "/api" | "/apis" | "/openapi"
    ) || ["/api/", "/apis/", "/openapi/"].iter().any(|p| path.starts_with(p))
}

/// RBAC on a kubeadm cluster for a user in `system:bootstrappers`: its 403, if it refuses.
pub fn bootstrapper_refusal(attrs: &Attributes) -> Option<ApiError> {
    let allowed = if attrs.resource_request {
        (attrs.api_group == "certificates.k8s.io"
            && attrs.resource == "certificatesigningrequests"
            && attrs.subresource.is_empty()
            && matches!(attrs.verb.as_str(), "create" | "get" | "list" | "watch"))
            // system:basic-user: self reviews.
            || (attrs.verb == "create"
                && matches!(
                    (attrs.api_group.as_str(), attrs.resource.as_str()),
                    ("authorization.k8s.io", "selfsubjectaccessreviews" | "selfsubjectrulesreviews")
                        | ("authentication.k8s.io", "selfsubjectreviews")
                ))
    } else {
        attrs.verb == "get" && discovery(&attrs.path)
    };
    (!allowed).then(|| attrs.forbidden(""))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ParseToken`: six and sixteen lowercase alphanumerics around a dot.
    #[test]
    fn bootstrap_tokens_have_kubeadms_form() {
        assert_eq!(
            parse_token("abcdef.0123456789abcdef"),
            Some(("abcdef", "0123456789abcdef"))
        );
        assert_eq!(parse_token("ABCDEF.0123456789abcdef"), None);
        assert_eq!(parse_token("abcdef0123456789abcdef"), None);
        assert_eq!(parse_token("abcde.0123456789abcdef0"), None);
    }
}
