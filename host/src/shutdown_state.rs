//! The graceful shutdown's state file, `<root-dir>/graceful_node_shutdown_state`, as kubelet's
//! shutdown manager keeps it (`pkg/kubelet/nodeshutdown/storage.go` `localStorage`,
//! `nodeshutdown_manager_linux.go` `processShutdownEvent`, `setMetrics`): `{"startTime": …,
//! "endTime": …}` (RFC 3339; Go's zero time `0001-01-01T00:00:00Z` for "not yet"), written when
//! a shutdown starts and again when its pods are stopped, read at start so
//! `kubelet_graceful_shutdown_{start,end}_time_seconds` tell of the last shutdown after a reboot.

use std::path::{Path, PathBuf};

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// The file's name in the root directory (`localStorageStateFile`).
pub const STATE_FILE: &str = "graceful_node_shutdown_state";

/// Go's zero `time.Time`, as `encoding/json` writes it.
const GO_ZERO_TIME: &str = "0001-01-01T00:00:00Z";

/// When the last shutdown started and ended (`None`: Go's zero time).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShutdownState {
    /// When pods began to be stopped.
    pub start_time: Option<Timestamp>,
    /// When the last group was done.
    pub end_time: Option<Timestamp>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct OnDisk {
    start_time: String,
    end_time: String,
}

/// The file could not be read, parsed or written; names it.
#[derive(Debug, thiserror::Error)]
#[error("graceful shutdown state {path}: {reason}")]
pub struct StateError {
    /// The file.
    pub path: PathBuf,
    /// What went wrong.
    pub reason: String,
}

fn time(text: &str) -> Option<Timestamp> {
    if text == GO_ZERO_TIME {
        return None;
    }
    text.parse().ok()
}

fn text(t: Option<Timestamp>) -> String {
    t.map_or_else(|| GO_ZERO_TIME.to_string(), |t| t.to_string())
}

impl ShutdownState {
    /// The state in `root_dir`; the default when there is no file yet.
    pub fn load(root_dir: &Path) -> Result<Self, StateError> {
        let path = root_dir.join(STATE_FILE);
        let error = |reason: String| StateError {
            path: path.clone(),
            reason,
        };
        let raw = match std::fs::read_to_string(&path) {
            Ok(raw) => raw,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => return Err(error(e.to_string())),
        };
        let on_disk: OnDisk = serde_json::from_str(&raw).map_err(|e| error(e.to_string()))?;
        Ok(ShutdownState {
            start_time: time(&on_disk.start_time),
            end_time: time(&on_disk.end_time),
        })
    }

    /// Writes the state to `root_dir` atomically (a temporary file renamed over the old one).
    pub fn store(&self, root_dir: &Path) -> Result<(), StateError> {
        let path = root_dir.join(STATE_FILE);
        let error = |reason: String| StateError {
            path: path.clone(),
            reason,
        };
        let on_disk = OnDisk {
            start_time: text(self.start_time),
            end_time: text(self.end_time),
        };
        let json = serde_json::to_string(&on_disk).map_err(|e| error(e.to_string()))?;
        let temporary = root_dir.join(format!(".{STATE_FILE}.tmp"));
        std::fs::write(&temporary, json).map_err(|e| error(e.to_string()))?;
        std::fs::rename(&temporary, &path).map_err(|e| error(e.to_string()))
    }
}

/// Seconds since the epoch, as kubelet's `timestamp(t)` gives the metrics.
pub fn epoch_seconds(t: Timestamp) -> f64 {
    t.as_nanosecond() as f64 / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_round_trips_in_kubelets_format() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(ShutdownState::load(dir.path()).unwrap(), ShutdownState::default());
        let start: Timestamp = "2026-09-25T10:00:00.5Z".parse().unwrap();
        let started = ShutdownState {
            start_time: Some(start),
            end_time: None,
        };
        started.store(dir.path()).unwrap();
        let raw = std::fs::read_to_string(dir.path().join(STATE_FILE)).unwrap();
        assert_eq!(
            raw,
            r#"{"startTime":"2026-09-25T10:00:00.5Z","endTime":"0001-01-01T00:00:00Z"}"#
        );
        assert_eq!(ShutdownState::load(dir.path()).unwrap(), started);
        assert_eq!(epoch_seconds(start), 1_790_330_400.5);
        std::fs::write(dir.path().join(STATE_FILE), "{").unwrap();
        let err = ShutdownState::load(dir.path()).unwrap_err().to_string();
        assert!(err.contains(STATE_FILE) && err.contains("EOF"), "{err}");
    }
}
