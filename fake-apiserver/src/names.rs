//! apimachinery's name rules (`IsDNS1123Label`, `IsDNS1123Subdomain`, `IsQualifiedName`,
//! `IsValidLabelValue`) and their messages, shared by object validation ([`super::validate`]) and
//! the status rules ([`super::status_rules`]). In a file of their own so neither of those imports
//! the other.

pub(crate) fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// `IsDNS1123Subdomain`: the regex limits no part on its own, only the whole to 253.
pub(crate) fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|part| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        })
}

pub(crate) const DNS_SUBDOMAIN_MSG: &str =
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' \
     or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation \
     is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

pub(crate) const DNS_LABEL_MSG: &str =
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', \
     and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for \
     validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

pub(crate) fn is_qualified_name(s: &str) -> bool {
    let (prefix, name) = match s.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    if prefix.is_some_and(|p| !is_dns_subdomain(p)) {
        return false;
    }
    !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// The messages of apimachinery's `IsQualifiedName` for `s` (none when it is one).
pub(crate) fn qualified_name_errors(s: &str) -> Vec<String> {
    const NAME: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an \
                        alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation \
                        is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    let parts: Vec<&str> = s.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            let mut errors = Vec::new();
            if prefix.is_empty() {
                errors.push("prefix part must be non-empty".to_string());
            } else if !is_dns_subdomain(prefix) {
                errors.push(format!("prefix part {DNS_SUBDOMAIN_MSG}"));
            }
            errors.extend(qualified_name_errors(name));
            return errors;
        }
        _ => {
            return vec![format!(
                "a qualified name {NAME} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            )]
        }
    };
    let valid = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    let mut errors = Vec::new();
    if name.is_empty() {
        errors.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errors.push("name part must be no more than 63 characters".to_string());
    }
    if !valid {
        errors.push(format!("name part {NAME}"));
    }
    errors
}

pub(crate) fn is_label_value(s: &str) -> bool {
    s.is_empty()
        || (s.len() <= 63
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            && s.starts_with(|c: char| c.is_ascii_alphanumeric())
            && s.ends_with(|c: char| c.is_ascii_alphanumeric()))
}
