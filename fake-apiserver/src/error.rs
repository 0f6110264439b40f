//! Errors as kube-apiserver reports them: a `v1 Status` with code, reason and message.

use serde_json::{json, Value};

/// A failed request, rendered as a `Status` object.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// `Status.reason` (`NotFound`, `Conflict`, `Invalid`, ...).
    pub reason: &'static str,
    /// `Status.message`.
    pub message: String,
    /// `Status.details`, if any.
    pub details: Option<Value>,
    /// `Status.metadata.continue`: where a list whose continue token expired may go on
    /// (kube-apiserver's 410 for a compacted continue token carries one).
    pub list_continue: Option<String>,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
            list_continue: None,
        }
    }

    fn with_details(mut self, name: &str, kind: &str) -> Self {
        self.details = Some(json!({"name": name, "kind": kind}));
        self
    }

    /// 404 `<plural> "<name>" not found`.
    pub fn not_found(plural: &str, name: &str) -> Self {
        Self::new(404, "NotFound", format!("{plural} \"{name}\" not found")).with_details(name, plural)
    }

    /// 409 `<plural> "<name>" already exists`.
    pub fn already_exists(plural: &str, name: &str) -> Self {
        Self::new(409, "AlreadyExists", format!("{plural} \"{name}\" already exists")).with_details(name, plural)
    }

    /// 409 Conflict for a stale `resourceVersion`.
    pub fn conflict(plural: &str, name: &str) -> Self {
        Self::conflict_because(
            plural,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 409 Conflict with a reason of its own (failed preconditions).
    pub fn conflict_because(plural: &str, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {plural} \"{name}\": {why}"),
        )
        .with_details(name, plural)
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 422 Invalid: `<Kind> "<name>" is invalid: <field>: <detail>`, one cause per problem.
    pub fn invalid(kind: &str, name: &str, causes: Vec<Cause>) -> Self {
        Self::invalid_in_group("", kind, name, causes)
    }

    /// 422 Invalid of a kind in an API group (`errors.NewInvalid` with a `GroupKind`): the
    /// message names `<Kind>.<group>`, and empty name, group and kind are left out of `details`
    /// as Go's `omitempty` leaves them out.
    pub fn invalid_in_group(group: &str, kind: &str, name: &str, causes: Vec<Cause>) -> Self {
        let joined: Vec<String> = causes.iter().map(Cause::to_string).collect();
        let qualified = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let message = if joined.len() == 1 {
            format!("{qualified} \"{name}\" is invalid: {}", joined[0])
        } else {
            format!("{qualified} \"{name}\" is invalid: [{}]", joined.join(", "))
        };
        let causes: Vec<Value> = causes
            .iter()
            .map(|c| json!({"reason": c.reason, "message": c.detail, "field": c.field}))
            .collect();
        let mut details = serde_json::Map::new();
        for (key, value) in [("name", name), ("group", group), ("kind", kind)] {
            if !value.is_empty() {
                details.insert(key.into(), json!(value));
            }
        }
        details.insert("causes".into(), json!(causes));
        Self {
            code: 422,
            reason: "Invalid",
            message,
            details: Some(Value::Object(details)),
            list_continue: None,
        }
    }

    /// `details.group`, for a resource of a named API group (kube-apiserver's
    /// `schema.GroupResource` in `NotFound`, `Conflict`, `AlreadyExists` and `Invalid`).
    pub fn in_group(mut self, group: &str) -> Self {
        if let (false, Some(Value::Object(details))) = (group.is_empty(), &mut self.details) {
            details.insert("group".into(), json!(group));
        }
        self
    }

    /// 504 Timeout for a resourceVersion newer than the server has (apiserver's
    /// `storage.NewTooLargeResourceVersionError`, through `errors.NewTimeoutError`).
    pub fn too_large_resource_version(requested: u64, current: u64) -> Self {
        let mut err = Self::new(
            504,
            "Timeout",
            format!("Timeout: Too large resource version: {requested}, current: {current}"),
        );
        err.details = Some(json!({
            "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
            "retryAfterSeconds": 1,
        }));
        err
    }

    /// 422 for a request's options (`CreateOptions`, `UpdateOptions`, `PatchOptions`), as the
    /// handlers report `ValidateCreateOptions` and the like: `<Kind>.meta.k8s.io "" is invalid`.
    pub fn invalid_options(kind: &str, causes: Vec<Cause>) -> Self {
        Self::invalid_in_group("meta.k8s.io", kind, "", causes)
    }

    /// 422 for a patch whose result does not decode (the patch handler's
    /// `field.Invalid(field.NewPath("patch"), <patched object>, <error>)` under an empty kind).
    pub fn invalid_patch(rendered: &str, why: &str) -> Self {
        Self::invalid(
            "",
            "",
            vec![Cause {
                reason: "FieldValueInvalid",
                field: "patch".into(),
                detail: format!("Invalid value: {}: {why}", go_quote(rendered)),
            }],
        )
    }

    /// 422 Invalid as `errors.NewGenericServerResponse(422, ...)` builds it: a fixed message,
    /// empty details (a JSON patch that cannot be applied, a strategic merge patch with lists of
    /// lists).
    pub fn generic_invalid() -> Self {
        Self {
            code: 422,
            reason: "Invalid",
            message: "the server rejected our request due to an error in our request".into(),
            details: Some(json!({})),
            list_continue: None,
        }
    }

    /// An error that is not a `Status` in kube-apiserver (a plain Go error): the status code
    /// (500 for a plain error), no reason and no details.
    pub fn unknown(code: u16, message: impl Into<String>) -> Self {
        Self::new(code, "", message)
    }

    /// 413 RequestEntityTooLarge.
    pub fn too_large(message: &str) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: {message}"),
        )
    }

    /// 403 Forbidden, as admission plugins refuse: `<plural> "<name>" is forbidden: <why>`.
    pub fn forbidden(plural: &str, name: &str, why: &str) -> Self {
        let message = if name.is_empty() {
            format!("{plural} is forbidden: {why}")
        } else {
            format!("{plural} \"{name}\" is forbidden: {why}")
        };
        Self::new(403, "Forbidden", message).with_details(name, plural)
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    /// 415 UnsupportedMediaType.
    pub fn unsupported_media_type(message: impl Into<String>) -> Self {
        Self::new(415, "UnsupportedMediaType", message)
    }

    /// 401 Unauthorized.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 500 InternalError.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// 410 Expired: a watch from a resourceVersion older than the kept history.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// An error with any code, for injected failures.
    pub fn with_code(code: u16, message: impl Into<String>) -> Self {
        let reason = match code {
            400 => "BadRequest",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "NotFound",
            409 => "Conflict",
            410 => "Expired",
            422 => "Invalid",
            429 => "TooManyRequests",
            503 => "ServiceUnavailable",
            504 => "Timeout",
            _ => "InternalError",
        };
        Self::new(code, reason, message)
    }

    /// The `Status` object.
    pub fn status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if self.reason.is_empty() {
            // `StatusReasonUnknown` is "" and `omitempty`.
            status.as_object_mut().expect("an object").remove("reason");
        }
        if let Some(details) = &self.details {
            status["details"] = details.clone();
        }
        if let Some(token) = &self.list_continue {
            status["metadata"]["continue"] = json!(token);
        }
        status
    }
}

/// One field problem of a 422 Invalid.
#[derive(Debug, Clone, PartialEq)]
pub struct Cause {
    /// `FieldValueRequired`, `FieldValueInvalid`, `FieldValueForbidden`, ...
    pub reason: &'static str,
    /// The field path (`metadata.name`, `spec.containers[0].image`).
    pub field: String,
    /// What is wrong, as kube-apiserver words it after the field.
    pub detail: String,
}

impl Cause {
    /// `<field>: Required value: <why>`.
    pub fn required(field: impl Into<String>, why: &str) -> Self {
        let detail = if why.is_empty() {
            "Required value".to_string()
        } else {
            format!("Required value: {why}")
        };
        Self {
            reason: "FieldValueRequired",
            field: field.into(),
            detail,
        }
    }

    /// `<field>: Invalid value: <value>: <why>`.
    pub fn invalid(field: impl Into<String>, value: &Value, why: &str) -> Self {
        Self {
            reason: "FieldValueInvalid",
            field: field.into(),
            detail: format!("Invalid value: {value}: {why}"),
        }
    }

    /// `<field>: Forbidden: <why>`.
    pub fn forbidden(field: impl Into<String>, why: &str) -> Self {
        Self {
            reason: "FieldValueForbidden",
            field: field.into(),
            detail: format!("Forbidden: {why}"),
        }
    }

    /// `<field>: Unsupported value: <value>: supported values: ...`.
    pub fn unsupported(field: impl Into<String>, value: &Value, supported: &[&str]) -> Self {
        let quoted: Vec<String> = supported.iter().map(|s| format!("\"{s}\"")).collect();
        Self {
            reason: "FieldValueNotSupported",
            field: field.into(),
            detail: format!("Unsupported value: {value}: supported values: {}", quoted.join(", ")),
        }
    }
}

impl Cause {
    /// `<field>: Invalid value: <rendered>: <why>`, the value already rendered as Go renders it
    /// (`%q` for strings, `%#v` for structs).
    pub fn invalid_rendered(field: impl Into<String>, rendered: &str, why: &str) -> Self {
        Self {
            reason: "FieldValueInvalid",
            field: field.into(),
            detail: format!("Invalid value: {rendered}: {why}"),
        }
    }

    /// `<field>: Duplicate value: <rendered>`.
    pub fn duplicate(field: impl Into<String>, rendered: &str) -> Self {
        Self {
            reason: "FieldValueDuplicate",
            field: field.into(),
            detail: format!("Duplicate value: {rendered}"),
        }
    }

    /// `<field>: Too long: may not be more than <max> bytes`.
    pub fn too_long(field: impl Into<String>, max: usize) -> Self {
        Self {
            reason: "FieldValueTooLong",
            field: field.into(),
            detail: format!("Too long: may not be more than {max} bytes"),
        }
    }
}

/// A string as Go's `%q` prints it (what `field.Invalid` shows for a string value).
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.detail)
    }
}
