//! systemd-logind for graceful node shutdown, as kubelet's
//! `pkg/kubelet/nodeshutdown/systemd/inhibit_linux.go` uses it: read `InhibitDelayMaxUSec`,
//! raise it with a `logind.conf.d` drop-in and a reload (SIGHUP to `systemd-logind.service`
//! through systemd), take a *delay* inhibitor lock on shutdown, and watch `PrepareForShutdown`.
//! The lock is a file descriptor: closing it ([`InhibitLock`] dropped) lets the shutdown go on.
//! Blocking: call on a thread of its own or `spawn_blocking`.

use std::path::{Path, PathBuf};
use std::time::Duration;

const LOGIND: &str = "org.freedesktop.login1";
const LOGIND_PATH: &str = "/org/freedesktop/login1";
const LOGIND_MANAGER: &str = "org.freedesktop.login1.Manager";
const SYSTEMD: &str = "org.freedesktop.systemd1";
const SYSTEMD_PATH: &str = "/org/freedesktop/systemd1";
const SYSTEMD_MANAGER: &str = "org.freedesktop.systemd1.Manager";

/// Where kubelet writes its logind drop-in.
pub const LOGIND_CONF_DIR: &str = "/etc/systemd/logind.conf.d";
/// The drop-in's name (kubelet's).
pub const DROP_IN: &str = "99-kubelet.conf";

/// What logind or systemd did not do.
#[derive(Debug, thiserror::Error)]
pub enum LogindError {
    /// The system bus could not be reached.
    #[error("cannot reach the system D-Bus (graceful node shutdown needs systemd-logind): {0}")]
    Connect(#[source] Box<zbus::Error>),
    /// A call failed.
    #[error("{what}: {source}")]
    Call {
        /// What was asked, in words.
        what: &'static str,
        /// The bus's answer.
        #[source]
        source: Box<zbus::Error>,
    },
    /// The drop-in could not be written.
    #[error("failed writing logind shutdown inhibit override file {path}: {source}")]
    DropIn {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// A delay inhibitor lock: the shutdown waits (up to `InhibitDelayMaxSec`) until it is dropped.
#[derive(Debug)]
pub struct InhibitLock(#[allow(dead_code)] std::os::fd::OwnedFd);

/// systemd-logind on the system bus.
#[derive(Debug, Clone)]
pub struct Logind {
    connection: zbus::blocking::Connection,
}

impl Logind {
    /// Connect to the system bus.
    pub fn connect() -> Result<Self, LogindError> {
        let connection = zbus::blocking::Connection::system().map_err(|e| LogindError::Connect(Box::new(e)))?;
        Ok(Logind { connection })
    }

    fn call<B, R>(&self, what: &'static str, to: (&str, &str, &str), method: &str, body: &B) -> Result<R, LogindError>
    where
        B: serde::Serialize + zbus::zvariant::DynamicType,
        R: for<'d> serde::Deserialize<'d> + zbus::zvariant::Type,
    {
        let failed = |e: zbus::Error| LogindError::Call {
            what,
            source: Box::new(e),
        };
        let (destination, path, interface) = to;
        let reply = self
            .connection
            .call_method(Some(destination), path, Some(interface), method, body)
            .map_err(failed)?;
        reply.body().deserialize::<R>().map_err(failed)
    }

    /// logind's `InhibitDelayMaxUSec`: the longest a delay inhibitor holds a shutdown.
    pub fn inhibit_delay_max(&self) -> Result<Duration, LogindError> {
        let what = "failed reading InhibitDelayMaxUSec property from logind";
        let value: zbus::zvariant::OwnedValue = self.call(
            what,
            (LOGIND, LOGIND_PATH, "org.freedesktop.DBus.Properties"),
            "Get",
            &(LOGIND_MANAGER, "InhibitDelayMaxUSec"),
        )?;
        let micros = u64::try_from(value).map_err(|e| LogindError::Call {
            what,
            source: Box::new(e.into()),
        })?;
        Ok(Duration::from_micros(micros))
    }

    /// Make logind read its configuration again (SIGHUP to `systemd-logind.service`).
    pub fn reload(&self) -> Result<(), LogindError> {
        const SIGHUP: i32 = 1;
        self.call::<_, ()>(
            "unable to reload logind conf",
            (SYSTEMD, SYSTEMD_PATH, SYSTEMD_MANAGER),
            "KillUnit",
            &("systemd-logind.service", "all", SIGHUP),
        )
    }

    /// Take a delay inhibitor lock on shutdown, named as kubelet names its own.
    pub fn inhibit_shutdown(&self) -> Result<InhibitLock, LogindError> {
        let fd: zbus::zvariant::OwnedFd = self.call(
            "failed creating systemd inhibitor",
            (LOGIND, LOGIND_PATH, LOGIND_MANAGER),
            "Inhibit",
            &(
                "shutdown",
                "kubelet",
                "Kubelet needs time to handle node shutdown",
                "delay",
            ),
        )?;
        Ok(InhibitLock(fd.into()))
    }

    /// logind's `PrepareForShutdown` signals, blocking: `true` when a shutdown begins, `false`
    /// when it was cancelled; an error for a signal without a boolean. The iterator ends when
    /// the bus connection does.
    pub fn shutdown_signals(&self) -> Result<impl Iterator<Item = Result<bool, LogindError>>, LogindError> {
        let failed = |what: &'static str| {
            move |e: zbus::Error| LogindError::Call {
                what,
                source: Box::new(e),
            }
        };
        let rule = zbus::MatchRule::builder()
            .msg_type(zbus::message::Type::Signal)
            .interface(LOGIND_MANAGER)
            .and_then(|b| b.member("PrepareForShutdown"))
            .and_then(|b| b.path(LOGIND_PATH))
            .map_err(failed("failed to monitor shutdown"))?
            .build();
        let messages = zbus::blocking::MessageIterator::for_match_rule(rule, &self.connection, Some(16))
            .map_err(failed("failed to monitor shutdown"))?;
        Ok(messages.map(move |message| {
            message.and_then(|m| m.body().deserialize::<bool>()).map_err(failed(
                "Failed obtaining shutdown event, PrepareForShutdown event was not bool type as expected",
            ))
        }))
    }
}

/// What [`watch`] reports.
#[derive(Debug)]
pub enum WatchEvent {
    /// logind's delay was raised with the drop-in at `path`.
    Raised {
        /// The drop-in.
        path: PathBuf,
        /// The delay before.
        from: Duration,
        /// The delay now.
        to: Duration,
    },
    /// The inhibitor lock is taken: keep it until the pods are stopped.
    Armed {
        /// The connection, to take the lock again after a cancelled shutdown.
        logind: Logind,
        /// The lock.
        lock: InhibitLock,
    },
    /// `PrepareForShutdown`: a shutdown begins (`true`) or was cancelled (`false`).
    PrepareForShutdown(bool),
    /// Something failed; the watch goes on where it can.
    Failed(WatchError),
}

/// Why the watch could not start or went on without a signal.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// logind or systemd refused.
    #[error(transparent)]
    Logind(#[from] LogindError),
    /// logind kept a shorter delay than asked for.
    #[error(
        "node shutdown manager was unable to update logind InhibitDelayMaxSec to {requested:?} (ShutdownGracePeriod), current value of InhibitDelayMaxSec ({updated:?}) is less than requested ShutdownGracePeriod"
    )]
    DelayTooShort {
        /// What the groups need.
        requested: Duration,
        /// What logind has.
        updated: Duration,
    },
    /// The bus connection ended.
    #[error("Ended to watching the node for shutdown events")]
    Ended,
}

/// kubelet's shutdown manager `start`: raise logind's delay to `requested` when it is lower (the
/// drop-in in `conf_dir`, a reload, and a read-back), take the lock.
fn arm(
    requested: Duration,
    conf_dir: &Path,
    report: &mut impl FnMut(WatchEvent) -> bool,
) -> Result<(Logind, InhibitLock), WatchError> {
    let logind = Logind::connect()?;
    let current = logind.inhibit_delay_max()?;
    if requested > current {
        let path = override_inhibit_delay(conf_dir, requested)?;
        logind.reload()?;
        let updated = logind.inhibit_delay_max()?;
        if requested > updated {
            return Err(WatchError::DelayTooShort { requested, updated });
        }
        report(WatchEvent::Raised {
            path,
            from: current,
            to: updated,
        });
    }
    let lock = logind.inhibit_shutdown()?;
    Ok((logind, lock))
}

/// Watch for node shutdowns until `report` answers `false` (blocking: run on a thread of its
/// own): arm, then report each `PrepareForShutdown`; when the connection ends, again after
/// `reconnect`. A first start that fails is reported and not retried (kubelet logs "Failed to
/// start node shutdown manager" and goes on without it).
pub fn watch(requested: Duration, conf_dir: &Path, reconnect: Duration, mut report: impl FnMut(WatchEvent) -> bool) {
    let mut started = false;
    loop {
        let go_on = match arm(requested, conf_dir, &mut report) {
            Ok((logind, lock)) => {
                started = true;
                let signals = logind.shutdown_signals();
                let mut go_on = report(WatchEvent::Armed {
                    logind: logind.clone(),
                    lock,
                });
                match signals {
                    Ok(signals) => {
                        for signal in signals {
                            if !go_on {
                                break;
                            }
                            go_on = report(match signal {
                                Ok(active) => WatchEvent::PrepareForShutdown(active),
                                Err(e) => WatchEvent::Failed(e.into()),
                            });
                        }
                        go_on && report(WatchEvent::Failed(WatchError::Ended))
                    }
                    Err(e) => go_on && report(WatchEvent::Failed(e.into())),
                }
            }
            Err(e) => report(WatchEvent::Failed(e)),
        };
        if !started || !go_on {
            return;
        }
        std::thread::sleep(reconnect);
    }
}

/// Write the drop-in that raises logind's `InhibitDelayMaxSec` to `delay` in `dir` (kubelet's
/// `OverrideInhibitDelay`; [`LOGIND_CONF_DIR`] on a host).
pub fn override_inhibit_delay(dir: &Path, delay: Duration) -> Result<PathBuf, LogindError> {
    let path = dir.join(DROP_IN);
    let failed = |source| LogindError::DropIn {
        path: path.clone(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(failed)?;
    let text = format!(
        "# Kubelet logind override\n[Login]\nInhibitDelayMaxSec={}\n",
        delay.as_secs_f64().round()
    );
    std::fs::write(&path, text).map_err(failed)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The drop-in as kubelet writes it: whole seconds, under `[Login]`.
    #[test]
    fn drop_in_raises_the_inhibit_delay() {
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("logind.conf.d");
        let path = override_inhibit_delay(&conf, Duration::from_secs(30)).unwrap();
        assert_eq!(path, conf.join("99-kubelet.conf"));
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "# Kubelet logind override\n[Login]\nInhibitDelayMaxSec=30\n"
        );
        let unwritable = override_inhibit_delay(&path.join("no"), Duration::from_secs(1)).unwrap_err();
        assert!(unwritable.to_string().contains("99-kubelet.conf"), "{unwritable}");
    }
}
