//! CertificateManagerActor: the node's client certificate renewed before it expires
//! (`rotateCertificates`), as client-go's certificate manager runs in kubelet
//! (`k8s.io/client-go/util/certificate/certificate_manager.go`, `Start`, `rotateCerts`).
//!
//! | Message / trigger | From       | Effect                                                    |
//! |-------------------|------------|-----------------------------------------------------------|
//! | rotation deadline | self       | a new key and CSR, waited for; stored and presented from then on |
//! | GetActorState     | Supervisor | debug snapshot: the certificate, the deadline, the last rotation, the last error |
//! | Panic             | Supervisor | test-only fault hook                                      |
//!
//! The deadline is drawn at 70–90 % of the certificate's lifetime from its `notBefore`
//! (`jitteryDuration`), so nodes made together do not all renew at once; with no certificate
//! yet it is now. A failed rotation is tried again after 2, 4, 8, 16 and 32 s (±10 %,
//! `wait.Backoff{2s, ×2, jitter 0.1, 5 steps}`), then every 32 s; each failure counts in
//! `kubelet_certificate_manager_client_expiration_renew_errors`. The seconds left are
//! `kubelet_certificate_manager_client_ttl_seconds`.
//!
//! As kubelet's `UpdateTransport` (`pkg/kubelet/certificate/transport.go`, `exitAfter` 5 min):
//! when no valid certificate has been had for 5 minutes and the API server answers (a
//! rotation got an answer, even a refusal), the agent exits (1), so its supervisor restarts it
//! and the bootstrap credentials can set the node up again; an API server that does not answer
//! is only logged.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use actix::prelude::*;
use dockerlet_kube::certificates::{rotation_deadline, CertPair, CertificateRotation};
use dockerlet_metrics::Metrics;
use serde_json::json;

use crate::inspect::Inspect;

/// A number in [0, 1) for the jitter: std's randomly keyed hasher over the time (no random
/// number crate is needed for this, and the workspace's would add a second version of it).
fn jitter() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// The steps of the retry after a failed rotation (client-go's back-off), then its last step
/// for ever (`wait.PollInfinite(32*time.Second, …)`).
pub fn retry_delay(failures: u32, jitter: f64) -> Duration {
    let base = match failures {
        0 | 1 => 2.0,
        n if n <= 5 => 2.0 * 2f64.powi(n as i32 - 1),
        _ => return Duration::from_secs(32),
    };
    Duration::from_secs_f64(base * (1.0 + 0.1 * jitter.clamp(0.0, 1.0)))
}

/// How long the agent runs on without a valid certificate before it exits (`exitAfter`).
pub const EXIT_AFTER: Duration = Duration::from_secs(5 * 60);
/// How often the certificate's validity is checked.
const CHECK_EVERY: Duration = Duration::from_secs(10);

/// What to do about a certificate that is not valid (kubelet's `updateTransport`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// A valid certificate, or not for long enough yet.
    Fine,
    /// None for [`EXIT_AFTER`] and the server answers: exit.
    Exit,
    /// None for [`EXIT_AFTER`] and the server does not answer: say so, go on.
    Unreachable,
}

/// kubelet's verdict: `valid` now, a valid certificate last seen `since_valid` ago, and
/// whether the API server answered the last request (`ServerHealthy`).
pub fn expiry(valid: bool, since_valid: Duration, server_answers: bool) -> Expiry {
    match (valid, since_valid > EXIT_AFTER, server_answers) {
        (true, _, _) | (false, false, _) => Expiry::Fine,
        (false, true, true) => Expiry::Exit,
        (false, true, false) => Expiry::Unreachable,
    }
}

/// The actor.
pub struct CertificateManagerActor {
    rotation: Arc<dyn CertificateRotation>,
    metrics: Option<Arc<Metrics>>,
    /// The pair presented now.
    current: Option<CertPair>,
    /// When the next rotation is due.
    deadline: Option<SystemTime>,
    /// Failed rotations in a row.
    failures: u32,
    rotations: u64,
    /// The CSR of the last rotation and when it ended.
    last_rotation: Option<(String, SystemTime)>,
    last_error: Option<String>,
    rotating: bool,
    timer: Option<SpawnHandle>,
    /// When a valid certificate was last had.
    last_valid: std::time::Instant,
    /// The API server answered the last request (`ServerHealthy`).
    server_answers: bool,
    handled: u64,
}

impl CertificateManagerActor {
    /// A manager of `rotation`'s certificate.
    pub fn new(rotation: Arc<dyn CertificateRotation>, metrics: Option<Arc<Metrics>>) -> Self {
        let current = rotation.current();
        CertificateManagerActor {
            rotation,
            metrics,
            current,
            deadline: None,
            failures: 0,
            rotations: 0,
            last_rotation: None,
            last_error: None,
            rotating: false,
            timer: None,
            last_valid: std::time::Instant::now(),
            server_answers: false,
            handled: 0,
        }
    }

    /// kubelet's transport check: exit after [`EXIT_AFTER`] without a valid certificate.
    fn check_expiry(&mut self) {
        let valid = self.current.as_ref().is_some_and(|p| !p.expired_at(SystemTime::now()));
        if valid {
            self.last_valid = std::time::Instant::now();
        }
        match expiry(valid, self.last_valid.elapsed(), self.server_answers) {
            Expiry::Fine => {}
            Expiry::Exit => {
                tracing::error!("No valid client certificate is found and the server is responsive, exiting.");
                std::process::exit(1);
            }
            Expiry::Unreachable => tracing::error!(
                shutdown_threshold = ?EXIT_AFTER,
                "No valid client certificate is found but the server is not responsive. A restart may be necessary to retrieve new initial credentials."
            ),
        }
    }

    fn publish_ttl(&self) {
        if let (Some(metrics), Some(pair)) = (&self.metrics, &self.current) {
            let at = pair
                .not_after
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(1, |d| d.as_secs().max(1));
            metrics.client_certificate_ttl.set_not_after(at);
        }
    }

    /// Waits for the next deadline (drawn anew), then rotates.
    fn schedule(&mut self, ctx: &mut Context<Self>) {
        let deadline = match &self.current {
            Some(pair) => rotation_deadline(pair, 0.7 + 0.2 * jitter()),
            None => SystemTime::now(),
        };
        self.deadline = Some(deadline);
        let wait = deadline.duration_since(SystemTime::now()).unwrap_or_default();
        if let Some(pair) = &self.current {
            tracing::info!(
                expiration = %humantime::format_rfc3339_seconds(pair.not_after),
                rotation_deadline = %humantime::format_rfc3339_seconds(deadline),
                "client certificate expiration and rotation deadline"
            );
        }
        self.wait_then_rotate(ctx, wait);
    }

    fn wait_then_rotate(&mut self, ctx: &mut Context<Self>, wait: Duration) {
        if let Some(timer) = self.timer.take() {
            ctx.cancel_future(timer);
        }
        self.timer = Some(ctx.run_later(wait, |act, ctx| act.rotate(ctx)));
    }

    fn rotate(&mut self, ctx: &mut Context<Self>) {
        if self.rotating {
            return;
        }
        self.rotating = true;
        tracing::info!("rotating the client certificate");
        let rotation = self.rotation.clone();
        let work = async move { rotation.rotate().await };
        ctx.spawn(work.into_actor(self).map(|result, act, ctx| {
            act.rotating = false;
            match result {
                Ok((pair, csr)) => {
                    tracing::info!(
                        csr = %csr,
                        subject = %pair.common_name,
                        expiration = %humantime::format_rfc3339_seconds(pair.not_after),
                        "client certificate rotated"
                    );
                    act.current = Some(pair);
                    act.server_answers = true;
                    act.failures = 0;
                    act.rotations += 1;
                    act.last_rotation = Some((csr, SystemTime::now()));
                    act.last_error = None;
                    act.publish_ttl();
                    act.schedule(ctx);
                }
                Err(e) => {
                    act.failures += 1;
                    act.server_answers = e.server_answered();
                    let error = crate::error_chain(&e);
                    if let Some(metrics) = &act.metrics {
                        metrics.client_certificate_renew_errors.inc();
                    }
                    let retry = retry_delay(act.failures, jitter());
                    tracing::error!(error = %error, failures = act.failures, retry_in = ?retry, "client certificate rotation failed");
                    act.last_error = Some(error);
                    act.deadline = Some(SystemTime::now() + retry);
                    act.wait_then_rotate(ctx, retry);
                }
            }
        }));
    }
}

impl Actor for CertificateManagerActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        tracing::info!("client certificate rotation is enabled");
        self.publish_ttl();
        self.schedule(ctx);
        ctx.run_interval(CHECK_EVERY, |act, _| act.check_expiry());
    }
}

impl Inspect for CertificateManagerActor {
    const KIND: &'static str = "CertificateManagerActor";
    const NAME: &'static str = "certificate-manager";

    fn handled(&mut self) -> &mut u64 {
        &mut self.handled
    }

    fn last_error(&self) -> Option<String> {
        self.last_error.clone()
    }

    fn detail(&self) -> serde_json::Value {
        let time = |t: SystemTime| humantime::format_rfc3339_seconds(t).to_string();
        json!({
            "subject": self.current.as_ref().map(|p| p.common_name.clone()),
            "not_before": self.current.as_ref().map(|p| time(p.not_before)),
            "not_after": self.current.as_ref().map(|p| time(p.not_after)),
            "rotation_deadline": self.deadline.map(time),
            "rotating": self.rotating,
            "rotations": self.rotations,
            "failures_in_a_row": self.failures,
            "last_rotation_csr": self.last_rotation.as_ref().map(|(csr, _)| csr.clone()),
            "last_rotation": self.last_rotation.as_ref().map(|(_, at)| time(*at)),
        })
    }
}

crate::supervised!(CertificateManagerActor);

#[cfg(test)]
mod tests {
    use super::*;
    use dockerlet_kube::certificates::CertError;
    use std::sync::Mutex;

    /// kubelet's `updateTransport`: exit only after 5 minutes without a valid certificate,
    /// and only when the server answers.
    #[test]
    fn without_a_valid_certificate_for_five_minutes_the_agent_exits_if_the_server_answers() {
        let min = |m: u64| Duration::from_secs(60 * m);
        assert_eq!(expiry(true, min(60), true), Expiry::Fine);
        assert_eq!(expiry(false, min(4), true), Expiry::Fine);
        assert_eq!(expiry(false, min(6), true), Expiry::Exit);
        assert_eq!(expiry(false, min(6), false), Expiry::Unreachable);
    }

    #[test]
    fn a_failed_rotation_is_retried_as_client_go_backs_off() {
        let secs = |n| retry_delay(n, 0.0).as_secs_f64();
        assert_eq!(
            [secs(1), secs(2), secs(3), secs(4), secs(5)],
            [2.0, 4.0, 8.0, 16.0, 32.0]
        );
        assert_eq!(secs(6), 32.0);
        assert_eq!(secs(60), 32.0);
        assert!((retry_delay(2, 1.0).as_secs_f64() - 4.4).abs() < 1e-9);
    }

    fn pair(not_before: SystemTime, lifetime: Duration) -> CertPair {
        CertPair {
            cert_pem: String::new(),
            key_pem: String::new(),
            not_before,
            not_after: not_before + lifetime,
            common_name: "system:node:n".into(),
            organizations: vec!["system:nodes".into()],
        }
    }

    /// A rotation that fails `fail` times, then issues a pair of `lifetime`; counts its calls.
    #[derive(Debug)]
    struct Fake {
        current: Mutex<Option<CertPair>>,
        fail: Mutex<u32>,
        calls: Mutex<u32>,
        lifetime: Duration,
    }

    #[async_trait::async_trait]
    impl CertificateRotation for Fake {
        fn current(&self) -> Option<CertPair> {
            self.current.lock().unwrap().clone()
        }

        async fn rotate(&self) -> Result<(CertPair, String), CertError> {
            *self.calls.lock().unwrap() += 1;
            let mut fail = self.fail.lock().unwrap();
            if *fail > 0 {
                *fail -= 1;
                return Err(CertError::Deleted { name: "csr-x".into() });
            }
            let issued = pair(SystemTime::now(), self.lifetime);
            *self.current.lock().unwrap() = Some(issued.clone());
            Ok((issued, format!("csr-{}", self.calls.lock().unwrap())))
        }
    }

    #[actix::test]
    async fn without_a_certificate_it_rotates_at_once_and_retries_a_failure() {
        tokio::time::pause();
        let fake = Arc::new(Fake {
            current: Mutex::new(None),
            fail: Mutex::new(1),
            calls: Mutex::new(0),
            lifetime: Duration::from_secs(3600),
        });
        let metrics = Arc::new(Metrics::default());
        let addr = CertificateManagerActor::new(fake.clone(), Some(metrics.clone())).start();
        // First try at once (fails), the retry 2–2.2 s later.
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(*fake.calls.lock().unwrap(), 1);
        assert_eq!(metrics.client_certificate_renew_errors.get(), 1);
        let state = addr.send(dockerlet_messages::debug::GetActorState).await.unwrap();
        assert!(state.last_error.unwrap().contains("csr-x"));
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert_eq!(*fake.calls.lock().unwrap(), 2);
        let state = addr.send(dockerlet_messages::debug::GetActorState).await.unwrap();
        assert_eq!(state.detail["rotations"], 1);
        assert_eq!(state.detail["last_rotation_csr"], "csr-2");
        assert!(state.last_error.is_none());
        // The next deadline is 70–90 % into the new hour-long certificate.
        let left = metrics.client_certificate_ttl.seconds_left(
            SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap()
                .as_secs_f64(),
        );
        assert!((3590.0..=3600.0).contains(&left), "{left}");
    }

    #[actix::test]
    async fn a_certificate_is_renewed_at_70_to_90_percent_of_its_lifetime() {
        tokio::time::pause();
        let now = SystemTime::now();
        let fake = Arc::new(Fake {
            current: Mutex::new(Some(pair(now, Duration::from_secs(10)))),
            fail: Mutex::new(0),
            calls: Mutex::new(0),
            lifetime: Duration::from_secs(3600),
        });
        let addr = CertificateManagerActor::new(fake.clone(), None).start();
        let state = addr.send(dockerlet_messages::debug::GetActorState).await.unwrap();
        let deadline: humantime::Timestamp = state.detail["rotation_deadline"].as_str().unwrap().parse().unwrap();
        let after = SystemTime::from(deadline)
            .duration_since(now - Duration::from_secs(1))
            .unwrap();
        assert!(
            (Duration::from_secs(7)..=Duration::from_secs(10)).contains(&after),
            "{after:?}"
        );
        tokio::time::sleep(Duration::from_millis(6000)).await;
        assert_eq!(*fake.calls.lock().unwrap(), 0, "not before 70 %");
        tokio::time::sleep(Duration::from_millis(3500)).await;
        assert_eq!(*fake.calls.lock().unwrap(), 1, "by 90 %");
    }
}
