//! Field errors as the API server reports them (`k8s.io/apimachinery/pkg/util/validation/field`):
//! the path of the field, the kind of problem and a detail, printed
//! `spec.containers[0].image: Required value`.

/// The kind of problem with a field (`field.ErrorType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldErrorKind {
    /// `Required value`.
    Required,
    /// `Invalid value`.
    Invalid,
    /// `Forbidden`.
    Forbidden,
    /// `Not found`.
    NotFound,
    /// `Duplicate value`.
    Duplicate,
    /// `Unsupported value`.
    Unsupported,
    /// Valid for the API but refused by this node (no API phrase: the detail says why).
    Refused,
}

impl FieldErrorKind {
    fn phrase(self) -> Option<&'static str> {
        match self {
            FieldErrorKind::Required => Some("Required value"),
            FieldErrorKind::Invalid => Some("Invalid value"),
            FieldErrorKind::Forbidden => Some("Forbidden"),
            FieldErrorKind::NotFound => Some("Not found"),
            FieldErrorKind::Duplicate => Some("Duplicate value"),
            FieldErrorKind::Unsupported => Some("Unsupported value"),
            FieldErrorKind::Refused => None,
        }
    }
}

/// One invalid field. Never retried: the spec must change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.render())]
pub struct FieldError {
    /// The field's path (`spec.containers[0].livenessProbe.httpGet.port`).
    pub field: String,
    /// What is wrong.
    pub kind: FieldErrorKind,
    /// The value and why, when there is more to say (`"nope": no container port with this name`).
    pub detail: String,
}

impl FieldError {
    /// An error of `kind` at `field`.
    pub fn new(field: impl Into<String>, kind: FieldErrorKind, detail: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            kind,
            detail: detail.into(),
        }
    }

    /// `Required value`.
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(field, FieldErrorKind::Required, detail)
    }

    /// `Invalid value`.
    pub fn invalid(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(field, FieldErrorKind::Invalid, detail)
    }

    /// `Forbidden`.
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(field, FieldErrorKind::Forbidden, detail)
    }

    /// `Not found`.
    pub fn not_found(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(field, FieldErrorKind::NotFound, detail)
    }

    /// `Duplicate value`.
    pub fn duplicate(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(field, FieldErrorKind::Duplicate, detail)
    }

    /// `Unsupported value`.
    pub fn unsupported(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(field, FieldErrorKind::Unsupported, detail)
    }

    /// Refused by this node, for the reason given.
    pub fn refused(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(field, FieldErrorKind::Refused, detail)
    }

    /// The same error with its path under `parent` (`spec.volumes[0]` + `hostPath.path`).
    pub fn under(mut self, parent: &str) -> Self {
        self.field = if self.field.is_empty() {
            parent.to_string()
        } else {
            format!("{parent}.{}", self.field)
        };
        self
    }

    fn render(&self) -> String {
        match (self.kind.phrase(), self.detail.is_empty()) {
            (Some(phrase), true) => format!("{}: {phrase}", self.field),
            (Some(phrase), false) => format!("{}: {phrase}: {}", self.field, self.detail),
            (None, _) => format!("{}: {}", self.field, self.detail),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Errors print as the API server prints them.
    #[test]
    fn errors_print_like_the_api_server() {
        assert_eq!(
            FieldError::required("spec.containers[0].image", "").to_string(),
            "spec.containers[0].image: Required value"
        );
        assert_eq!(
            FieldError::invalid("metadata.name", "\"A\": must be a lowercase RFC 1123 subdomain").to_string(),
            "metadata.name: Invalid value: \"A\": must be a lowercase RFC 1123 subdomain"
        );
        assert_eq!(
            FieldError::refused("", "static pods may not reference secrets")
                .under("spec.volumes[1]")
                .to_string(),
            "spec.volumes[1]: static pods may not reference secrets"
        );
    }
}
