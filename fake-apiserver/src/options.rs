//! A write's query options as kube-apiserver's handlers decode and validate them
//! (staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/validation/validation.go
//! `ValidateCreateOptions`, `ValidateUpdateOptions`, `ValidatePatchOptions`): `fieldManager`
//! (at most 128 printable characters; required for apply), `dryRun` (only `All`),
//! `fieldValidation` (`Ignore`, `Strict`, `Warn`) and `force` (apply only). A bad value is
//! 422 `<Kind>Options.meta.k8s.io "" is invalid`; a `force` that is no boolean is 400.

use super::error::{ApiError, Cause};
use super::patch::PatchType;
use super::validate::{FieldValidation, UnsupportedValidation};
use serde_json::json;
use std::collections::HashMap;

/// The verb whose options these are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// POST: `CreateOptions`.
    Create,
    /// PUT: `UpdateOptions`.
    Update,
    /// PATCH: `PatchOptions`.
    Patch(PatchType),
}

/// The most characters a `fieldManager` may have (`FieldManagerMaxLength`).
const FIELD_MANAGER_MAX_LENGTH: usize = 128;

/// The options of a write, decoded from its query and validated as the handler validates them.
pub fn write_options(query: &HashMap<String, String>, verb: Verb) -> Result<WriteOptions, ApiError> {
    let kind = match verb {
        Verb::Create => "CreateOptions",
        Verb::Update => "UpdateOptions",
        Verb::Patch(_) => "PatchOptions",
    };
    let force = match query.get("force") {
        None => None,
        Some(value) => Some(parse_bool(value).ok_or_else(|| {
            ApiError::bad_request(format!(
                "strconv.ParseBool: parsing {}: invalid syntax",
                super::error::go_quote(value)
            ))
        })?),
    };
    let manager = query.get("fieldManager").cloned().unwrap_or_default();
    let mut causes = Vec::new();
    if let Verb::Patch(patch_type) = verb {
        if patch_type != PatchType::Apply {
            if force.is_some() {
                causes.push(Cause::forbidden("force", "may not be specified for non-apply patch"));
            }
        } else if manager.is_empty() {
            causes.push(Cause::required("fieldManager", "is required for apply patch"));
        }
    }
    causes.extend(field_manager_errors(&manager));
    let dry_run = match query.get("dryRun").map(String::as_str) {
        None => false,
        Some("All") => true,
        Some(other) => {
            causes.push(Cause {
                reason: "FieldValueNotSupported",
                field: "dryRun".into(),
                detail: format!(
                    "Unsupported value: []string{{{}}}: supported values: \"All\"",
                    super::error::go_quote(other)
                ),
            });
            false
        }
    };
    let field_validation = match FieldValidation::parse(query.get("fieldValidation").map(String::as_str)) {
        Ok(v) => v,
        Err(UnsupportedValidation(value)) => {
            causes.push(Cause::unsupported(
                "fieldValidation",
                &json!(value),
                &["", "Ignore", "Strict", "Warn"],
            ));
            FieldValidation::default()
        }
    };
    if !causes.is_empty() {
        return Err(ApiError::invalid_options(kind, causes));
    }
    Ok(WriteOptions {
        field_validation,
        dry_run,
        field_manager: Some(manager).filter(|m| !m.is_empty()),
        node: None,
        user: None,
    })
}

/// `ValidateFieldManager`: at most 128 bytes, all printable.
pub fn field_manager_errors(manager: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    if manager.len() > FIELD_MANAGER_MAX_LENGTH {
        causes.push(Cause::too_long("fieldManager", FIELD_MANAGER_MAX_LENGTH));
    }
    for (i, c) in manager.char_indices() {
        if c.is_control() {
            causes.push(Cause::invalid_rendered(
                "fieldManager",
                &super::error::go_quote(manager),
                &format!("invalid character U+{:04X} (at position {i})", c as u32),
            ));
        }
    }
    causes
}

/// Go's `strconv.ParseBool`.
fn parse_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Options of a create, update or patch.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// `fieldValidation`.
    pub field_validation: FieldValidation,
    /// `dryRun=All`: validate and answer, store nothing.
    pub dry_run: bool,
    /// `fieldManager` (required for apply).
    pub field_manager: Option<String>,
    /// The node making the request, when NodeRestriction applies to it
    /// ([`crate::node_restriction`]).
    pub node: Option<String>,
    /// The requester, for what a strategy records of it (a CSR's `spec.username`, `groups`).
    pub user: Option<crate::user::TokenUser>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    /// validation.go `ValidatePatchOptions`: apply needs a fieldManager, only apply takes force.
    #[test]
    fn patch_options_are_validated_as_upstream_validates_them() {
        let err = write_options(&query(&[]), Verb::Patch(PatchType::Apply)).unwrap_err();
        assert_eq!((err.code, err.reason), (422, "Invalid"));
        assert_eq!(
            err.message,
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
        );
        let err = write_options(&query(&[("force", "true")]), Verb::Patch(PatchType::Merge)).unwrap_err();
        assert_eq!(
            err.message,
            "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch"
        );
        assert!(write_options(
            &query(&[("force", "true"), ("fieldManager", "m")]),
            Verb::Patch(PatchType::Apply)
        )
        .is_ok());
        let err = write_options(&query(&[("force", "maybe")]), Verb::Patch(PatchType::Apply)).unwrap_err();
        assert_eq!(err.code, 400);
    }

    /// `fieldValidation` and `dryRun` values, and the fieldManager's length.
    #[test]
    fn unsupported_values_are_422_naming_the_supported_ones() {
        let err = write_options(&query(&[("fieldValidation", "Loose")]), Verb::Create).unwrap_err();
        assert_eq!(
            err.message,
            "CreateOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported value: \"Loose\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""
        );
        let err = write_options(&query(&[("dryRun", "Some")]), Verb::Update).unwrap_err();
        assert_eq!(
            err.message,
            "UpdateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: []string{\"Some\"}: supported values: \"All\""
        );
        let long = "m".repeat(129);
        let err = write_options(&query(&[("fieldManager", &long)]), Verb::Create).unwrap_err();
        assert_eq!(
            err.message,
            "CreateOptions.meta.k8s.io \"\" is invalid: fieldManager: Too long: may not be more than 128 bytes"
        );
        let ok = write_options(&query(&[("dryRun", "All"), ("fieldValidation", "Warn")]), Verb::Create).unwrap();
        assert!(ok.dry_run);
        assert_eq!(ok.field_validation, FieldValidation::Warn);
    }
}
