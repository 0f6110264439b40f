//! Whether an image reference parses, as kubelet checks it before anything else
//! (`applyDefaultImageTag` through docker/distribution's `ParseNormalizedNamed`): a container
//! whose image does not parse waits with `InvalidImageName` and Docker is never asked.
//!
//! The grammar (distribution's `reference` package):
//! `[domain "/"] path [":" tag] ["@" digest]`, where a domain is a host name, an IPv4 address
//! or a bracketed IPv6 one with an optional port; path components are lower-case alphanumerics
//! joined by `.`, `_`, `__` or runs of `-`; a tag is `[\w][\w.-]{0,127}`; a digest is
//! `algorithm:hex` with at least 32 hex digits. No crate of the stack parses it, so it is written
//! here, as small functions over the text.

/// The most characters a repository name may have.
const NAME_MAX: usize = 255;

/// Why a reference does not parse, in distribution's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageRefError {
    /// A 64-hex-digit name, which would read as an image ID.
    #[error("invalid repository name ({0}), cannot specify 64-byte hexadecimal strings")]
    HexName(String),
    /// Upper case in the repository name.
    #[error("invalid reference format: repository name ({0}) must be lowercase")]
    Uppercase(String),
    /// Anything else the grammar refuses.
    #[error("invalid reference format")]
    InvalidFormat,
    /// A repository name over [`NAME_MAX`] characters.
    #[error("repository name must not be more than {NAME_MAX} characters")]
    NameTooLong,
}

/// The error kubelet's parser gives for `image`, in its words; `Ok` when the reference parses.
///
/// A `String`, not [`ImageRefError`]: the message is the container's waiting message and its
/// InspectFailed event as they are, and its one caller (the ImageManager,
/// `actors/src/pod_worker/image_manager.rs`) takes it as that text.
pub fn check(image: &str) -> Result<(), String> {
    parse_normalized(image)
        .map_err(|e| format!("Failed to apply default image tag {image:?}: couldn't parse image name {image:?}: {e}"))
}

/// distribution's `ParseNormalizedNamed`.
fn parse_normalized(s: &str) -> Result<(), ImageRefError> {
    if s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return Err(ImageRefError::HexName(s.to_string()));
    }
    let (domain, remainder) = split_domain(s);
    let remote = remainder.split_once(':').map_or(remainder.as_str(), |(name, _)| name);
    if remote.to_lowercase() != remote {
        return Err(ImageRefError::Uppercase(remote.to_string()));
    }
    parse(&format!("{domain}/{remainder}"))
}

/// distribution's `splitDockerDomain`: the domain (docker.io when the first component is not
/// one) and the rest (`library/` before a single official name).
pub(crate) fn split_domain(name: &str) -> (String, String) {
    let (domain, rest) = match name.split_once('/') {
        Some((first, rest)) if first.contains(['.', ':']) || first == "localhost" || first.to_lowercase() != first => {
            (first.to_string(), rest.to_string())
        }
        _ => ("docker.io".to_string(), name.to_string()),
    };
    let domain = if domain == "index.docker.io" {
        "docker.io".to_string()
    } else {
        domain
    };
    let rest = if domain == "docker.io" && !rest.contains('/') {
        format!("library/{rest}")
    } else {
        rest
    };
    (domain, rest)
}

/// distribution's `Parse` of a full reference.
fn parse(reference: &str) -> Result<(), ImageRefError> {
    const INVALID: ImageRefError = ImageRefError::InvalidFormat;
    let (rest, digest) = match reference.split_once('@') {
        Some((rest, digest)) => (rest, Some(digest)),
        None => (reference, None),
    };
    if digest.is_some_and(|d| !is_digest(d)) {
        return Err(INVALID);
    }
    // The tag follows the last ':' after the last '/' (a port's ':' comes before a '/').
    let (name, tag) = match rest.rfind(':') {
        Some(i) if !rest[i..].contains('/') => (&rest[..i], Some(&rest[i + 1..])),
        _ => (rest, None),
    };
    if tag.is_some_and(|t| !is_tag(t)) {
        return Err(INVALID);
    }
    let (domain, path) = name.split_once('/').ok_or(INVALID)?;
    if !is_domain(domain) || !path.split('/').all(is_path_component) {
        return Err(INVALID);
    }
    if name.len() > NAME_MAX {
        return Err(ImageRefError::NameTooLong);
    }
    Ok(())
}

/// `[a-z0-9]+` joined by `.`, `_`, `__` or `-+`.
fn is_path_component(component: &str) -> bool {
    let bytes = component.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if !bytes.first().is_some_and(|&b| alnum(b)) || !bytes.last().is_some_and(|&b| alnum(b)) {
        return false;
    }
    let mut i = 0;
    while i < bytes.len() {
        if alnum(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && !alnum(bytes[i]) {
            i += 1;
        }
        let separator = &component[start..i];
        let ok = matches!(separator, "." | "_" | "__") || separator.bytes().all(|b| b == b'-');
        if !ok {
            return false;
        }
    }
    true
}

/// A host name, IPv4 address or `[IPv6]`, with an optional `:port`.
fn is_domain(domain: &str) -> bool {
    let (host_ok, port) = match domain.strip_prefix('[') {
        Some(rest) => {
            let Some((v6, after)) = rest.split_once(']') else {
                return false;
            };
            let port = match after {
                "" => None,
                _ => match after.strip_prefix(':') {
                    Some(port) => Some(port),
                    None => return false,
                },
            };
            (v6.parse::<std::net::Ipv6Addr>().is_ok(), port)
        }
        None => {
            let (host, port) = match domain.split_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (domain, None),
            };
            (!host.is_empty() && host.split('.').all(is_domain_component), port)
        }
    };
    host_ok && port.is_none_or(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// `[a-zA-Z0-9]` or `[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]`.
fn is_domain_component(component: &str) -> bool {
    let bytes = component.as_bytes();
    !bytes.is_empty()
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'-')
}

/// `[\w][\w.-]{0,127}`.
fn is_tag(tag: &str) -> bool {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let bytes = tag.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 128
        && word(bytes[0])
        && bytes.iter().all(|&b| word(b) || b == b'.' || b == b'-')
}

/// `algorithm:hex`: `[A-Za-z][A-Za-z0-9]*([-_+.][A-Za-z][A-Za-z0-9]*)*`, then 32 or more hex
/// digits.
fn is_digest(digest: &str) -> bool {
    let Some((algorithm, hex)) = digest.split_once(':') else {
        return false;
    };
    let algorithm_ok = algorithm.split(['-', '_', '+', '.']).all(|part| {
        part.as_bytes().first().is_some_and(u8::is_ascii_alphabetic) && part.bytes().all(|b| b.is_ascii_alphanumeric())
    });
    algorithm_ok && hex.len() >= 32 && hex.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_kubelet_accepts_parse() {
        for image in [
            "busybox",
            "busybox:1.36",
            "library/busybox:latest",
            "dockerlet.local/busybox:1",
            "registry.k8s.io/e2e-test-images/agnhost:2.52",
            "127.0.0.1:5000/a/b-c__d.e:v1.2-rc_3",
            "localhost/x",
            "[::1]:5000/x:y",
            "gcr.io/authenticated-image-pulling/alpine:3.7",
            "busybox@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "a/b:t@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        ] {
            assert_eq!(check(image), Ok(()), "{image}");
        }
    }

    #[test]
    fn references_kubelet_refuses_fail_in_its_words() {
        assert_eq!(
            check("dockerlet.local/BadName:1"),
            Err(
                "Failed to apply default image tag \"dockerlet.local/BadName:1\": couldn't parse image name \
                 \"dockerlet.local/BadName:1\": invalid reference format: repository name (BadName) must be \
                 lowercase"
                    .to_string()
            )
        );
        assert!(check("Busybox")
            .unwrap_err()
            .contains("repository name (library/Busybox) must be lowercase"));
        for image in [
            "busybox:",
            "busybox:-x",
            "a//b",
            "a/b/",
            "a/.b",
            "bad host:1/x",
            "x@sha256:abc",
            "x:y:z",
            "-busybox",
            "busybox::1",
        ] {
            let e = check(image).unwrap_err();
            assert!(e.ends_with("invalid reference format"), "{image}: {e}");
        }
        let hex = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        assert!(check(hex)
            .unwrap_err()
            .contains("cannot specify 64-byte hexadecimal strings"));
        let long = format!("x/{}", "a".repeat(300));
        assert!(check(&long)
            .unwrap_err()
            .ends_with("repository name must not be more than 255 characters"));
    }
}
