//! `certificates.k8s.io/v1` CertificateSigningRequests as kube-apiserver stores them, and the
//! two kube-controller-manager controllers a kubelet's TLS bootstrap depends on
//! ([`controllers`]: csrapproving, csrsigning).
//!
//! Upstream (kubernetes/kubernetes):
//! - `pkg/registry/certificates/certificates/strategy.go`: on create the requester's name, UID
//!   and groups become `spec.username`/`uid`/`groups` and the status is emptied; an update of
//!   the object changes neither spec nor status; `/status` changes the status but not the
//!   Approved and Denied conditions; `/approval` changes only the conditions.
//! - `pkg/apis/certificates/validation/validation.go` `validateCertificateSigningRequest`,
//!   `validateConditions`, `validateCertificateSigningRequestUpdate`: the checks and texts below.
//! - `pkg/apis/certificates/helpers.go` `ParseCSR`, `ValidateKubeletClientCSR`.

pub mod controllers;

use super::error::Cause;
use super::user::TokenUser;
use base64::Engine as _;
use serde_json::{json, Value};

/// `kubernetes.io/kube-apiserver-client-kubelet`: kubelet client certificates.
pub const KUBELET_CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
/// `kubernetes.io/kubelet-serving`: kubelet serving certificates (never auto-approved).
pub const KUBELET_SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";
/// `kubernetes.io/kube-apiserver-client`: other client certificates.
pub const KUBE_APISERVER_CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client";
/// `kubernetes.io/legacy-unknown`: refused by the v1 API.
pub const LEGACY_UNKNOWN_SIGNER: &str = "kubernetes.io/legacy-unknown";

/// `allValidUsages` in validation.go, sorted as `sets.String.List()` sorts them.
const VALID_USAGES: [&str; 23] = [
    "any",
    "cert sign",
    "client auth",
    "code signing",
    "content commitment",
    "crl sign",
    "data encipherment",
    "decipher only",
    "digital signature",
    "email protection",
    "encipher only",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "key agreement",
    "key encipherment",
    "microsoft sgc",
    "netscape sgc",
    "ocsp signing",
    "s/mime",
    "server auth",
    "signing",
    "timestamping",
];

/// The request's PEM, decoded from `spec.request` (base64 in JSON).
pub fn request_pem(csr: &Value) -> Vec<u8> {
    csr["spec"]["request"]
        .as_str()
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .unwrap_or_default()
}

/// Why `spec.request` is not a usable request (the texts of `ParseCSR` and Go's x509).
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// No `CERTIFICATE REQUEST` PEM block.
    #[error("PEM block type must be CERTIFICATE REQUEST")]
    NotARequest,
    /// `CheckSignature` failed.
    #[error("x509: ECDSA verification failure")]
    BadSignature,
    /// rcgen cannot read the request.
    #[error("x509: {0}")]
    Unreadable(#[source] rcgen::Error),
}

/// `ParseCSR` then `CheckSignature`: the request as rcgen reads it, or upstream's reason.
pub fn parse_request(pem: &[u8]) -> Result<rcgen::CertificateSigningRequestParams, RequestError> {
    let text = std::str::from_utf8(pem).unwrap_or_default();
    let block = text.find("-----BEGIN CERTIFICATE REQUEST-----").and_then(|start| {
        text[start..]
            .find("-----END CERTIFICATE REQUEST-----")
            .map(|end| (start, end))
    });
    let Some((start, end)) = block else {
        return Err(RequestError::NotARequest);
    };
    let block = &text[start..start + end + "-----END CERTIFICATE REQUEST-----".len()];
    rcgen::CertificateSigningRequestParams::from_pem(block).map_err(|e| match e {
        rcgen::Error::InvalidCertificationRequestSignature => RequestError::BadSignature,
        other => RequestError::Unreadable(other),
    })
}

/// Go's `%#v` of a `[]byte`, as `field.Invalid` prints `spec.request`.
fn go_bytes(bytes: &[u8]) -> String {
    let items: Vec<String> = bytes.iter().map(|b| format!("0x{b:x}")).collect();
    format!("[]byte{{{}}}", items.join(", "))
}

/// The create and update checks of `validateCertificateSigningRequest` (and, on update, those
/// of `validateCertificateSigningRequestUpdate` that apply to every subresource).
pub fn validate(obj: &Value, old: Option<&Value>, causes: &mut Vec<Cause>) {
    let spec = &obj["spec"];
    let pem = request_pem(obj);
    if let Err(why) = parse_request(&pem) {
        causes.push(Cause::invalid_rendered(
            "spec.request",
            &go_bytes(&pem),
            &why.to_string(),
        ));
    }
    let usages: Vec<&str> = spec["usages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if usages.is_empty() {
        causes.push(Cause::required("spec.usages", ""));
    }
    for (i, usage) in usages.iter().enumerate() {
        if !VALID_USAGES.contains(usage) {
            causes.push(Cause::unsupported(
                format!("spec.usages[{i}]"),
                &json!(usage),
                &VALID_USAGES,
            ));
        }
        if usages[..i].contains(usage) {
            causes.push(Cause::duplicate(format!("spec.usages[{i}]"), &format!("{usage:?}")));
        }
    }
    validate_signer_name(spec["signerName"].as_str().unwrap_or_default(), causes);
    if let Some(seconds) = spec["expirationSeconds"].as_i64().filter(|s| *s < 600) {
        causes.push(Cause::invalid(
            "spec.expirationSeconds",
            &json!(seconds),
            "may not specify a duration less than 600 seconds (10 minutes)",
        ));
    }
    validate_conditions(obj, causes);
    if let Some(old) = old {
        for t in ["Approved", "Denied", "Failed"] {
            if conditions_of(obj, t).len() < conditions_of(old, t).len() {
                causes.push(Cause::forbidden(
                    "status.conditions",
                    &format!("updates may not remove a condition of type {t:?}"),
                ));
            }
        }
        let (new_cert, old_cert) = (&obj["status"]["certificate"], &old["status"]["certificate"]);
        if new_cert != old_cert && old_cert.as_str().is_some_and(|c| !c.is_empty()) {
            causes.push(Cause::forbidden(
                "status.certificate",
                "updates may not modify existing certificate content",
            ));
        }
    }
}

/// `ValidateSignerName` (`pkg/apis/core/validation/validation.go`), its main rules.
fn validate_signer_name(name: &str, causes: &mut Vec<Cause>) {
    if name.is_empty() {
        causes.push(Cause::required("spec.signerName", ""));
    } else if name == LEGACY_UNKNOWN_SIGNER {
        causes.push(Cause::invalid(
            "spec.signerName",
            &json!(name),
            "the legacy signerName is not allowed via this API version",
        ));
    } else if name.split('/').count() < 2 || name.starts_with('/') || name.ends_with('/') {
        causes.push(Cause::invalid(
            "spec.signerName",
            &json!(name),
            "must be a fully qualified domain and path of the form 'example.com/signer-name'",
        ));
    }
}

/// `validateConditions`: a type, a status (`True` only for Approved, Denied, Failed), not both
/// Approved and Denied, no type twice.
fn validate_conditions(obj: &Value, causes: &mut Vec<Cause>) {
    let conditions = obj["status"]["conditions"].as_array().cloned().unwrap_or_default();
    let mut seen: Vec<&str> = Vec::new();
    let (mut approved, mut denied) = (false, false);
    for (i, c) in conditions.iter().enumerate() {
        let t = c["type"].as_str().unwrap_or_default();
        if t.is_empty() {
            causes.push(Cause::required(format!("status.conditions[{i}].type"), ""));
        }
        let true_only = matches!(t, "Approved" | "Denied" | "Failed");
        match c["status"].as_str().unwrap_or_default() {
            "" => causes.push(Cause::required(format!("status.conditions[{i}].status"), "")),
            "True" => {}
            "False" | "Unknown" if !true_only => {}
            other => {
                let allowed: &[&str] = if true_only {
                    &["True"]
                } else {
                    &["False", "True", "Unknown"]
                };
                causes.push(Cause::unsupported(
                    format!("status.conditions[{i}].status"),
                    &json!(other),
                    allowed,
                ));
            }
        }
        approved |= t == "Approved";
        denied |= t == "Denied";
        if (t == "Approved" && denied) || (t == "Denied" && approved) {
            causes.push(Cause::invalid(
                "status.conditions",
                &json!(t),
                "Approved and Denied conditions are mutually exclusive",
            ));
        }
        if seen.contains(&t) {
            causes.push(Cause::duplicate(
                format!("status.conditions[{i}].type"),
                &format!("{t:?}"),
            ));
        }
        seen.push(t);
    }
}

/// The conditions of type `t`.
pub fn conditions_of<'a>(csr: &'a Value, t: &str) -> Vec<&'a Value> {
    csr["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["type"] == t)
        .collect()
}

fn conditions_of_any(csr: &Value) -> impl Iterator<Item = &Value> {
    csr["status"]["conditions"].as_array().into_iter().flatten()
}

/// Whether a condition of type `t` is `True` (`HasTrueCondition`).
pub fn has_true_condition(csr: &Value, t: &str) -> bool {
    conditions_of(csr, t).iter().any(|c| c["status"] == "True")
}

/// `PrepareForCreate`: the requester fills `spec.username`, `uid`, `groups` and `extra`
/// (whatever the body said); the status starts empty.
pub fn prepare_for_create(obj: &mut Value, user: Option<&TokenUser>) {
    if let Value::Object(spec) = &mut obj["spec"] {
        for field in ["username", "uid", "groups", "extra"] {
            spec.remove(field);
        }
        if let Some(user) = user {
            spec.insert("username".into(), json!(user.name));
            if !user.uid.is_empty() {
                spec.insert("uid".into(), json!(user.uid));
            }
            let mut groups = user.groups.clone();
            if !groups.iter().any(|g| g == "system:authenticated") {
                groups.push("system:authenticated".into());
            }
            spec.insert("groups".into(), json!(groups));
        }
    }
    obj["status"] = json!({});
}

/// The `PrepareForUpdate` of the strategy for `sub`: the main resource keeps spec and status,
/// `/status` keeps the spec and the Approved and Denied conditions, `/approval` keeps the spec and all of the status
/// but the conditions. New conditions get their times (`populateConditionTimestamps`).
pub fn prepare_for_update(sub: super::lookup::Subresource, old: &Value, new: &mut Value) {
    use super::lookup::Subresource;
    new["spec"] = old["spec"].clone();
    match sub {
        Subresource::Main | Subresource::EphemeralContainers => new["status"] = old["status"].clone(),
        Subresource::Status => {
            // The Approved and Denied conditions as stored, the others (Failed) as sent.
            let approval = |c: &&Value| matches!(c["type"].as_str(), Some("Approved" | "Denied"));
            let mut conditions: Vec<Value> = conditions_of_any(old).filter(approval).cloned().collect();
            conditions.extend(conditions_of_any(new).filter(|c| !approval(c)).cloned());
            new["status"]["conditions"] = if conditions.is_empty() {
                Value::Null
            } else {
                json!(conditions)
            };
        }
        Subresource::Approval => {
            let conditions = new["status"]["conditions"].clone();
            new["status"] = old["status"].clone();
            new["status"]["conditions"] = conditions;
        }
    }
    if new["status"]["conditions"].is_null() {
        if let Value::Object(status) = &mut new["status"] {
            status.remove("conditions");
        }
    }
    let now = now_rfc3339();
    if let Some(conditions) = new["status"]["conditions"].as_array_mut() {
        for c in conditions {
            for field in ["lastUpdateTime", "lastTransitionTime"] {
                if c[field].is_null() {
                    c[field] = json!(now);
                }
            }
        }
    }
}

/// Now, as the API server writes times (`metav1.Time`: seconds, UTC).
pub fn now_rfc3339() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}
