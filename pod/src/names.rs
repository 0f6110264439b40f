//! RFC 1123 names as the API server validates them (`k8s.io/apimachinery/pkg/util/validation`):
//! labels (container names, namespaces, host names) and subdomains (pod names, DNS search
//! domains).

/// The longest RFC 1123 subdomain.
pub const MAX_SUBDOMAIN_LEN: usize = 253;

/// The API server's explanation of an invalid RFC 1123 label.
pub const DNS_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

/// An RFC 1123 label: 1–63 lower-case alphanumerics or `-`, not starting or ending with `-`.
pub fn is_dns_label(s: &str) -> bool {
    s.len() <= 63 && is_label_shaped(s)
}

/// A part of an RFC 1123 subdomain: a label of any length (the subdomain's regex limits only
/// the whole, as `IsDNS1123Subdomain`).
fn is_label_shaped(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// An RFC 1123 subdomain: labels joined by dots, at most [`MAX_SUBDOMAIN_LEN`] long in all
/// (no part is limited on its own: a 70-character pod name is valid, its host name is cut).
pub fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= MAX_SUBDOMAIN_LEN && s.split('.').all(is_label_shaped)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Labels and subdomains as the API server's regexes accept them.
    #[test]
    fn labels_and_subdomains() {
        assert!(is_dns_label("my-name") && is_dns_label("123-abc"));
        assert!(!is_dns_label("-a") && !is_dns_label("a-") && !is_dns_label("A") && !is_dns_label(""));
        assert!(!is_dns_label(&"a".repeat(64)));
        assert!(is_dns_subdomain("a.b-c.d") && !is_dns_subdomain("a..b"));
        assert!(!is_dns_subdomain(&format!("{}.b", "a".repeat(252))));
        // A part longer than a label is fine in a subdomain: only the whole is limited.
        assert!(is_dns_subdomain(&format!("{}-cdefghi", "b".repeat(62))));
        assert!(is_dns_subdomain(&format!("{}.example", "b".repeat(100))));
        assert!(!is_dns_subdomain("a.-b") && !is_dns_subdomain(""));
    }
}
