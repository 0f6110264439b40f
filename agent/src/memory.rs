//! Giving memory back after a burst. glibc keeps what a burst freed (the 110 Pods a manifest
//! pass parsed, a `/pods` answer, a relist) on its arenas' free lists rather than returning it,
//! and every thread that allocates (the HTTP servers' workers, the blocking pool) has an arena of
//! its own: the agent's RSS stays at the burst's peak. [`spawn_trimmer`] asks glibc, once a
//! while, to hand free pages back (`malloc_trim(0)`: the top of every arena, and whole free pages
//! inside them). It costs a walk over the free lists, well under a millisecond for this heap.
//!
//! [`limit_arenas`] caps the arenas at [`ARENA_MAX`] at start, so fewer of them hold free memory.
//!
//! No crate wraps `malloc_trim` and `mallopt` safely, so these are the agent's only `unsafe`
//! calls.

use std::time::Duration;

/// How long an idle thread of the actor system's blocking pool stays (tokio's default is 10 s,
/// which the periodic passes every 10 s keep renewing). Its jobs are short file and cgroup
/// operations (a pod's files, volume directories, the stats pass); a burst of pod starts spawns
/// a thread per job, and each idle one keeps the stack pages it touched and its allocator cache
/// until it exits. (Capping the pool at 8 or 16 threads as well took P4 lower still, but made
/// the OOMKilled reason of a systemd-driver pod on cgroup v2 arrive too late in the VM, twice:
/// the cap is not set.)
const BLOCKING_KEEP_ALIVE: Duration = Duration::from_secs(2);

/// The actor system's runtime: actix's (one thread, I/O and timers) whose blocking pool's idle
/// threads exit sooner.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .thread_keep_alive(BLOCKING_KEEP_ALIVE)
        .build()
        .expect("the actor system's runtime builds")
}

/// How often the allocator is trimmed.
pub const TRIM_EVERY: Duration = Duration::from_secs(30);

/// Arenas glibc may create at most (its default is 8 per core). The agent's allocations are
/// nearly all on the actor thread; the HTTP workers and blocking-pool threads allocate little and
/// briefly, and an arena each only multiplies the memory kept free after a burst.
const ARENA_MAX: i32 = 2;

/// The variable glibc itself reads for the cap; when the operator sets it, it wins.
const ARENA_MAX_ENV: &str = "MALLOC_ARENA_MAX";

/// The cap to set: none when `MALLOC_ARENA_MAX` is set (glibc has applied it already),
/// otherwise [`ARENA_MAX`].
fn arena_cap(env: Option<std::ffi::OsString>) -> Option<i32> {
    match env {
        Some(_) => None,
        None => Some(ARENA_MAX),
    }
}

/// Cap glibc's arenas; call first thing in `main`, before any thread starts.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn limit_arenas() {
    let Some(cap) = arena_cap(std::env::var_os(ARENA_MAX_ENV)) else {
        return;
    };
    // SAFETY: mallopt sets one allocator parameter under glibc's own lock; M_ARENA_MAX takes
    // any positive count, and no arena beyond it exists yet.
    let set = unsafe { libc::mallopt(libc::M_ARENA_MAX, cap) } == 1;
    if !set {
        tracing::debug!("glibc refused M_ARENA_MAX; keeping its default");
    }
}

/// Other C libraries have no arenas to cap.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn limit_arenas() {}

/// Trim glibc's arenas every `every`, on the actor system (the call is quick and takes no lock
/// the actors wait on for long).
pub fn spawn_trimmer(every: Duration) {
    actix::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            trim();
        }
    });
}

/// Return freed memory to the kernel.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn trim() {
    // SAFETY: malloc_trim takes a padding size and touches only glibc's own allocator state,
    // under its own locks; it has no precondition a caller could break.
    let released = unsafe { libc::malloc_trim(0) } != 0;
    tracing::trace!(released, "trimmed the allocator");
}

/// Other C libraries give memory back on their own (musl) or have no such call.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn trim() {}

#[cfg(test)]
mod tests {
    /// Trimming after freeing a burst of allocations never fails or crashes.
    #[test]
    fn trim_after_a_burst_is_harmless() {
        let burst: Vec<Vec<u8>> = (0..1000).map(|i| vec![i as u8; 4096]).collect();
        drop(burst);
        super::limit_arenas();
        super::trim();
        let again: Vec<u8> = vec![7; 1 << 20];
        assert_eq!(again[12345], 7);
    }

    /// The operator's MALLOC_ARENA_MAX is left to glibc; without it the agent's cap applies.
    #[test]
    fn the_environment_cap_wins() {
        assert_eq!(super::arena_cap(Some("1".into())), None);
        assert_eq!(super::arena_cap(None), Some(super::ARENA_MAX));
    }
}
