//! kube-controller-manager's csrapproving and csrsigning controllers, as pure functions of a
//! CSR (the store runs them after every CSR change, as the controllers' informers would).
//!
//! Upstream (kubernetes/kubernetes):
//! - `pkg/controller/certificates/approver/sarapprove.go`: a kubelet client CSR from the node
//!   it names (`selfnodeclient`) or from anyone allowed `nodeclient` is approved with reason
//!   `AutoApproved`. The fixture has no RBAC: it models kubeadm's bindings
//!   (`cmd/kubeadm/app/phases/bootstraptoken/node/tlsbootstrap.go`): the group
//!   `system:bootstrappers:kubeadm:default-node-token` may `nodeclient`, `system:nodes` may
//!   `selfnodeclient`.
//! - `pkg/controller/certificates/signer/signer.go`: an approved, not failed CSR for a signer it
//!   serves is checked (`ValidateKubeletClientCSR`, `ValidateKubeletServingCSR` in
//!   `pkg/apis/certificates/helpers.go`; a failure is a `Failed` condition, reason
//!   `SignerValidationFailure`) and signed for `--cluster-signing-duration`, shorter if
//!   `spec.expirationSeconds` asks (never under 10 minutes).
//! - `pkg/controller/certificates/authority/authority.go`, `policies.go`: the subject and SANs
//!   of the request, key usages and EKUs from `spec.usages`, no CA, notBefore backdated 5
//!   minutes, notAfter = notBefore + TTL (now + TTL for a TTL under 8 hours), never past the
//!   CA's own notAfter.

use super::{has_true_condition, parse_request, request_pem};
use super::{KUBELET_CLIENT_SIGNER, KUBELET_SERVING_SIGNER, KUBE_APISERVER_CLIENT_SIGNER};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// kubeadm's bootstrap token group (`auth-extra-groups` of the tokens it makes), bound to
/// `nodeclient` auto-approval.
pub const KUBEADM_NODE_TOKEN_GROUP: &str = "system:bootstrappers:kubeadm:default-node-token";

/// `--cluster-signing-duration`'s default: a year.
pub const DEFAULT_SIGNING_DURATION: Duration = Duration::from_secs(8760 * 3600);

/// `Backdate` in signer.go.
const BACKDATE: Duration = Duration::from_secs(5 * 60);
/// `Short` in signer.go: certificates shorter than this are not backdated at their end.
const SHORT: Duration = Duration::from_secs(8 * 3600);

/// The CA that signs (the one the server trusts for client certificates).
pub struct Authority {
    /// rcgen's issuer: the CA's name, key identifier and key.
    pub issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Authority")
    }
}

/// What the controllers do, from [`crate::ApiServerConfig`].
#[derive(Debug, Clone)]
pub struct Controllers {
    /// csrapproving runs.
    pub auto_approve: bool,
    /// csrsigning's `--cluster-signing-duration`.
    pub signing_duration: Duration,
    /// The CA csrsigning signs with; `None`: nothing is signed.
    pub authority: Option<Arc<Authority>>,
}

impl Default for Controllers {
    fn default() -> Self {
        Self {
            auto_approve: true,
            signing_duration: DEFAULT_SIGNING_DURATION,
            authority: None,
        }
    }
}

fn string_list(v: &Value) -> Vec<&str> {
    v.as_array().into_iter().flatten().filter_map(Value::as_str).collect()
}

fn first_dn(params: &rcgen::CertificateParams, ty: rcgen::DnType) -> Vec<String> {
    params
        .distinguished_name
        .iter()
        .filter(|(t, _)| **t == ty)
        .map(|(_, v)| match v {
            rcgen::DnValue::PrintableString(s) => s.as_str().to_string(),
            rcgen::DnValue::Utf8String(s) => s.clone(),
            other => format!("{other:?}"),
        })
        .collect()
}

/// The subject's CN and O list.
pub fn subject(params: &rcgen::CertificateParams) -> (String, Vec<String>) {
    let cn = first_dn(params, rcgen::DnType::CommonName)
        .into_iter()
        .next()
        .unwrap_or_default();
    (cn, first_dn(params, rcgen::DnType::OrganizationName))
}

/// Why a signer refuses a request (`pkg/apis/certificates/helpers.go`
/// `ValidateKubeletClientCSR`, `ValidateKubeletServingCSR`; signer.go
/// `validAPIServerClientUsages`): the `SignerValidationFailure` condition's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignerRefusal {
    /// O is not exactly `system:nodes`.
    #[error("subject organization is not system:nodes")]
    NotSystemNodes,
    /// CN does not name a node.
    #[error("subject common name does not begin with system:node:")]
    NotANode,
    /// A serving request without a DNS or IP name.
    #[error("DNS or IP subjectAltName is required")]
    NoDnsOrIp,
    /// A subjectAltName of a kind the signer does not allow (`DNS`, `Email`, `IP`, `URI`).
    #[error("{0} subjectAltNames are not allowed")]
    SanNotAllowed(&'static str),
    /// Serving usages other than upstream's.
    #[error("usages did not match [digital signature key encipherment server auth]")]
    ServingUsages,
    /// Client usages other than upstream's.
    #[error("usages did not match [client auth digital signature key encipherment]")]
    ClientUsages,
    /// A usage a kube-apiserver client certificate may not have.
    #[error("invalid usage for client certificate: {0}")]
    InvalidClientUsage(String),
    /// A kube-apiserver client certificate without `client auth`.
    #[error("missing required usage for client certificate: client auth")]
    MissingClientAuth,
}

/// `ValidateKubeletClientCSR`, or `ValidateKubeletServingCSR` with `serving`.
pub fn validate_kubelet_csr(
    params: &rcgen::CertificateParams,
    usages: &[&str],
    serving: bool,
) -> Result<(), SignerRefusal> {
    let (cn, orgs) = subject(params);
    if orgs != ["system:nodes"] {
        return Err(SignerRefusal::NotSystemNodes);
    }
    let sans = &params.subject_alt_names;
    let dns = sans.iter().any(|s| matches!(s, rcgen::SanType::DnsName(_)));
    let ip = sans.iter().any(|s| matches!(s, rcgen::SanType::IpAddress(_)));
    let email = sans.iter().any(|s| matches!(s, rcgen::SanType::Rfc822Name(_)));
    let uri = sans.iter().any(|s| matches!(s, rcgen::SanType::URI(_)));
    let mut set: Vec<&str> = usages.to_vec();
    set.sort_unstable();
    set.dedup();
    if serving {
        if !dns && !ip {
            return Err(SignerRefusal::NoDnsOrIp);
        }
        if email {
            return Err(SignerRefusal::SanNotAllowed("Email"));
        }
        if uri {
            return Err(SignerRefusal::SanNotAllowed("URI"));
        }
        if set != ["digital signature", "key encipherment", "server auth"]
            && set != ["digital signature", "server auth"]
        {
            return Err(SignerRefusal::ServingUsages);
        }
        if !cn.starts_with("system:node:") {
            return Err(SignerRefusal::NotANode);
        }
        return Ok(());
    }
    for (present, kind) in [(dns, "DNS"), (email, "Email"), (ip, "IP"), (uri, "URI")] {
        if present {
            return Err(SignerRefusal::SanNotAllowed(kind));
        }
    }
    if !cn.starts_with("system:node:") {
        return Err(SignerRefusal::NotANode);
    }
    if set != ["client auth", "digital signature", "key encipherment"] && set != ["client auth", "digital signature"] {
        return Err(SignerRefusal::ClientUsages);
    }
    Ok(())
}

/// csrapproving's `handle`: the Approved condition to add to a pending CSR, if it approves it.
pub fn approval(csr: &Value) -> Option<Value> {
    let status = &csr["status"];
    if status["certificate"].as_str().is_some_and(|c| !c.is_empty())
        || super::conditions_of(csr, "Approved").len() + super::conditions_of(csr, "Denied").len() > 0
    {
        return None;
    }
    let spec = &csr["spec"];
    if spec["signerName"] != KUBELET_CLIENT_SIGNER {
        return None;
    }
    let params = parse_request(&request_pem(csr)).ok()?.params;
    validate_kubelet_csr(&params, &string_list(&spec["usages"]), false).ok()?;
    let username = spec["username"].as_str().unwrap_or_default();
    let groups = string_list(&spec["groups"]);
    let (cn, _) = subject(&params);
    // The recognizers in order: selfnodeclient, then nodeclient; each asks the authorizer.
    let message = if username == cn && groups.contains(&crate::node_authorizer::NODES_GROUP) {
        "Auto approving self kubelet client certificate after SubjectAccessReview."
    } else if groups.contains(&KUBEADM_NODE_TOKEN_GROUP) {
        "Auto approving kubelet client certificate after SubjectAccessReview."
    } else {
        return None;
    };
    Some(json!({"type": "Approved", "status": "True", "reason": "AutoApproved", "message": message}))
}

/// What csrsigning writes to an approved CSR's status.
#[derive(Debug, Clone, PartialEq)]
pub enum Signed {
    /// `status.certificate`, PEM.
    Certificate(String),
    /// A `Failed` condition.
    Failed(Value),
}

/// csrsigning's `handle`: `None` when it leaves the CSR alone.
pub fn sign(controllers: &Controllers, csr: &Value, serial: [u8; 16]) -> Option<Signed> {
    let authority = controllers.authority.as_ref()?;
    if !has_true_condition(csr, "Approved")
        || has_true_condition(csr, "Failed")
        || csr["status"]["certificate"].as_str().is_some_and(|c| !c.is_empty())
    {
        return None;
    }
    let spec = &csr["spec"];
    let signer = spec["signerName"].as_str().unwrap_or_default();
    let usages = string_list(&spec["usages"]);
    let request = parse_request(&request_pem(csr)).ok()?;
    let checked = match signer {
        KUBELET_CLIENT_SIGNER => validate_kubelet_csr(&request.params, &usages, false),
        KUBELET_SERVING_SIGNER => validate_kubelet_csr(&request.params, &usages, true),
        KUBE_APISERVER_CLIENT_SIGNER => api_server_client_usages(&usages),
        _ => return None,
    };
    if let Err(refusal) = checked {
        return Some(Signed::Failed(json!({
            "type": "Failed",
            "status": "True",
            "reason": "SignerValidationFailure",
            "message": refusal.to_string(),
            "lastUpdateTime": super::now_rfc3339(),
        })));
    }
    let ttl = duration(controllers.signing_duration, spec["expirationSeconds"].as_i64());
    match certificate(authority, request, &usages, ttl, serial) {
        Ok(pem) => Some(Signed::Certificate(pem)),
        Err(e) => {
            // signer.go returns the error to its work queue (and retries); nothing is written.
            eprintln!(
                "test-apiserver: csrsigning: cannot sign {}: {e}",
                csr["metadata"]["name"]
            );
            None
        }
    }
}

/// `validAPIServerClientUsages`.
fn api_server_client_usages(usages: &[&str]) -> Result<(), SignerRefusal> {
    for u in usages {
        if !matches!(*u, "digital signature" | "key encipherment" | "client auth") {
            return Err(SignerRefusal::InvalidClientUsage(u.to_string()));
        }
    }
    if !usages.contains(&"client auth") {
        return Err(SignerRefusal::MissingClientAuth);
    }
    Ok(())
}

/// signer.go `duration`: the requested duration, within [10 min, the signing duration].
pub fn duration(certificate_ttl: Duration, expiration_seconds: Option<i64>) -> Duration {
    let Some(seconds) = expiration_seconds else {
        return certificate_ttl;
    };
    let requested = Duration::from_secs(seconds.max(0) as u64);
    if requested > certificate_ttl {
        certificate_ttl
    } else {
        requested.max(Duration::from_secs(600))
    }
}

/// policies.go `apply` then `CreateCertificate`.
fn certificate(
    authority: &Authority,
    request: rcgen::CertificateSigningRequestParams,
    usages: &[&str],
    ttl: Duration,
    serial: [u8; 16],
) -> Result<String, rcgen::Error> {
    let mut request = request;
    let params = &mut request.params;
    let now = time::OffsetDateTime::now_utc();
    let not_before = now - BACKDATE;
    params.not_before = not_before;
    params.not_after = if ttl < SHORT { now + ttl } else { not_before + ttl };
    params.serial_number = Some(rcgen::SerialNumber::from_slice(&serial));
    params.is_ca = rcgen::IsCa::ExplicitNoCa;
    params.key_usages = usages.iter().filter_map(|u| key_usage(u)).collect();
    params.key_usages.dedup();
    params.extended_key_usages = usages.iter().filter_map(|u| extended_key_usage(u)).collect();
    params.extended_key_usages.dedup();
    params.custom_extensions.clear();
    params.use_authority_key_identifier_extension = true;
    Ok(request.signed_by(&authority.issuer)?.pem())
}

/// `keyUsageDict`.
fn key_usage(usage: &str) -> Option<rcgen::KeyUsagePurpose> {
    use rcgen::KeyUsagePurpose as K;
    Some(match usage {
        "signing" | "digital signature" => K::DigitalSignature,
        "content commitment" => K::ContentCommitment,
        "key encipherment" => K::KeyEncipherment,
        "key agreement" => K::KeyAgreement,
        "data encipherment" => K::DataEncipherment,
        "cert sign" => K::KeyCertSign,
        "crl sign" => K::CrlSign,
        "encipher only" => K::EncipherOnly,
        "decipher only" => K::DecipherOnly,
        _ => return None,
    })
}

/// `extKeyUsageDict` (the usages rcgen can write).
fn extended_key_usage(usage: &str) -> Option<rcgen::ExtendedKeyUsagePurpose> {
    use rcgen::ExtendedKeyUsagePurpose as E;
    Some(match usage {
        "any" => E::Any,
        "server auth" => E::ServerAuth,
        "client auth" => E::ClientAuth,
        "code signing" => E::CodeSigning,
        "email protection" | "s/mime" => E::EmailProtection,
        "timestamping" => E::TimeStamping,
        "ocsp signing" => E::OcspSigning,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// signer.go `duration`: expirationSeconds shortens, never lengthens, never under 10 min.
    #[test]
    fn requested_durations_are_clamped_as_signer_go_clamps_them() {
        let year = DEFAULT_SIGNING_DURATION;
        assert_eq!(duration(year, None), year);
        assert_eq!(duration(year, Some(3600)), Duration::from_secs(3600));
        assert_eq!(duration(year, Some(60)), Duration::from_secs(600));
        assert_eq!(duration(Duration::from_secs(30), Some(3600)), Duration::from_secs(30));
    }
}
