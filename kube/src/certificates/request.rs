//! A node's client certificate asked of the API server: a new key, a certificate signing
//! request for `CN=system:node:<name>, O=system:nodes`, a `certificates.k8s.io/v1`
//! CertificateSigningRequest for the signer `kubernetes.io/kube-apiserver-client-kubelet`, and
//! the wait until it is approved and issued (client-go `util/certificate/csr/csr.go`
//! `RequestCertificate`, `WaitForCertificate`; kubelet's `pkg/kubelet/certificate/bootstrap/
//! bootstrap.go` `requestNodeCertificate`, `digestedName`).

use std::time::Duration;

use base64::Engine as _;
use futures::StreamExt as _;
use k8s_openapi::api::certificates::v1::{CertificateSigningRequest, CertificateSigningRequestSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::ByteString;
use kube::api::{Api, PostParams};
use kube::runtime::watcher;
use x509_parser::prelude::FromDer as _;

use super::CertError;

/// The signer of kubelets' client certificates (`certificatesv1.KubeAPIServerClientKubeletSignerName`).
pub const KUBELET_CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";

/// The usages kubelet asks for (`bootstrap.go` `requestNodeCertificate`,
/// `pkg/kubelet/certificate/kubelet.go` `NewKubeletClientCertificateManager`).
pub const CLIENT_USAGES: [&str; 3] = ["digital signature", "key encipherment", "client auth"];

/// The node's groups (`O=`).
pub const NODES_GROUP: &str = "system:nodes";

/// A key and the signing request made with it.
pub struct NodeRequest {
    /// The private key, PKCS#8 PEM.
    pub key_pem: String,
    /// The PKCS#10 request, PEM.
    pub csr_pem: String,
    /// The public key, as X.509 SubjectPublicKeyInfo DER.
    pub public_key_der: Vec<u8>,
    /// `system:node:<name>`.
    pub common_name: String,
}

impl NodeRequest {
    /// A request for `node` signed with `key_pem` (PKCS#8), or with a new ECDSA P-256 key (as
    /// client-go's `generateCSR` and `keyutil.LoadOrGenerateKeyFile`) when none is given or it
    /// cannot be read.
    pub fn new(node: &str, key_pem: Option<&str>) -> Result<Self, CertError> {
        use rcgen::PublicKeyData as _;
        let key = match key_pem.and_then(|pem| rcgen::KeyPair::from_pem(pem).ok()) {
            Some(key) => key,
            None => rcgen::KeyPair::generate().map_err(CertError::Generate)?,
        };
        let common_name = format!("system:node:{node}");
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(CertError::Generate)?;
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, NODES_GROUP);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, common_name.clone());
        let csr = params
            .serialize_request(&key)
            .and_then(|r| r.pem())
            .map_err(CertError::Generate)?;
        Ok(NodeRequest {
            key_pem: key.serialize_pem(),
            csr_pem: csr,
            public_key_der: key.subject_public_key_info(),
            common_name,
        })
    }

    /// kubelet's bootstrap CSR name, `node-csr-<digest>`: SHA-512/256 over the public key, the
    /// subject's CN and O and the usages, each base64url (unpadded) and followed by `|`
    /// (`bootstrap.go` `digestedName`). The same key asks under the same name after a restart,
    /// so a request already made is found again instead of made twice.
    pub fn digested_name(&self) -> String {
        digested_name(&self.public_key_der, &self.common_name, &[NODES_GROUP], &CLIENT_USAGES)
    }
}

/// See [`NodeRequest::digested_name`].
pub fn digested_name(public_key_der: &[u8], common_name: &str, organizations: &[&str], usages: &[&str]) -> String {
    let encode = |data: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(data);
    let mut hash = ring::digest::Context::new(&ring::digest::SHA512_256);
    let mut write = |data: &[u8]| {
        hash.update(encode(data).as_bytes());
        hash.update(b"|");
    };
    write(public_key_der);
    write(common_name.as_bytes());
    for o in organizations {
        write(o.as_bytes());
    }
    for u in usages {
        write(u.as_bytes());
    }
    format!("node-csr-{}", encode(hash.finish().as_ref()))
}

/// Creates the CSR — named `name`, or `csr-<random>` (`generateName`) — and returns its name
/// and UID. A named request that exists already is reused when it asks for the same key,
/// subject and signer (client-go `RequestCertificate`, `ensureCompatible`), refused otherwise.
pub async fn create(
    client: &kube::Client,
    request: &NodeRequest,
    name: Option<&str>,
) -> Result<(String, String), CertError> {
    let api: Api<CertificateSigningRequest> = Api::all(client.clone());
    let csr = CertificateSigningRequest {
        metadata: ObjectMeta {
            name: name.map(str::to_string),
            generate_name: name.is_none().then(|| "csr-".to_string()),
            ..Default::default()
        },
        spec: CertificateSigningRequestSpec {
            request: ByteString(request.csr_pem.clone().into_bytes()),
            signer_name: KUBELET_CLIENT_SIGNER.to_string(),
            usages: Some(CLIENT_USAGES.iter().map(|u| u.to_string()).collect()),
            ..Default::default()
        },
        status: None,
    };
    let made = match api.create(&PostParams::default(), &csr).await {
        Ok(made) => made,
        Err(kube::Error::Api(status)) if status.code == 409 && name.is_some() => {
            let name = name.unwrap_or_default();
            let found = api.get(name).await.map_err(|source| CertError::Api {
                operation: format!("get certificatesigningrequest {name}"),
                source,
            })?;
            ensure_compatible(&found, request)?;
            found
        }
        Err(source) => {
            return Err(CertError::Api {
                operation: "create certificatesigningrequest".into(),
                source,
            })
        }
    };
    let made_name = made.metadata.name.clone().unwrap_or_default();
    Ok((made_name, made.metadata.uid.clone().unwrap_or_default()))
}

/// A CSR found under our name must be for our key and subject and our signer.
fn ensure_compatible(found: &CertificateSigningRequest, ours: &NodeRequest) -> Result<(), CertError> {
    let name = found.metadata.name.clone().unwrap_or_default();
    let incompatible = |why: &str| CertError::Incompatible {
        name: name.clone(),
        reason: why.to_string(),
    };
    if found.spec.signer_name != KUBELET_CLIENT_SIGNER {
        return Err(incompatible("a different signerName"));
    }
    let pem = String::from_utf8_lossy(&found.spec.request.0);
    let der = x509_parser::pem::Pem::iter_from_buffer(pem.as_bytes())
        .filter_map(Result::ok)
        .find(|p| p.label == "CERTIFICATE REQUEST")
        .map(|p| p.contents)
        .ok_or_else(|| incompatible("no CERTIFICATE REQUEST block"))?;
    let (_, parsed) = x509_parser::certification_request::X509CertificationRequest::from_der(&der)
        .map_err(|e| incompatible(&format!("its request cannot be parsed: {e}")))?;
    let info = &parsed.certification_request_info;
    if info.subject_pki.raw != ours.public_key_der.as_slice() {
        return Err(incompatible("a different public key"));
    }
    let cn = info.subject.iter_common_name().next().and_then(|a| a.as_str().ok());
    if cn != Some(ours.common_name.as_str()) {
        return Err(incompatible("a different subject"));
    }
    Ok(())
}

/// Waits until the CSR `name` (of `uid`) is approved and has its certificate, and returns it
/// (PEM); a denied or failed request, one deleted or replaced, or `timeout` ends the wait with
/// an error (client-go `WaitForCertificate`: kubelet waits 3600 s at bootstrap, 15 min at a
/// rotation).
pub async fn wait_for_certificate(
    client: &kube::Client,
    name: &str,
    uid: &str,
    timeout: Duration,
) -> Result<String, CertError> {
    let api: Api<CertificateSigningRequest> = Api::all(client.clone());
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = std::pin::pin!(watcher::watcher(api, config));
    let wait = async {
        let mut announced = false;
        while let Some(event) = events.next().await {
            let csr = match event {
                Ok(watcher::Event::Apply(csr) | watcher::Event::InitApply(csr)) => csr,
                Ok(watcher::Event::Delete(_)) => return Err(CertError::Deleted { name: name.to_string() }),
                Ok(_) => continue,
                Err(e) => {
                    tracing::info!(csr = name, error = %e, "watching the certificate signing request failed; retrying");
                    continue;
                }
            };
            if csr.metadata.uid.as_deref().unwrap_or_default() != uid {
                return Err(CertError::Deleted { name: name.to_string() });
            }
            match outcome(&csr) {
                Outcome::Issued(pem) => return Ok(pem),
                Outcome::Refused(e) => return Err(e),
                Outcome::Approved if !announced => {
                    announced = true;
                    tracing::info!(
                        csr = name,
                        "certificate signing request is approved, waiting to be issued"
                    );
                }
                _ => {}
            }
        }
        Err(CertError::Deleted { name: name.to_string() })
    };
    tokio::time::timeout(timeout, wait).await.unwrap_or_else(|_| {
        Err(CertError::Timeout {
            name: name.to_string(),
            after: timeout,
        })
    })
}

/// Where a CSR stands.
#[derive(Debug)]
pub(crate) enum Outcome {
    Pending,
    Approved,
    Issued(String),
    Refused(CertError),
}

/// client-go's reading of a CSR's status: Denied or Failed end it; Approved with a
/// certificate is done.
pub(crate) fn outcome(csr: &CertificateSigningRequest) -> Outcome {
    let name = csr.metadata.name.clone().unwrap_or_default();
    let status = csr.status.clone().unwrap_or_default();
    let mut approved = false;
    for c in status.conditions.iter().flatten() {
        let (reason, message) = (
            c.reason.clone().unwrap_or_default(),
            c.message.clone().unwrap_or_default(),
        );
        match c.type_.as_str() {
            "Denied" => return Outcome::Refused(CertError::Denied { name, reason, message }),
            "Failed" => return Outcome::Refused(CertError::Failed { name, reason, message }),
            "Approved" => approved = true,
            _ => {}
        }
    }
    match status.certificate {
        Some(cert) if approved && !cert.0.is_empty() => Outcome::Issued(String::from_utf8_lossy(&cert.0).into_owned()),
        _ if approved => Outcome::Approved,
        _ => Outcome::Pending,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::certificates::v1::{CertificateSigningRequestCondition, CertificateSigningRequestStatus};

    #[test]
    fn the_request_is_for_the_node_and_its_name_is_stable_for_its_key() {
        let first = NodeRequest::new("n1", None).unwrap();
        let der = x509_parser::pem::parse_x509_pem(first.csr_pem.as_bytes())
            .unwrap()
            .1
            .contents;
        let (_, csr) = x509_parser::certification_request::X509CertificationRequest::from_der(&der).unwrap();
        let subject = &csr.certification_request_info.subject;
        assert_eq!(subject.to_string(), "O=system:nodes, CN=system:node:n1");
        assert_eq!(
            csr.certification_request_info.subject_pki.raw,
            first.public_key_der.as_slice()
        );
        let again = NodeRequest::new("n1", Some(&first.key_pem)).unwrap();
        assert_eq!(again.digested_name(), first.digested_name());
        assert_ne!(
            again.csr_pem, first.csr_pem,
            "ECDSA signatures differ; the name does not"
        );
        let other = NodeRequest::new("n1", None).unwrap();
        assert_ne!(other.digested_name(), first.digested_name());
        let name = first.digested_name();
        // node-csr- + base64url(32 bytes) = 43 characters.
        assert!(name.starts_with("node-csr-") && name.len() == 9 + 43, "{name}");
    }

    /// The digest's framing as `digestedName` writes it: each part base64url'd, then `|`; a
    /// CN/O split differently gives another name.
    #[test]
    fn the_digest_separates_its_parts() {
        let a = digested_name(b"k", "system:node:foo", &["bar"], &["client auth"]);
        let b = digested_name(b"k", "system:node:foob", &["ar"], &["client auth"]);
        assert_ne!(a, b);
        let mut hash = ring::digest::Context::new(&ring::digest::SHA512_256);
        hash.update(b"aw|c3lzdGVtOm5vZGU6Zm9v|YmFy|Y2xpZW50IGF1dGg|");
        let expected = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(hash.finish().as_ref());
        assert_eq!(a, format!("node-csr-{expected}"));
    }

    fn csr(conditions: &[(&str, &str)], cert: Option<&str>) -> CertificateSigningRequest {
        CertificateSigningRequest {
            metadata: ObjectMeta {
                name: Some("node-csr-x".into()),
                ..Default::default()
            },
            spec: Default::default(),
            status: Some(CertificateSigningRequestStatus {
                certificate: cert.map(|c| ByteString(c.as_bytes().to_vec())),
                conditions: Some(
                    conditions
                        .iter()
                        .map(|(t, r)| CertificateSigningRequestCondition {
                            type_: t.to_string(),
                            status: "True".into(),
                            reason: Some(r.to_string()),
                            message: Some(format!("{r} it")),
                            ..Default::default()
                        })
                        .collect(),
                ),
            }),
        }
    }

    #[test]
    fn a_csr_is_done_when_approved_and_issued_and_over_when_denied_or_failed() {
        assert!(matches!(outcome(&csr(&[], None)), Outcome::Pending));
        assert!(matches!(outcome(&csr(&[], Some("PEM"))), Outcome::Pending));
        assert!(matches!(
            outcome(&csr(&[("Approved", "AutoApproved")], None)),
            Outcome::Approved
        ));
        assert!(
            matches!(outcome(&csr(&[("Approved", "AutoApproved")], Some("PEM"))), Outcome::Issued(p) if p == "PEM")
        );
        let Outcome::Refused(denied) = outcome(&csr(&[("Denied", "NotYou")], None)) else {
            panic!("not refused")
        };
        assert_eq!(
            denied.to_string(),
            "certificate signing request node-csr-x is denied, reason: NotYou, message: NotYou it"
        );
        let Outcome::Refused(failed) = outcome(&csr(&[("Approved", "A"), ("Failed", "SignerValidationFailure")], None))
        else {
            panic!("not refused")
        };
        assert!(
            failed.to_string().contains("failed, reason: SignerValidationFailure"),
            "{failed}"
        );
    }
}
