//! CPU and memory of processes from `/proc`, and a description of the machine.

use std::fs;
use std::time::Instant;

/// Clock ticks per second of `/proc/<pid>/stat` and `/proc/stat` (`getconf CLK_TCK`).
pub fn ticks_per_second() -> f64 {
    rustix::param::clock_ticks_per_second() as f64
}

/// utime + stime of a process, in clock ticks; `None` if it is gone.
pub fn process_ticks(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat_ticks(&stat)
}

/// utime + stime from the text of `/proc/<pid>/stat` (fields 14 and 15; the command name in
/// parentheses may hold spaces, so fields are counted after the last `)`).
fn parse_stat_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // fields[0] is field 3 (state): utime is field 14, stime field 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// utime + stime, in clock ticks, of this process's threads whose `comm` starts with one of
/// `prefixes` (threads that ended are not counted).
pub fn own_threads_ticks(prefixes: &[&str]) -> u64 {
    let Ok(dir) = fs::read_dir("/proc/self/task") else {
        return 0;
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| {
            let task = e.path();
            let comm = fs::read_to_string(task.join("comm")).ok()?;
            if !prefixes.iter().any(|p| comm.starts_with(p)) {
                return None;
            }
            parse_stat_ticks(&fs::read_to_string(task.join("stat")).ok()?)
        })
        .sum()
}

/// A `/proc/<pid>/status` value in kB (`VmRSS`, `VmHWM`).
pub fn status_kb(pid: u32, key: &str) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_status_kb(&status, key)
}

fn parse_status_kb(status: &str, key: &str) -> Option<u64> {
    status.lines().find_map(|line| {
        let value = line.strip_prefix(key)?.strip_prefix(':')?;
        value.split_whitespace().next()?.parse().ok()
    })
}

/// `memory.available` as the agent's eviction signal reads it (`host/src/signals.rs`,
/// `observe`): MemFree + Inactive(file) of `/proc/meminfo`, kubelet's capacity − working set;
/// in bytes.
pub fn memory_available() -> Option<u64> {
    memory_available_of(&fs::read_to_string("/proc/meminfo").ok()?)
}

fn memory_available_of(meminfo: &str) -> Option<u64> {
    let free = parse_status_kb(meminfo, "MemFree")?;
    let inactive_file = parse_status_kb(meminfo, "Inactive(file)")?;
    Some((free + inactive_file) * 1024)
}

/// Process IDs whose `comm` is one of `names` (`comm` is cut at 15 characters:
/// `containerd-shim-runc-v2` reads `containerd-shim`).
pub fn pids_named(names: &[&str]) -> Vec<u32> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| names.contains(&c.trim_end())))
        .collect()
}

/// Busy and total ticks of the whole machine (`/proc/stat`, line `cpu`).
pub fn machine_ticks() -> Option<(u64, u64)> {
    let stat = fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line.split_whitespace().skip(1).filter_map(|f| f.parse().ok()).collect();
    // user nice system idle iowait irq softirq steal (guest time is already in user).
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

/// CPU of a set of processes over a window: ticks at the start, per PID.
pub struct CpuWindow {
    began: Instant,
    agent: Option<(u32, u64)>,
    dockerd: Vec<(u32, u64)>,
    containerd: Vec<(u32, u64)>,
    machine_busy: u64,
}

/// CPU used during a window, in cores (CPU seconds per second).
#[derive(Debug, Clone, Copy)]
pub struct CpuUse {
    /// Length of the window, seconds.
    pub window_s: f64,
    /// The agent process.
    pub agent: Option<f64>,
    /// `dockerd`.
    pub dockerd: Option<f64>,
    /// `containerd` and the `containerd-shim` processes alive at both ends of the window
    /// (`runc` and shims that came and went are not counted).
    pub containerd: Option<f64>,
    /// Every core of the machine, everything on it (other engineers' tests included).
    pub machine: Option<f64>,
}

const CONTAINERD_NAMES: &[&str] = &["containerd", "containerd-shim"];

impl CpuWindow {
    /// Starts a window for the agent `agent_pid`, dockerd and containerd.
    pub fn start(agent_pid: Option<u32>) -> Self {
        let snap = |names: &[&str]| -> Vec<(u32, u64)> {
            pids_named(names)
                .into_iter()
                .filter_map(|p| Some((p, process_ticks(p)?)))
                .collect()
        };
        CpuWindow {
            began: Instant::now(),
            agent: agent_pid.and_then(|p| Some((p, process_ticks(p)?))),
            dockerd: snap(&["dockerd"]),
            containerd: snap(CONTAINERD_NAMES),
            machine_busy: machine_ticks().map_or(0, |(busy, _)| busy),
        }
    }

    /// Ends the window: cores used by each since [`CpuWindow::start`].
    pub fn finish(&self) -> CpuUse {
        let secs = self.began.elapsed().as_secs_f64();
        let tps = ticks_per_second();
        let cores = |ticks: u64| ticks as f64 / tps / secs;
        let sum = |set: &[(u32, u64)]| -> Option<f64> {
            if set.is_empty() {
                return None;
            }
            let used: u64 = set
                .iter()
                .filter_map(|(pid, before)| Some(process_ticks(*pid)?.saturating_sub(*before)))
                .sum();
            Some(cores(used))
        };
        CpuUse {
            window_s: secs,
            agent: self
                .agent
                .and_then(|(pid, before)| Some(cores(process_ticks(pid)?.saturating_sub(before)))),
            dockerd: sum(&self.dockerd),
            containerd: sum(&self.containerd),
            machine: machine_ticks().map(|(busy, _)| cores(busy.saturating_sub(self.machine_busy))),
        }
    }
}

/// Cores, memory, CPU model, kernel: what `BENCHMARKS.md` names the machine by.
pub fn machine_description() -> serde_json::Value {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let meminfo = fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_kb = parse_status_kb(&meminfo, "MemTotal").unwrap_or(0);
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")?
                .split_once(':')
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_default();
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    serde_json::json!({
        "cores": cores,
        "memory_gib": (mem_kb as f64 / 1024.0 / 1024.0 * 10.0).round() / 10.0,
        "cpu": model,
        "kernel": kernel.trim(),
    })
}

/// The agent binary's code and how much of it the hot-code layout gathered at its start
/// (`.text` and `.text.hot`, agent/hot-code/README.md), in bytes, from `readelf -SW`: a binary
/// built without the layout (or with a list that matches nothing) shows no hot code.
pub fn code_layout(bin: &std::path::Path) -> serde_json::Value {
    let out = std::process::Command::new("readelf")
        .args(["-SW", "--"])
        .arg(bin)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let (text, hot) = (section_size(&out, ".text"), section_size(&out, ".text.hot"));
    serde_json::json!({ "text_bytes": text, "hot_bytes": hot })
}

/// One section's size from `readelf -SW`'s table (`[Nr] Name Type Address Off Size …`).
fn section_size(readelf: &str, name: &str) -> Option<u64> {
    readelf.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_once(']')?.1.split_whitespace().collect();
        (fields.first() == Some(&name))
            .then(|| u64::from_str_radix(fields.get(4)?, 16).ok())
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Section sizes are read by exact name from readelf's wide table.
    #[test]
    fn section_sizes_by_name() {
        let table = "  [15] .text.hot         PROGBITS        00000000004fea60 4fda60 596bec 00  AX  0   0 16
  [16] .text             PROGBITS        0000000000a95680 a94680 6bbbd2 00  AX  0   0 64";
        assert_eq!(section_size(table, ".text.hot"), Some(0x596bec));
        assert_eq!(section_size(table, ".text"), Some(0x6bbbd2));
        assert_eq!(section_size(table, ".data"), None);
    }

    /// utime and stime are counted after the command name, which may hold spaces and parentheses.
    #[test]
    fn stat_ticks_skip_the_command_name() {
        let stat = "1234 (tokio (w) 1) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0 1 2 3";
        assert_eq!(parse_stat_ticks(stat), Some(300));
    }

    /// VmRSS is read in kB.
    #[test]
    fn status_values_in_kb() {
        let status = "Name:\tdockerlet\nVmHWM:\t   20480 kB\nVmRSS:\t   12345 kB\n";
        assert_eq!(parse_status_kb(status, "VmRSS"), Some(12345));
        assert_eq!(parse_status_kb(status, "VmHWM"), Some(20480));
        assert_eq!(parse_status_kb(status, "VmSwap"), None);
    }

    /// memory.available is MemFree + Inactive(file), not MemAvailable, in bytes.
    #[test]
    fn memory_available_is_free_plus_inactive_file() {
        let meminfo = "MemTotal: 4000 kB\nMemFree: 1000 kB\nMemAvailable: 3000 kB\nInactive(anon): 50 kB\nInactive(file): 200 kB\n";
        assert_eq!(memory_available_of(meminfo), Some(1200 * 1024));
        assert_eq!(memory_available_of("MemFree: 1000 kB\n"), None);
    }

    /// This process is found by its own name and uses some CPU.
    #[test]
    fn own_process_is_readable() {
        let me = std::process::id();
        assert!(process_ticks(me).is_some());
        assert!(status_kb(me, "VmRSS").unwrap_or(0) > 0);
        assert!(machine_ticks().is_some_and(|(busy, total)| busy <= total && total > 0));
    }
}
