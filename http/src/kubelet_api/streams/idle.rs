//! The idle timeout of streaming connections (kubelet's `--streaming-connection-idle-timeout`,
//! 4 h by default): an exec, attach or port-forward connection on which nothing has moved in
//! either direction for that long is closed, as spdystream's idle-aware framer and wsstream's
//! deadlines close it in kubelet. Any frame or message counts, pings included.
//!
//! ```text
//! let activity = Activity::new(timeout);        // None: no limit, nothing ever expires
//! let input = activity.watch(input).take_until(activity.clone().expired());
//! let output = activity.watch(output);
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use futures::StreamExt;
use tokio::time::Instant;

/// When a connection last moved, shared by its reading and writing halves.
#[derive(Debug, Clone)]
pub struct Activity {
    start: Instant,
    /// Milliseconds from `start` to the last movement.
    last: Arc<AtomicU64>,
    /// None: the connection may stay idle for ever.
    timeout: Option<Duration>,
}

impl Activity {
    /// A connection that moved just now and may stay idle for `timeout` (for ever with none).
    pub fn new(timeout: Option<Duration>) -> Self {
        Activity {
            start: Instant::now(),
            last: Arc::new(AtomicU64::new(0)),
            timeout,
        }
    }

    /// The connection moved.
    pub fn touch(&self) {
        if self.timeout.is_some() {
            let since_start = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
            self.last.fetch_max(since_start, Ordering::Relaxed);
        }
    }

    /// Resolves once the connection has not moved for the timeout; never without one.
    pub async fn expired(self) {
        let Some(timeout) = self.timeout else {
            return std::future::pending().await;
        };
        loop {
            let last = self.start + Duration::from_millis(self.last.load(Ordering::Relaxed));
            let deadline = last + timeout;
            if Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep_until(deadline).await;
        }
    }

    /// `stream`, touching the connection at each item.
    pub fn watch<S: Stream>(&self, stream: S) -> impl Stream<Item = S::Item> {
        let activity = self.clone();
        stream.inspect(move |_| activity.touch())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Expiry waits out the timeout from the last touch, not from the start.
    #[tokio::test(start_paused = true)]
    async fn expiry_counts_from_the_last_movement() {
        let activity = Activity::new(Some(Duration::from_secs(10)));
        let start = Instant::now();
        tokio::time::sleep(Duration::from_secs(6)).await;
        activity.touch();
        activity.clone().expired().await;
        assert_eq!(start.elapsed().as_secs(), 16);
    }

    /// Items passing through a watched stream keep the connection alive.
    #[tokio::test(start_paused = true)]
    async fn a_watched_stream_touches() {
        let activity = Activity::new(Some(Duration::from_secs(5)));
        let start = Instant::now();
        let ticks = futures::stream::unfold(0, |n| async move {
            tokio::time::sleep(Duration::from_secs(3)).await;
            (n < 4).then_some(((), n + 1))
        });
        let mut watched = Box::pin(activity.watch(ticks));
        tokio::select! {
            () = activity.clone().expired() => panic!("expired while items moved"),
            () = async { while watched.next().await.is_some() {} } => {}
        }
        // Four items, 3 s apart, then the stream ended at 15 s: expiry 5 s after the last (12 s).
        activity.expired().await;
        assert_eq!(start.elapsed().as_secs(), 17);
    }

    /// Without a timeout, nothing expires.
    #[tokio::test(start_paused = true)]
    async fn no_timeout_never_expires() {
        let waited = tokio::time::timeout(Duration::from_secs(86_400), Activity::new(None).expired()).await;
        assert!(waited.is_err());
    }
}
