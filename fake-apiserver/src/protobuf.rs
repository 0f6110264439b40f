//! Request bodies in kube-apiserver's protobuf encoding, as kubectl's typed clients send them
//! (`kubectl create secret generic …`, `kubectl create configmap …`): the magic `k8s\0`, then a
//! `runtime.Unknown` carrying the apiVersion, kind and the object's own protobuf bytes.
//!
//! Decoded with the kube-rs project's generated types (k8s-pb) into the JSON the rest of the
//! fixture handles, so validation is the same for every encoding. Only the kinds a node reads and
//! kubectl creates imperatively are understood; others get 415 as from a server that cannot
//! decode them. Responses are always JSON (clients accept it beside protobuf).

use base64::Engine as _;
use k8s_pb::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_pb::apimachinery::pkg::runtime::Unknown;
use prost::Message as _;
use serde_json::{json, Map, Value};

use super::error::ApiError;
use super::resources::ResourceInfo;

/// The media type.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

const MAGIC: &[u8] = b"k8s\0";

/// The object in `body` (a request to `resource`), as JSON. A body without the envelope is the
/// unrecognized-object 400 kube-apiserver's protobuf serializer leads to; an object that does
/// not decode is `<Kind> in version "<v>" cannot be handled as a <Kind>`.
pub fn decode(resource: &ResourceInfo, body: &[u8]) -> Result<Value, ApiError> {
    let envelope = body.strip_prefix(MAGIC).ok_or_else(|| {
        unrecognized(
            resource,
            "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]",
            body,
        )
    })?;
    let unknown = Unknown::decode(envelope).map_err(|e| unrecognized(resource, &e.to_string(), body))?;
    let type_meta = unknown.type_meta.unwrap_or_default();
    let (api_version, kind) = (
        type_meta.api_version.unwrap_or_default(),
        type_meta.kind.unwrap_or_default(),
    );
    let raw = unknown.raw.unwrap_or_default();
    let version = api_version.rsplit('/').next().unwrap_or_default().to_string();
    let bad = |e: prost::DecodeError| {
        ApiError::bad_request(format!(
            "{kind} in version \"{version}\" cannot be handled as a {kind}: {e}"
        ))
    };
    let b64 = |bytes: &[u8]| Value::from(base64::engine::general_purpose::STANDARD.encode(bytes));
    let mut object = Map::new();
    object.insert("apiVersion".into(), Value::from(api_version.clone()));
    object.insert("kind".into(), Value::from(kind.clone()));
    match (api_version.as_str(), kind.as_str()) {
        ("v1", "Secret") => {
            let s = k8s_pb::api::core::v1::Secret::decode(raw.as_slice()).map_err(bad)?;
            object.insert("metadata".into(), metadata(s.metadata.unwrap_or_default()));
            put(&mut object, "type", s.r#type.map(Value::from));
            put(&mut object, "immutable", s.immutable.map(Value::from));
            let data: Map<String, Value> = s.data.iter().map(|(k, v)| (k.clone(), b64(v))).collect();
            put(&mut object, "data", (!data.is_empty()).then_some(Value::Object(data)));
            put(
                &mut object,
                "stringData",
                (!s.string_data.is_empty()).then(|| json!(s.string_data)),
            );
        }
        ("v1", "ConfigMap") => {
            let c = k8s_pb::api::core::v1::ConfigMap::decode(raw.as_slice()).map_err(bad)?;
            object.insert("metadata".into(), metadata(c.metadata.unwrap_or_default()));
            put(&mut object, "immutable", c.immutable.map(Value::from));
            put(&mut object, "data", (!c.data.is_empty()).then(|| json!(c.data)));
            let binary: Map<String, Value> = c.binary_data.iter().map(|(k, v)| (k.clone(), b64(v))).collect();
            put(
                &mut object,
                "binaryData",
                (!binary.is_empty()).then_some(Value::Object(binary)),
            );
        }
        ("v1", "ServiceAccount") => {
            // `kubectl create serviceaccount`.
            let a = k8s_pb::api::core::v1::ServiceAccount::decode(raw.as_slice()).map_err(bad)?;
            object.insert("metadata".into(), metadata(a.metadata.unwrap_or_default()));
            put(
                &mut object,
                "automountServiceAccountToken",
                a.automount_service_account_token.map(Value::from),
            );
            let names = |refs: Vec<Option<String>>| -> Option<Value> {
                let refs: Vec<Value> = refs
                    .into_iter()
                    .map(|n| json!({"name": n.unwrap_or_default()}))
                    .collect();
                (!refs.is_empty()).then(|| Value::from(refs))
            };
            put(
                &mut object,
                "imagePullSecrets",
                names(a.image_pull_secrets.into_iter().map(|r| r.name).collect()),
            );
            put(
                &mut object,
                "secrets",
                names(a.secrets.into_iter().map(|r| r.name).collect()),
            );
        }
        ("v1", "Namespace") => {
            // `kubectl create namespace`.
            let n = k8s_pb::api::core::v1::Namespace::decode(raw.as_slice()).map_err(bad)?;
            object.insert("metadata".into(), metadata(n.metadata.unwrap_or_default()));
            let finalizers = n.spec.map(|s| s.finalizers).unwrap_or_default();
            if !finalizers.is_empty() {
                object.insert("spec".into(), json!({"finalizers": finalizers}));
            }
        }
        ("authentication.k8s.io/v1", "TokenRequest") => {
            // What `kubectl create token` sends.
            let t = k8s_pb::api::authentication::v1::TokenRequest::decode(raw.as_slice()).map_err(bad)?;
            object.insert("metadata".into(), metadata(t.metadata.unwrap_or_default()));
            let spec = t.spec.unwrap_or_default();
            let mut out = Map::new();
            put(
                &mut out,
                "audiences",
                (!spec.audiences.is_empty()).then(|| json!(spec.audiences)),
            );
            put(&mut out, "expirationSeconds", spec.expiration_seconds.map(Value::from));
            if let Some(r) = spec.bound_object_ref {
                let mut reference = Map::new();
                put(&mut reference, "kind", r.kind.map(Value::from));
                put(&mut reference, "apiVersion", r.api_version.map(Value::from));
                put(&mut reference, "name", r.name.map(Value::from));
                put(&mut reference, "uid", r.u_id.map(Value::from));
                out.insert("boundObjectRef".into(), Value::Object(reference));
            }
            object.insert("spec".into(), Value::Object(out));
        }
        ("certificates.k8s.io/v1", "CertificateSigningRequest") => {
            // `kubectl certificate approve|deny`: a PUT of the CSR to `/approval`.
            let c = k8s_pb::api::certificates::v1::CertificateSigningRequest::decode(raw.as_slice()).map_err(bad)?;
            object.insert("metadata".into(), metadata(c.metadata.unwrap_or_default()));
            object.insert("spec".into(), csr_spec(c.spec.unwrap_or_default()));
            object.insert("status".into(), csr_status(c.status.unwrap_or_default()));
        }
        _ => {
            return Err(ApiError::unsupported_media_type(format!(
                "the test API server cannot decode {api_version} {kind} from protobuf; send application/json"
            )))
        }
    }
    Ok(Value::Object(object))
}

fn csr_spec(spec: k8s_pb::api::certificates::v1::CertificateSigningRequestSpec) -> Value {
    let b64 = |bytes: &[u8]| Value::from(base64::engine::general_purpose::STANDARD.encode(bytes));
    let mut out = Map::new();
    put(&mut out, "request", spec.request.as_deref().map(b64));
    put(&mut out, "signerName", spec.signer_name.map(Value::from));
    put(&mut out, "expirationSeconds", spec.expiration_seconds.map(Value::from));
    put(
        &mut out,
        "usages",
        (!spec.usages.is_empty()).then(|| json!(spec.usages)),
    );
    put(&mut out, "username", spec.username.map(Value::from));
    put(&mut out, "uid", spec.uid.map(Value::from));
    put(
        &mut out,
        "groups",
        (!spec.groups.is_empty()).then(|| json!(spec.groups)),
    );
    Value::Object(out)
}

fn csr_status(status: k8s_pb::api::certificates::v1::CertificateSigningRequestStatus) -> Value {
    let time = |t: Option<k8s_pb::apimachinery::pkg::apis::meta::v1::Time>| {
        t.and_then(|t| t.seconds)
            .and_then(|s| jiff::Timestamp::from_second(s).ok())
            .map(|t| Value::from(t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()))
    };
    let conditions: Vec<Value> = status
        .conditions
        .into_iter()
        .map(|c| {
            let mut out = Map::new();
            put(&mut out, "type", c.r#type.map(Value::from));
            put(&mut out, "status", c.status.map(Value::from));
            put(&mut out, "reason", c.reason.map(Value::from));
            put(&mut out, "message", c.message.map(Value::from));
            put(&mut out, "lastUpdateTime", time(c.last_update_time));
            put(&mut out, "lastTransitionTime", time(c.last_transition_time));
            Value::Object(out)
        })
        .collect();
    let mut out = Map::new();
    put(
        &mut out,
        "conditions",
        (!conditions.is_empty()).then(|| json!(conditions)),
    );
    put(
        &mut out,
        "certificate",
        status
            .certificate
            .filter(|c| !c.is_empty())
            .map(|c| Value::from(base64::engine::general_purpose::STANDARD.encode(c))),
    );
    Value::Object(out)
}

/// Set `key` unless the value is absent or empty: Go clients write every string field, and the
/// API server reads an empty one as unset.
fn put(object: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    match value {
        None => {}
        Some(Value::String(s)) if s.is_empty() => {}
        Some(v) => {
            object.insert(key.to_string(), v);
        }
    }
}

/// The metadata a client may set on create.
fn metadata(m: ObjectMeta) -> Value {
    let mut out = Map::new();
    put(&mut out, "name", m.name.map(Value::from));
    put(&mut out, "generateName", m.generate_name.map(Value::from));
    put(&mut out, "namespace", m.namespace.map(Value::from));
    put(&mut out, "labels", (!m.labels.is_empty()).then(|| json!(m.labels)));
    put(
        &mut out,
        "annotations",
        (!m.annotations.is_empty()).then(|| json!(m.annotations)),
    );
    Value::Object(out)
}

/// A body whose kind cannot even be read, as create.go's `transformDecodeError` reports it
/// when it knows no kind: `the object provided is unrecognized (must be of type <Kind>): <why>
/// (<the body's first 30 bytes>)`.
pub(crate) fn unrecognized(resource: &ResourceInfo, why: &str, body: &[u8]) -> ApiError {
    const MAX: usize = 30;
    let summary = match body {
        [] => "<empty>".to_string(),
        [0, ..] => {
            let hex: Vec<String> = body.iter().take(MAX).map(|b| format!("{b:02x}")).collect();
            let more = if body.len() > MAX { " ..." } else { "" };
            format!("{}{more}", hex.join(" "))
        }
        _ if body.len() > MAX => format!("{} ...", String::from_utf8_lossy(&body[..MAX])),
        _ => String::from_utf8_lossy(body).into_owned(),
    };
    ApiError::bad_request(format!(
        "the object provided is unrecognized (must be of type {}): {why} ({summary})",
        resource.kind
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_pb::apimachinery::pkg::runtime::TypeMeta;

    fn envelope(kind: &str, raw: Vec<u8>) -> Vec<u8> {
        let unknown = Unknown {
            type_meta: Some(TypeMeta {
                api_version: Some("v1".into()),
                kind: Some(kind.into()),
            }),
            raw: Some(raw),
            content_encoding: Some(String::new()),
            content_type: Some(String::new()),
        };
        let mut body = MAGIC.to_vec();
        body.extend(unknown.encode_to_vec());
        body
    }

    /// A Secret sent as protobuf arrives as the JSON kubectl would have sent.
    #[test]
    fn a_protobuf_secret_decodes_to_json() {
        let decode = |body: &[u8]| super::decode(crate::resources::by_name("secrets").unwrap(), body);
        let secret = k8s_pb::api::core::v1::Secret {
            metadata: Some(ObjectMeta {
                name: Some("s1".into()),
                ..Default::default()
            }),
            data: [("a".to_string(), b"b".to_vec())].into(),
            r#type: Some("Opaque".into()),
            ..Default::default()
        };
        let mut unnamed = secret.clone();
        unnamed.metadata.as_mut().unwrap().generate_name = Some(String::new());
        assert_eq!(
            decode(&envelope("Secret", unnamed.encode_to_vec())).unwrap()["metadata"],
            json!({"name": "s1"}),
            "empty strings are unset"
        );
        let value = decode(&envelope("Secret", secret.encode_to_vec())).unwrap();
        assert_eq!(
            value,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1"}, "type": "Opaque", "data": {"a": "Yg=="}})
        );
        let err = decode(&envelope("Pod", Vec::new())).unwrap_err();
        assert!(format!("{err:?}").contains("Pod"), "{err:?}");
        let err = decode(b"{}").unwrap_err();
        assert_eq!(
            err.message,
            "the object provided is unrecognized (must be of type Secret): provided data does not appear to be a \
             protobuf message, expected prefix [107 56 115 0] ({})"
        );
    }
}
