//! The API server's verdicts on the kubelet API's callers, as kubelet takes them through
//! k8s.io/apiserver's delegating authenticator and authorizer: bearer tokens through a
//! `authentication.k8s.io/v1` TokenReview (results, authenticated or not, kept for
//! `--authentication-token-webhook-cache-ttl`; failed reviews are not kept), and requests
//! through a `authorization.k8s.io/v1` SubjectAccessReview (allowed kept for
//! `--authorization-webhook-cache-authorized-ttl`, anything else for
//! `--authorization-webhook-cache-unauthorized-ttl`).
//!
//! The reviews themselves go through a [`Reviewer`], which the agent implements with its API
//! client; this crate never talks to the API server itself.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};

pub use super::identity::Extra;
use super::identity::{Attributes, UserInfo};

/// How many verdicts a cache keeps; beyond, expired ones are dropped, then all (a flood of
/// distinct tokens cannot grow the agent without bound).
const CACHE_LIMIT: usize = 4096;

/// A review the API server could not give (unreachable, refused, a malformed answer).
#[derive(Debug, thiserror::Error)]
#[error("{operation} failed: {source}")]
pub struct ReviewError {
    /// `create tokenreview`, `create subjectaccessreview`.
    pub operation: &'static str,
    /// Whether asking again soon may succeed (a broken connection, 429, 5xx): such a review
    /// is retried with [`RetryBackoff`] before the request fails.
    pub transient: bool,
    /// Why.
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

/// How a review that failed for a transient reason is tried again: k8s.io/apiserver's
/// `DefaultAuthWebhookRetryBackoff`, which kubelet's webhook authenticator and authorizer use
/// (up to 5 attempts, the first wait 500 ms, each ×1.5, each up to 20 % longer at random).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryBackoff {
    /// Attempts in all, the first included.
    pub attempts: u32,
    /// The wait after the first failure.
    pub first: Duration,
    /// Each wait is the previous one times this.
    pub factor: f64,
    /// Each wait grows by up to this fraction of itself, at random.
    pub jitter: f64,
}

impl Default for RetryBackoff {
    fn default() -> Self {
        RetryBackoff {
            attempts: 5,
            first: Duration::from_millis(500),
            factor: 1.5,
            jitter: 0.2,
        }
    }
}

/// A number in [0, 1) that differs from call to call: std's `RandomState` is seeded at random
/// per process and moves on with each instance, which is all a jitter needs.
fn jitter_fraction() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let bits = std::collections::hash_map::RandomState::new().build_hasher().finish();
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

/// `call` until it succeeds, fails for good, or `backoff`'s attempts are spent (the last
/// error then).
async fn with_retries<T>(
    backoff: RetryBackoff,
    mut call: impl FnMut() -> BoxFuture<'static, Result<T, ReviewError>>,
) -> Result<T, ReviewError> {
    let mut wait = backoff.first;
    let mut attempt = 1;
    loop {
        match call().await {
            Err(e) if e.transient && attempt < backoff.attempts => {
                tracing::debug!(error = %e, attempt, "review failed; trying again");
                tokio::time::sleep(wait.mul_f64(1.0 + backoff.jitter * jitter_fraction())).await;
                wait = wait.mul_f64(backoff.factor);
                attempt += 1;
            }
            other => return other,
        }
    }
}

/// Creates reviews on the API server and returns them with its status.
pub trait Reviewer: Send + Sync + 'static {
    /// POST `/apis/authentication.k8s.io/v1/tokenreviews`.
    fn review_token(&self, review: TokenReview) -> BoxFuture<'static, Result<TokenReview, ReviewError>>;

    /// POST `/apis/authorization.k8s.io/v1/subjectaccessreviews`.
    fn review_access(
        &self,
        review: SubjectAccessReview,
    ) -> BoxFuture<'static, Result<SubjectAccessReview, ReviewError>>;
}

/// Verdicts by key, each until its own deadline.
struct TtlCache<V> {
    entries: Mutex<HashMap<String, (Instant, V)>>,
}

impl<V: Clone> TtlCache<V> {
    fn new() -> Self {
        TtlCache {
            entries: Mutex::new(HashMap::new()),
        }
    }

    fn get(&self, key: &str, now: Instant) -> Option<V> {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        match entries.get(key) {
            Some((until, value)) if *until > now => Some(value.clone()),
            Some(_) => {
                entries.remove(key);
                None
            }
            None => None,
        }
    }

    fn put(&self, key: String, value: V, ttl: Duration, now: Instant) {
        if ttl.is_zero() {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= CACHE_LIMIT {
            entries.retain(|_, (until, _)| *until > now);
            if entries.len() >= CACHE_LIMIT {
                entries.clear();
            }
        }
        entries.insert(key, (now + ttl, value));
    }
}

/// Bearer tokens through TokenReview (kubelet's `--authentication-token-webhook`).
pub struct TokenAuthenticator {
    reviewer: Arc<dyn Reviewer>,
    /// `--authentication-token-webhook-cache-ttl`, for authenticated and unauthenticated
    /// verdicts alike (k8s.io/apiserver caches both with the one TTL).
    ttl: Duration,
    cache: TtlCache<Option<UserInfo>>,
    backoff: RetryBackoff,
}

impl std::fmt::Debug for TokenAuthenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenAuthenticator").field("ttl", &self.ttl).finish()
    }
}

impl TokenAuthenticator {
    /// Reviews through `reviewer`, keeping verdicts for `ttl` (zero: never kept).
    pub fn new(reviewer: Arc<dyn Reviewer>, ttl: Duration) -> Self {
        TokenAuthenticator {
            reviewer,
            ttl,
            cache: TtlCache::new(),
            backoff: RetryBackoff::default(),
        }
    }

    /// Retries transient failures with `backoff` instead of the default.
    pub fn with_backoff(mut self, backoff: RetryBackoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// The user the token is, `None` when the API server says it is not one.
    pub async fn authenticate(&self, token: &str) -> Result<Option<UserInfo>, ReviewError> {
        self.authenticate_at(token, Instant::now()).await
    }

    async fn authenticate_at(&self, token: &str, now: Instant) -> Result<Option<UserInfo>, ReviewError> {
        if let Some(verdict) = self.cache.get(token, now) {
            return Ok(verdict);
        }
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_string(),
                audiences: None,
            },
            ..Default::default()
        };
        let answer = with_retries(self.backoff, || self.reviewer.review_token(review.clone())).await?;
        let status = answer.status.unwrap_or_default();
        let verdict = match (status.authenticated, status.user) {
            (Some(true), Some(user)) => Some(UserInfo {
                name: user.username.unwrap_or_default(),
                uid: user.uid.unwrap_or_default(),
                groups: user.groups.unwrap_or_default(),
                extra: user.extra.unwrap_or_default(),
            }),
            _ => {
                if let Some(error) = status.error.filter(|e| !e.is_empty()) {
                    tracing::info!(error = %error, "bearer token not authenticated");
                }
                None
            }
        };
        self.cache.put(token.to_string(), verdict.clone(), self.ttl, now);
        Ok(verdict)
    }
}

/// `--authorization-mode=Webhook`: SubjectAccessReviews.
pub struct WebhookAuthorizer {
    reviewer: Arc<dyn Reviewer>,
    authorized_ttl: Duration,
    unauthorized_ttl: Duration,
    cache: TtlCache<bool>,
    backoff: RetryBackoff,
}

impl std::fmt::Debug for WebhookAuthorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookAuthorizer")
            .field("authorized_ttl", &self.authorized_ttl)
            .field("unauthorized_ttl", &self.unauthorized_ttl)
            .finish()
    }
}

/// The SubjectAccessReview kubelet's webhook authorizer sends for `user` asking `attributes`.
pub fn access_review(user: &UserInfo, attributes: &Attributes) -> SubjectAccessReview {
    let non_empty = |s: &str| Some(s.to_string()).filter(|s| !s.is_empty());
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: non_empty(&user.name),
            uid: non_empty(&user.uid),
            groups: Some(user.groups.clone()).filter(|g| !g.is_empty()),
            extra: Some(user.extra.clone()).filter(|e| !e.is_empty()),
            resource_attributes: Some(ResourceAttributes {
                verb: non_empty(attributes.verb),
                version: Some("v1".into()),
                resource: Some("nodes".into()),
                subresource: non_empty(attributes.subresource),
                name: non_empty(&attributes.name),
                ..Default::default()
            }),
            non_resource_attributes: None,
        },
        ..Default::default()
    }
}

impl WebhookAuthorizer {
    /// Reviews through `reviewer`; allowed verdicts kept `authorized_ttl`, others
    /// `unauthorized_ttl`.
    pub fn new(reviewer: Arc<dyn Reviewer>, authorized_ttl: Duration, unauthorized_ttl: Duration) -> Self {
        WebhookAuthorizer {
            reviewer,
            authorized_ttl,
            unauthorized_ttl,
            cache: TtlCache::new(),
            backoff: RetryBackoff::default(),
        }
    }

    /// Retries transient failures with `backoff` instead of the default.
    pub fn with_backoff(mut self, backoff: RetryBackoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// Whether the API server allows `user` `attributes`.
    pub async fn allowed(&self, user: &UserInfo, attributes: &Attributes) -> Result<bool, ReviewError> {
        self.allowed_at(user, attributes, Instant::now()).await
    }

    async fn allowed_at(&self, user: &UserInfo, attributes: &Attributes, now: Instant) -> Result<bool, ReviewError> {
        let review = access_review(user, attributes);
        // The whole spec is the key, as k8s.io/apiserver's webhook authorizer keys its cache.
        let key = serde_json::to_string(&review.spec).unwrap_or_default();
        if let Some(allowed) = self.cache.get(&key, now) {
            return Ok(allowed);
        }
        let answer = with_retries(self.backoff, || self.reviewer.review_access(review.clone())).await?;
        let status = answer.status.unwrap_or_default();
        let allowed = status.allowed;
        if !allowed {
            tracing::debug!(
                user = %user.name,
                verb = attributes.verb,
                subresource = attributes.subresource,
                reason = status.reason.as_deref().unwrap_or_default(),
                denied = status.denied.unwrap_or(false),
                "SubjectAccessReview not allowed"
            );
        }
        let ttl = if allowed {
            self.authorized_ttl
        } else {
            self.unauthorized_ttl
        };
        self.cache.put(key, allowed, ttl, now);
        Ok(allowed)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use k8s_openapi::api::authentication::v1::{TokenReviewStatus, UserInfo as ApiUser};
    use k8s_openapi::api::authorization::v1::SubjectAccessReviewStatus;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Knows token `good` as alice (group `devs`), fails on `broken`; allows alice `get` on
    /// `proxy` only. Counts reviews.
    #[derive(Default)]
    pub(crate) struct FakeReviewer {
        pub tokens: AtomicUsize,
        pub accesses: AtomicUsize,
        pub last_access: Mutex<Option<SubjectAccessReviewSpec>>,
    }

    impl Reviewer for FakeReviewer {
        fn review_token(&self, mut review: TokenReview) -> BoxFuture<'static, Result<TokenReview, ReviewError>> {
            self.tokens.fetch_add(1, Ordering::SeqCst);
            let token = review.spec.token.clone();
            Box::pin(async move {
                if token == "broken" {
                    return Err(ReviewError {
                        operation: "create tokenreview",
                        transient: false,
                        source: "connection refused".into(),
                    });
                }
                review.status = Some(if token == "good" {
                    TokenReviewStatus {
                        authenticated: Some(true),
                        user: Some(ApiUser {
                            username: Some("alice".into()),
                            uid: Some("u-1".into()),
                            groups: Some(vec!["devs".into()]),
                            extra: Some([("scopes".to_string(), vec!["a".to_string()])].into()),
                        }),
                        ..Default::default()
                    }
                } else {
                    TokenReviewStatus {
                        authenticated: Some(false),
                        error: Some("invalid bearer token".into()),
                        ..Default::default()
                    }
                });
                Ok(review)
            })
        }

        fn review_access(
            &self,
            mut review: SubjectAccessReview,
        ) -> BoxFuture<'static, Result<SubjectAccessReview, ReviewError>> {
            self.accesses.fetch_add(1, Ordering::SeqCst);
            *self.last_access.lock().unwrap() = Some(review.spec.clone());
            let attrs = review.spec.resource_attributes.clone().unwrap_or_default();
            let allowed = review.spec.user.as_deref() == Some("alice")
                && attrs.verb.as_deref() == Some("get")
                && attrs.subresource.as_deref() == Some("proxy");
            review.status = Some(SubjectAccessReviewStatus {
                allowed,
                ..Default::default()
            });
            Box::pin(async move { Ok(review) })
        }
    }

    fn block<T>(f: impl std::future::Future<Output = T>) -> T {
        futures::executor::block_on(f)
    }

    /// A verdict, authenticated or not, is reused until the TTL passes; then the token is
    /// reviewed again. A failed review is not kept.
    #[test]
    fn token_verdicts_are_cached_for_the_ttl() {
        let fake = Arc::new(FakeReviewer::default());
        let authn = TokenAuthenticator::new(fake.clone(), Duration::from_secs(120));
        let t0 = Instant::now();
        let alice = block(authn.authenticate_at("good", t0)).unwrap().unwrap();
        assert_eq!((alice.name.as_str(), alice.uid.as_str()), ("alice", "u-1"));
        assert_eq!(alice.groups, ["devs"]);
        assert_eq!(alice.extra["scopes"], ["a"]);
        assert_eq!(
            block(authn.authenticate_at("good", t0 + Duration::from_secs(119))).unwrap(),
            Some(alice)
        );
        assert_eq!(fake.tokens.load(Ordering::SeqCst), 1);
        assert!(block(authn.authenticate_at("good", t0 + Duration::from_secs(120)))
            .unwrap()
            .is_some());
        assert_eq!(fake.tokens.load(Ordering::SeqCst), 2);

        assert_eq!(block(authn.authenticate_at("bad", t0)).unwrap(), None);
        assert_eq!(block(authn.authenticate_at("bad", t0)).unwrap(), None);
        assert_eq!(fake.tokens.load(Ordering::SeqCst), 3);

        assert!(block(authn.authenticate_at("broken", t0)).is_err());
        assert!(block(authn.authenticate_at("broken", t0)).is_err());
        assert_eq!(fake.tokens.load(Ordering::SeqCst), 5);
    }

    /// A zero TTL reviews every time.
    #[test]
    fn zero_ttl_never_caches() {
        let fake = Arc::new(FakeReviewer::default());
        let authn = TokenAuthenticator::new(fake.clone(), Duration::ZERO);
        for _ in 0..3 {
            block(authn.authenticate("good")).unwrap();
        }
        assert_eq!(fake.tokens.load(Ordering::SeqCst), 3);
    }

    fn attrs(verb: &'static str, subresource: &'static str) -> Attributes {
        Attributes {
            verb,
            name: "n1".into(),
            subresource,
        }
    }

    /// Allowed verdicts live for the authorized TTL, denied ones for the (shorter)
    /// unauthorized TTL; the review carries kubelet's attributes and the whole user.
    #[test]
    fn access_verdicts_have_their_own_ttls() {
        let fake = Arc::new(FakeReviewer::default());
        let authz = WebhookAuthorizer::new(fake.clone(), Duration::from_secs(300), Duration::from_secs(30));
        let alice = block(TokenAuthenticator::new(fake.clone(), Duration::ZERO).authenticate("good"))
            .unwrap()
            .unwrap();
        let t0 = Instant::now();
        let count = || fake.accesses.load(Ordering::SeqCst);
        assert!(block(authz.allowed_at(&alice, &attrs("get", "proxy"), t0)).unwrap());
        let spec = fake.last_access.lock().unwrap().clone().unwrap();
        assert_eq!(spec.user.as_deref(), Some("alice"));
        assert_eq!(spec.uid.as_deref(), Some("u-1"));
        assert_eq!(spec.groups, Some(vec!["devs".to_string()]));
        assert_eq!(spec.extra.unwrap()["scopes"], ["a"]);
        let ra = spec.resource_attributes.unwrap();
        assert_eq!(
            (
                ra.verb,
                ra.version,
                ra.resource,
                ra.subresource,
                ra.name,
                ra.group,
                ra.namespace
            ),
            (
                Some("get".into()),
                Some("v1".into()),
                Some("nodes".into()),
                Some("proxy".into()),
                Some("n1".into()),
                None,
                None
            )
        );
        assert!(block(authz.allowed_at(&alice, &attrs("get", "proxy"), t0 + Duration::from_secs(299))).unwrap());
        assert_eq!(count(), 1);
        assert!(block(authz.allowed_at(&alice, &attrs("get", "proxy"), t0 + Duration::from_secs(300))).unwrap());
        assert_eq!(count(), 2);

        assert!(!block(authz.allowed_at(&alice, &attrs("create", "proxy"), t0)).unwrap());
        assert!(!block(authz.allowed_at(&alice, &attrs("create", "proxy"), t0 + Duration::from_secs(29))).unwrap());
        assert_eq!(count(), 3);
        assert!(!block(authz.allowed_at(&alice, &attrs("create", "proxy"), t0 + Duration::from_secs(30))).unwrap());
        assert_eq!(count(), 4);
    }

    /// The cache never grows past its limit.
    #[test]
    fn the_cache_is_bounded() {
        let cache = TtlCache::new();
        let now = Instant::now();
        for i in 0..(CACHE_LIMIT * 2) {
            cache.put(i.to_string(), i, Duration::from_secs(60), now);
        }
        assert!(cache.entries.lock().unwrap().len() <= CACHE_LIMIT);
    }

    /// Fails its first `failures` reviews with a transient error (or one for good), then
    /// answers as [`FakeReviewer`].
    struct Flaky {
        inner: FakeReviewer,
        failures: AtomicUsize,
        transient: bool,
    }

    impl Flaky {
        fn failure(&self, operation: &'static str) -> Option<ReviewError> {
            let left = self.failures.load(Ordering::SeqCst);
            (left > 0).then(|| {
                self.failures.store(left - 1, Ordering::SeqCst);
                ReviewError {
                    operation,
                    transient: self.transient,
                    source: "connection closed before message completed".into(),
                }
            })
        }
    }

    impl Reviewer for Flaky {
        fn review_token(&self, review: TokenReview) -> BoxFuture<'static, Result<TokenReview, ReviewError>> {
            match self.failure("create tokenreview") {
                Some(e) => Box::pin(async move { Err(e) }),
                None => self.inner.review_token(review),
            }
        }

        fn review_access(
            &self,
            review: SubjectAccessReview,
        ) -> BoxFuture<'static, Result<SubjectAccessReview, ReviewError>> {
            match self.failure("create subjectaccessreview") {
                Some(e) => Box::pin(async move { Err(e) }),
                None => self.inner.review_access(review),
            }
        }
    }

    fn flaky(failures: usize, transient: bool) -> Arc<Flaky> {
        Arc::new(Flaky {
            inner: FakeReviewer::default(),
            failures: AtomicUsize::new(failures),
            transient,
        })
    }

    const QUICK: RetryBackoff = RetryBackoff {
        attempts: 5,
        first: Duration::from_millis(1),
        factor: 1.5,
        jitter: 0.2,
    };

    /// A transient failure is tried again, up to the attempts of the backoff; a failure for
    /// good is not; k8s.io/apiserver's default backoff is the default.
    #[tokio::test]
    async fn transient_review_failures_are_retried() {
        assert_eq!(
            RetryBackoff::default(),
            RetryBackoff {
                attempts: 5,
                first: Duration::from_millis(500),
                factor: 1.5,
                jitter: 0.2
            }
        );
        let alice = UserInfo {
            name: "alice".into(),
            ..Default::default()
        };
        let get = attrs("get", "proxy");

        let fake = flaky(4, true);
        let authz = WebhookAuthorizer::new(fake.clone(), Duration::ZERO, Duration::ZERO).with_backoff(QUICK);
        assert!(authz.allowed(&alice, &get).await.unwrap());
        assert_eq!(fake.inner.accesses.load(Ordering::SeqCst), 1);

        let fake = flaky(5, true);
        let authz = WebhookAuthorizer::new(fake.clone(), Duration::ZERO, Duration::ZERO).with_backoff(QUICK);
        let err = authz.allowed(&alice, &get).await.unwrap_err();
        assert!(err.transient && err.to_string().contains("connection closed"), "{err}");
        assert_eq!(fake.failures.load(Ordering::SeqCst), 0, "five attempts in all");
        assert_eq!(fake.inner.accesses.load(Ordering::SeqCst), 0);

        let fake = flaky(1, false);
        let authz = WebhookAuthorizer::new(fake.clone(), Duration::ZERO, Duration::ZERO).with_backoff(QUICK);
        assert!(authz.allowed(&alice, &get).await.is_err());
        assert!(
            authz.allowed(&alice, &get).await.unwrap(),
            "the next request asks again"
        );

        let fake = flaky(2, true);
        let authn = TokenAuthenticator::new(fake.clone(), Duration::ZERO).with_backoff(QUICK);
        let user = authn.authenticate("good").await.unwrap().unwrap();
        assert_eq!(user.name, "alice");
        assert_eq!(fake.inner.tokens.load(Ordering::SeqCst), 1);
    }
}
