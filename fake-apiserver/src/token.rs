//! Service account tokens as kube-apiserver issues them: `POST
//! /api/v1/namespaces/<ns>/serviceaccounts/<name>/token` (an `authentication.k8s.io/v1`
//! TokenRequest) answered with a JWT signed by a key made up at start, with upstream's claims
//! (`pkg/serviceaccount/claims.go`) and checks (`pkg/registry/core/serviceaccount/storage/token.go`),
//! and the validation of such a token (`pkg/serviceaccount` validator): signature, issuer, time,
//! and that the service account and bound objects still exist with the same UIDs.

use super::error::{ApiError, Cause};
use super::resources;
use super::store::{now_rfc3339, Store, WriteOptions};
use super::validate::{self, FieldValidation};
use base64::Engine as _;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::Digest as _;
use std::io;

/// `iss` of the tokens, and the API server's own audience (what kubeadm configures:
/// `--service-account-issuer=https://kubernetes.default.svc.cluster.local`).
pub const SERVICE_ACCOUNT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// The expiration the ServiceAccount admission plugin asks for in kube-api-access volumes
/// (`WarnOnlyBoundTokenExpirationSeconds`): a pod-bound request for it gets a token valid for
/// a year, with `warnafter` at the requested time.
pub const WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS: i64 = 3607;

/// How long such an extended token is valid (`ExpirationExtensionSeconds`).
pub const EXPIRATION_EXTENSION_SECONDS: i64 = 24 * 365 * 60 * 60;

/// A name and UID in the `kubernetes.io` claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ObjectRef {
    /// `name`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// `uid`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
}

/// The private `kubernetes.io` claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct KubernetesClaims {
    /// The service account's namespace.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// The service account.
    pub serviceaccount: ObjectRef,
    /// The pod the token is bound to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<ObjectRef>,
    /// The secret the token is bound to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<ObjectRef>,
    /// The node the token is bound to, or the node of the bound pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<ObjectRef>,
    /// For extended kube-api-access tokens: when the requested expiration passes (Unix seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warnafter: Option<i64>,
}

/// The claims of a service account token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceAccountClaims {
    /// Issuer ([`SERVICE_ACCOUNT_ISSUER`]).
    pub iss: String,
    /// `system:serviceaccount:<namespace>:<name>`.
    pub sub: String,
    /// Audiences.
    pub aud: Vec<String>,
    /// Expiry (Unix seconds).
    pub exp: i64,
    /// Issued at (Unix seconds).
    pub iat: i64,
    /// Not before (Unix seconds).
    pub nbf: i64,
    /// Token id (a UUID).
    pub jti: String,
    /// The `kubernetes.io` claim.
    #[serde(rename = "kubernetes.io")]
    pub kubernetes: KubernetesClaims,
}

/// Why a token does not verify, in the words of kube-apiserver's service account
/// authenticator (`pkg/serviceaccount/jwt.go` and the validator in `claims.go`).
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// Not signed by this server's key (go-jose's words).
    #[error("go-jose/go-jose: error in cryptographic primitive")]
    Signature(#[source] jsonwebtoken::errors::Error),
    /// Not a JWT of this issuer with the claims a service account token has.
    #[error("invalid service account token: {0}")]
    Jwt(#[from] jsonwebtoken::errors::Error),
    /// `exp` has passed (with go-jose's minute of leeway).
    #[error("service account token has expired")]
    Expired,
    /// `nbf` or `iat` are in the future.
    #[error("service account token could not be validated")]
    NotYetValid,
    /// None of the audiences asked for is the token's.
    #[error("token audiences {token} is invalid for the target audiences {target}")]
    Audience {
        /// The token's audiences, as Go prints a `[]string` with `%q`.
        token: String,
        /// The audiences asked for, likewise.
        target: String,
    },
    /// The service account or a bound object is gone or was replaced (upstream's messages).
    #[error("{0}")]
    Invalidated(String),
}

/// Go's `%q` of a `[]string`: `["a" "b"]`.
pub fn go_quoted_list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|a| format!("{a:?}")).collect();
    format!("[{}]", quoted.join(" "))
}

/// go-jose's `jwt.DefaultLeeway`.
const LEEWAY_SECONDS: i64 = 60;

/// One token the server issued (for tests: what was asked, what was answered).
#[derive(Debug, Clone)]
pub struct IssuedToken {
    /// The service account's namespace.
    pub namespace: String,
    /// The service account's name.
    pub service_account: String,
    /// The TokenRequest answered (with `status.token` and `status.expirationTimestamp`).
    pub response: Value,
    /// The token's claims.
    pub claims: ServiceAccountClaims,
}

/// The signing key (ECDSA P-256, ES256) and its key id.
pub(crate) struct Issuer {
    encoding: EncodingKey,
    decoding: DecodingKey,
    kid: String,
    /// The public key's point, uncompressed (`04 || x || y`), for the JWKS.
    point: Vec<u8>,
}

impl Issuer {
    /// A key made up now.
    pub(crate) fn new() -> io::Result<Self> {
        let key = rcgen::KeyPair::generate()
            .map_err(|e| io::Error::other(format!("cannot make the service account signing key: {e}")))?;
        // Like kube-apiserver's key id: the unpadded base64url SHA-256 of the public key (DER).
        use rcgen::PublicKeyData as _;
        let spki = key.subject_public_key_info();
        let kid = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(&spki));
        Ok(Self {
            encoding: EncodingKey::from_ec_der(&key.serialize_der()),
            decoding: DecodingKey::from_ec_der(key.public_key_raw()),
            kid,
            point: key.public_key_raw().to_vec(),
        })
    }

    /// `/.well-known/openid-configuration`, as kube-apiserver serves it for its issuer, with
    /// the key set at `<server url>/openid/v1/jwks` (its default: the external address).
    pub(crate) fn openid_configuration(&self, server_url: &str) -> Value {
        json!({
            "issuer": SERVICE_ACCOUNT_ISSUER,
            "jwks_uri": format!("{server_url}/openid/v1/jwks"),
            "response_types_supported": ["id_token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["ES256"],
        })
    }

    /// `/openid/v1/jwks`: the signing key's public half.
    pub(crate) fn jwks(&self) -> Value {
        let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
        let (x, y) = self
            .point
            .get(1..)
            .unwrap_or_default()
            .split_at(32.min(self.point.len().saturating_sub(1)));
        json!({"keys": [{
            "use": "sig",
            "kty": "EC",
            "kid": self.kid,
            "crv": "P-256",
            "alg": "ES256",
            "x": b64(x),
            "y": b64(y),
        }]})
    }

    fn sign(&self, claims: &ServiceAccountClaims) -> Result<String, ApiError> {
        // As kube-apiserver's signer writes it: `alg` and `kid`, no `typ`.
        let mut header = Header::new(Algorithm::ES256);
        header.typ = None;
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.encoding)
            .map_err(|e| ApiError::internal(format!("failed to generate token: {e}")))
    }

    /// The claims of a token this issuer signed; time and audiences are not checked.
    pub(crate) fn decode(&self, token: &str) -> Result<ServiceAccountClaims, TokenError> {
        let mut validation = Validation::new(Algorithm::ES256);
        validation.set_issuer(&[SERVICE_ACCOUNT_ISSUER]);
        validation.validate_aud = false;
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.set_required_spec_claims(&["exp", "iss", "sub", "nbf", "iat"]);
        match jsonwebtoken::decode::<ServiceAccountClaims>(token, &self.decoding, &validation) {
            Ok(data) => Ok(data.claims),
            Err(e) if *e.kind() == jsonwebtoken::errors::ErrorKind::InvalidSignature => Err(TokenError::Signature(e)),
            Err(e) => Err(TokenError::Jwt(e)),
        }
    }

    /// Verifies a token as kube-apiserver's service account authenticator does: signature,
    /// issuer and time, then the service account (same UID) and the bound pod, secret or node
    /// still exist with the UIDs in the claims and are not being deleted.
    pub(crate) fn verify(&self, store: &Store, token: &str) -> Result<ServiceAccountClaims, TokenError> {
        let claims = self.decode(token)?;
        Self::validate(store, claims)
    }

    /// The validator's checks of decoded claims: time (a minute of leeway), then the objects.
    pub(crate) fn validate(store: &Store, claims: ServiceAccountClaims) -> Result<ServiceAccountClaims, TokenError> {
        let now = jiff::Timestamp::now().as_second();
        if now > claims.exp + LEEWAY_SECONDS {
            return Err(TokenError::Expired);
        }
        if now + LEEWAY_SECONDS < claims.nbf || now + LEEWAY_SECONDS < claims.iat {
            return Err(TokenError::NotYetValid);
        }
        let k = &claims.kubernetes;
        let ns = k.namespace.as_str();
        let get = |plural: &str, ns: &str, name: &str| {
            store
                .get(resources::by_name(plural).expect("served resource"), ns, name)
                .ok()
        };
        let uid = |obj: &Value| obj["metadata"]["uid"].as_str().unwrap_or_default().to_string();
        let deleted = |obj: &Value| obj["metadata"].get("deletionTimestamp").is_some();
        let invalidated = || TokenError::Invalidated("service account token has been invalidated".into());
        let sa = get("serviceaccounts", ns, &k.serviceaccount.name).ok_or_else(|| {
            TokenError::Invalidated(format!("serviceaccounts \"{}\" not found", k.serviceaccount.name))
        })?;
        if uid(&sa) != k.serviceaccount.uid {
            return Err(TokenError::Invalidated(format!(
                "service account UID ({}) does not match claim ({})",
                uid(&sa),
                k.serviceaccount.uid
            )));
        }
        if deleted(&sa) {
            return Err(TokenError::Invalidated(format!(
                "service account {ns}/{} has been deleted",
                k.serviceaccount.name
            )));
        }
        let bound: [(&str, &str, Option<&ObjectRef>); 2] = [
            ("secrets", "secret", k.secret.as_ref()),
            ("pods", "pod", k.pod.as_ref()),
        ];
        for (plural, what, reference) in bound {
            let Some(reference) = reference else { continue };
            let obj = get(plural, ns, &reference.name).ok_or_else(invalidated)?;
            if uid(&obj) != reference.uid {
                return Err(TokenError::Invalidated(format!(
                    "{what} UID ({}) does not match service account {what} ref claim ({})",
                    uid(&obj),
                    reference.uid
                )));
            }
            if deleted(&obj) {
                return Err(invalidated());
            }
        }
        if let (Some(node_ref), None) = (&k.node, &k.pod) {
            let node = get("nodes", "", &node_ref.name).ok_or_else(invalidated)?;
            if uid(&node) != node_ref.uid {
                return Err(TokenError::Invalidated(format!(
                    "node UID ({}) does not match service account node ref claim ({})",
                    uid(&node),
                    node_ref.uid
                )));
            }
            if deleted(&node) {
                return Err(invalidated());
            }
        }
        Ok(claims)
    }
}

const KIND: &str = "TokenRequest.authentication.k8s.io";

/// The TokenRequest body, decoded strictly through its k8s-openapi type.
fn decode_request(body: &Value, opts: &WriteOptions) -> Result<(Value, Vec<String>), ApiError> {
    fn bad(e: impl std::fmt::Display) -> ApiError {
        ApiError::bad_request(format!(
            "TokenRequest in version \"v1\" cannot be handled as a TokenRequest: {e}"
        ))
    }
    let Value::Object(map) = body else {
        return Err(bad(validate::DecodeError::NotAnObject));
    };
    let mut map = map.clone();
    for (key, want) in [("apiVersion", "authentication.k8s.io/v1"), ("kind", "TokenRequest")] {
        match map.get(key) {
            None | Some(Value::Null) => {
                map.insert(key.into(), json!(want));
            }
            Some(v) if v.as_str() == Some(want) => {}
            Some(v) => {
                return Err(ApiError::bad_request(format!(
                    "the {key} in the data ({}) does not match the expected one ({want})",
                    v.as_str().unwrap_or_default()
                )))
            }
        }
    }
    let submitted = Value::Object(map);
    let object = validate::typed::<k8s_openapi::api::authentication::v1::TokenRequest>(&submitted).map_err(bad)?;
    let mut unknown = Vec::new();
    validate::find_unknown(&submitted, &object, "", &mut unknown);
    let mut warnings = Vec::new();
    if !unknown.is_empty() {
        let fields: Vec<String> = unknown.iter().map(|f| format!("unknown field \"{f}\"")).collect();
        match opts.field_validation {
            FieldValidation::Strict => return Err(bad(format!("strict decoding error: {}", fields.join(", ")))),
            FieldValidation::Warn => warnings.extend(fields),
            FieldValidation::Ignore => {}
        }
    }
    Ok((object, warnings))
}

fn uid_of(obj: &Value) -> String {
    obj["metadata"]["uid"].as_str().unwrap_or_default().to_string()
}

/// `POST serviceaccounts/<name>/token` in `ns`: the TokenRequest answered (201), its warnings and
/// the record of the token issued.
pub(crate) fn token_request(
    store: &Store,
    issuer: &Issuer,
    ns: &str,
    name: &str,
    body: &Value,
    opts: &WriteOptions,
    jti: String,
) -> Result<(Value, Vec<String>, IssuedToken), ApiError> {
    let (mut req, mut warnings) = decode_request(body, opts)?;
    // NodeRestriction is admission: it runs before the REST handler looks anything up.
    if let Some(node) = &opts.node {
        super::node_restriction::admit_token_request(store, node, ns, name, &req)?;
    }
    let meta_name = req["metadata"]["name"].as_str().unwrap_or_default().to_string();
    if !meta_name.is_empty() && meta_name != name {
        let cause = Cause::invalid(
            "metadata.name",
            &json!(meta_name),
            "must match the service account name if specified",
        );
        return Err(ApiError::invalid(KIND, name, vec![cause]));
    }
    let meta_ns = req["metadata"]["namespace"].as_str().unwrap_or_default().to_string();
    if !meta_ns.is_empty() && meta_ns != ns {
        let cause = Cause::invalid(
            "metadata.namespace",
            &json!(meta_ns),
            "must match the service account namespace if specified",
        );
        return Err(ApiError::invalid(KIND, name, vec![cause]));
    }
    let get =
        |plural: &str, ns: &str, name: &str| store.get(resources::by_name(plural).expect("served resource"), ns, name);
    let sa = get("serviceaccounts", ns, name)?;
    let sa_uid = uid_of(&sa);
    // Defaults (authentication/v1 SetDefaults_TokenRequestSpec), then what the REST handler fills.
    let spec = &mut req["spec"];
    if spec["expirationSeconds"].is_null() {
        spec["expirationSeconds"] = json!(3600);
    }
    if spec["audiences"].as_array().is_none_or(Vec::is_empty) {
        spec["audiences"] = json!([SERVICE_ACCOUNT_ISSUER]);
    }
    req["metadata"]["name"] = json!(name);
    req["metadata"]["namespace"] = json!(ns);
    match req["metadata"]["uid"].as_str().unwrap_or_default() {
        "" => req["metadata"]["uid"] = json!(sa_uid),
        other if other != sa_uid => warnings.push(format!(
            "the UID in the token request ({other}) does not match the UID of the service account ({sa_uid}) but \
             TokenRequestServiceAccountUIDValidation is not enabled. In the future, this will return a conflict error"
        )),
        _ => {}
    }
    let now = jiff::Timestamp::now();
    req["metadata"]["creationTimestamp"] = json!(now_rfc3339());
    if let Value::Object(m) = &mut req {
        m.remove("status");
    }
    let expiration = req["spec"]["expirationSeconds"].as_i64().unwrap_or(3600);
    if expiration < 600 {
        let cause = Cause::invalid(
            "spec.expirationSeconds",
            &json!(expiration),
            "may not specify a duration less than 10 minutes",
        );
        return Err(ApiError::invalid(KIND, "", vec![cause]));
    }
    if expiration > 1 << 32 {
        let cause = Cause::invalid(
            "spec.expirationSeconds",
            &json!(expiration),
            "may not specify a duration larger than 2^32 seconds",
        );
        return Err(ApiError::invalid(KIND, "", vec![cause]));
    }
    let audiences: Vec<String> = req["spec"]["audiences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str().map(str::to_string))
        .collect();
    let mut kubernetes = KubernetesClaims {
        namespace: ns.to_string(),
        serviceaccount: ObjectRef {
            name: name.to_string(),
            uid: sa_uid,
        },
        ..KubernetesClaims::default()
    };
    let reference = &req["spec"]["boundObjectRef"];
    if reference.is_object() {
        let api_version = reference["apiVersion"].as_str().unwrap_or_default();
        let kind = reference["kind"].as_str().unwrap_or_default();
        let ref_name = reference["name"].as_str().unwrap_or_default();
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let bound_uid = match (group, kind) {
            ("", "Pod") => {
                let pod = get("pods", ns, ref_name)?;
                if pod["spec"]["serviceAccountName"].as_str().unwrap_or_default() != name {
                    return Err(ApiError::bad_request(format!(
                        "cannot bind token for serviceaccount \"{name}\" to pod running with different serviceaccount name."
                    )));
                }
                let node_name = pod["spec"]["nodeName"].as_str().unwrap_or_default();
                if !node_name.is_empty() {
                    // A node that does not exist still leaves its name in the claims.
                    let node_uid = get("nodes", "", node_name).map(|n| uid_of(&n)).unwrap_or_default();
                    kubernetes.node = Some(ObjectRef {
                        name: node_name.to_string(),
                        uid: node_uid,
                    });
                }
                let uid = uid_of(&pod);
                kubernetes.pod = Some(ObjectRef {
                    name: ref_name.to_string(),
                    uid: uid.clone(),
                });
                uid
            }
            ("", "Node") => {
                let node = get("nodes", "", ref_name)?;
                let uid = uid_of(&node);
                kubernetes.node = Some(ObjectRef {
                    name: ref_name.to_string(),
                    uid: uid.clone(),
                });
                uid
            }
            ("", "Secret") => {
                let secret = get("secrets", ns, ref_name)?;
                let uid = uid_of(&secret);
                kubernetes.secret = Some(ObjectRef {
                    name: ref_name.to_string(),
                    uid: uid.clone(),
                });
                uid
            }
            _ => {
                return Err(ApiError::bad_request(format!(
                    "cannot bind token to object of type {group}/{version}, Kind={kind}"
                )))
            }
        };
        let want = reference["uid"].as_str().unwrap_or_default();
        if !want.is_empty() && want != bound_uid {
            return Err(ApiError::conflict_because(
                kind,
                ref_name,
                &format!(
                    "the UID in the bound object reference ({want}) does not match the UID in record. The object \
                     might have been deleted and then recreated"
                ),
            ));
        }
    }
    // Pod-bound tokens asked for with the admission plugin's 3607 s for the API server's own
    // audiences are valid for a year and carry `warnafter` (--service-account-extend-token-expiration).
    let mut exp = expiration;
    let kube_audiences = audiences.iter().all(|a| a == SERVICE_ACCOUNT_ISSUER);
    if kubernetes.pod.is_some() && expiration == WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS && kube_audiences {
        kubernetes.warnafter = Some(now.as_second() + expiration);
        exp = EXPIRATION_EXTENSION_SECONDS;
    }
    let claims = ServiceAccountClaims {
        iss: SERVICE_ACCOUNT_ISSUER.to_string(),
        sub: format!("system:serviceaccount:{ns}:{name}"),
        aud: audiences,
        exp: now.as_second() + exp,
        iat: now.as_second(),
        nbf: now.as_second(),
        jti,
        kubernetes,
    };
    let token = issuer.sign(&claims)?;
    let expires = now + jiff::SignedDuration::from_secs(expiration);
    req["status"] = json!({
        "token": token,
        "expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
    });
    let issued = IssuedToken {
        namespace: ns.to_string(),
        service_account: name.to_string(),
        response: req.clone(),
        claims,
    };
    Ok((req, warnings, issued))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::ClusterConfig;

    fn claims(exp: i64, nbf: i64) -> ServiceAccountClaims {
        ServiceAccountClaims {
            iss: SERVICE_ACCOUNT_ISSUER.into(),
            sub: "system:serviceaccount:default:default".into(),
            aud: vec![SERVICE_ACCOUNT_ISSUER.into()],
            exp,
            iat: nbf,
            nbf,
            jti: "j".into(),
            kubernetes: KubernetesClaims::default(),
        }
    }

    /// pkg/serviceaccount/claims.go Validate: past `exp` (plus go-jose's minute of leeway) is
    /// "service account token has expired", a future `nbf` "could not be validated"; both
    /// before the objects are looked at.
    #[test]
    fn expired_and_early_tokens_are_refused_in_the_validators_words() {
        let store = Store::new(10, ClusterConfig::default());
        let now = jiff::Timestamp::now().as_second();
        let expired = Issuer::validate(&store, claims(now - 61, now - 3600)).unwrap_err();
        assert_eq!(expired.to_string(), "service account token has expired");
        let early = Issuer::validate(&store, claims(now + 3600, now + 120)).unwrap_err();
        assert_eq!(early.to_string(), "service account token could not be validated");
        let fresh = Issuer::validate(&store, claims(now - 30, now - 3600)).unwrap_err();
        assert!(
            matches!(fresh, TokenError::Invalidated(_)),
            "within the leeway the account is looked up: {fresh}"
        );
    }

    /// Go's `%q` of a `[]string`, as the audience error prints it.
    #[test]
    fn audience_lists_print_as_go_quotes_them() {
        assert_eq!(go_quoted_list(&["a".into(), "b".into()]), "[\"a\" \"b\"]");
        assert_eq!(go_quoted_list(&[]), "[]");
    }
}
