//! Service-account tokens for projected volumes (kubelet's `pkg/kubelet/token/token_manager.go`):
//! each token is requested once through the TokenRequest API and served from memory until it
//! needs a refresh — after 80 % of its lifetime, or once it is 24 h old — so a pod's resync asks
//! the API server nothing while its token is fresh.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

/// The longest a token is served before it is requested again, whatever its expiration.
pub const MAX_TOKEN_AGE: Duration = Duration::from_secs(24 * 3600);

/// What a projected `serviceAccountToken` source asks for, bound to its pod.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TokenRequestFor {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's service account.
    pub service_account: String,
    /// Audiences; empty means the API server's own.
    pub audiences: Vec<String>,
    /// Requested lifetime in seconds (`expirationSeconds`, 3600 by default).
    pub expiration_seconds: i64,
    /// The pod the token is bound to.
    pub pod_name: String,
    /// Its UID.
    pub pod_uid: String,
}

/// A token the API server issued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceAccountToken {
    /// The JWT.
    pub token: String,
    /// When the API server says it expires (`status.expirationTimestamp`).
    pub expires: Timestamp,
}

impl ServiceAccountToken {
    /// Whether it must be requested again at `now`: within the last 20 % of its lifetime (the
    /// lifetime counted from its requested `expirationSeconds`), or older than [`MAX_TOKEN_AGE`].
    pub fn needs_refresh(&self, expiration_seconds: i64, now: Timestamp) -> bool {
        let lifetime = expiration_seconds.max(0);
        let issued = self.expires.as_second() - lifetime;
        let age = now.as_second() - issued;
        age >= MAX_TOKEN_AGE.as_secs() as i64 || now.as_second() >= self.expires.as_second() - lifetime / 5
    }
}

/// Issued tokens by request.
#[derive(Debug, Default)]
pub struct TokenCache {
    tokens: Mutex<HashMap<TokenRequestFor, ServiceAccountToken>>,
}

impl TokenCache {
    /// The cached token for `request`, unless it needs a refresh at `now`.
    pub fn fresh(&self, request: &TokenRequestFor, now: Timestamp) -> Option<ServiceAccountToken> {
        let tokens = self.tokens.lock().ok()?;
        let token = tokens.get(request)?;
        (!token.needs_refresh(request.expiration_seconds, now)).then(|| token.clone())
    }

    /// Remember a newly issued token.
    pub fn put(&self, request: TokenRequestFor, token: ServiceAccountToken) {
        if let Ok(mut tokens) = self.tokens.lock() {
            tokens.insert(request, token);
        }
    }

    /// Forget every token bound to the pod `uid` (it is gone).
    pub fn forget_pod(&self, uid: &str) {
        if let Ok(mut tokens) = self.tokens.lock() {
            tokens.retain(|k, _| k.pod_uid != uid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> TokenRequestFor {
        TokenRequestFor {
            namespace: "ns".into(),
            service_account: "default".into(),
            audiences: vec![],
            expiration_seconds: 3600,
            pod_name: "p".into(),
            pod_uid: "u".into(),
        }
    }

    /// A one-hour token is served for 48 minutes, then requested again.
    #[test]
    fn refreshed_after_eighty_percent_of_its_lifetime() {
        let issued = Timestamp::from_second(1_000_000).unwrap();
        let token = ServiceAccountToken {
            token: "t".into(),
            expires: Timestamp::from_second(1_000_000 + 3600).unwrap(),
        };
        let at = |s: i64| Timestamp::from_second(issued.as_second() + s).unwrap();
        assert!(!token.needs_refresh(3600, at(0)));
        assert!(!token.needs_refresh(3600, at(47 * 60)));
        assert!(token.needs_refresh(3600, at(48 * 60)));
        let cache = TokenCache::default();
        cache.put(request(), token.clone());
        assert_eq!(cache.fresh(&request(), at(60)), Some(token));
        assert_eq!(cache.fresh(&request(), at(3000)), None);
        cache.forget_pod("u");
        assert_eq!(cache.fresh(&request(), at(60)), None);
    }

    /// A token that lives longer than a day is still requested again after 24 h.
    #[test]
    fn never_served_past_a_day() {
        let year = 365 * 24 * 3600;
        let token = ServiceAccountToken {
            token: "t".into(),
            expires: Timestamp::from_second(year).unwrap(),
        };
        assert!(!token.needs_refresh(year, Timestamp::from_second(23 * 3600).unwrap()));
        assert!(token.needs_refresh(year, Timestamp::from_second(24 * 3600).unwrap()));
    }
}
