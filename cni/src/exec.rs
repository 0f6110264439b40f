//! Running one plugin by the CNI spec's protocol: the command and the sandbox in `CNI_*`
//! environment variables, the plugin's configuration on stdin, a result or an error object on
//! stdout (libcni's `pkg/invoke`). The plugin is killed when it overruns its time.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde::Deserialize;
use tokio::io::AsyncWriteExt;

use crate::error::PluginError;

/// The first executable file `plugin` in `dirs` (libcni's `invoke.FindInPath`).
pub fn find_plugin(plugin: &str, dirs: &[PathBuf]) -> Result<PathBuf, PluginError> {
    let not_found = || PluginError::NotFound {
        plugin: plugin.to_string(),
        dirs: dirs.to_vec(),
    };
    // A type naming a path would run anything: the spec's types are plain names.
    if plugin.is_empty() || plugin.contains('/') {
        return Err(not_found());
    }
    dirs.iter()
        .map(|d| d.join(plugin))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
        .ok_or_else(not_found)
}

/// One call of a plugin.
#[derive(Debug, Clone)]
pub struct Invocation<'a> {
    /// `ADD`, `DEL`, `CHECK`, `STATUS`, `VERSION`.
    pub command: &'a str,
    /// `CNI_CONTAINERID`.
    pub container_id: &'a str,
    /// `CNI_NETNS` (empty for a sandbox whose namespace is gone, as on DEL after a crash).
    pub netns: &'a str,
    /// `CNI_IFNAME`.
    pub ifname: &'a str,
    /// `CNI_ARGS`: `K=V` pairs joined by `;`.
    pub args: &'a [(String, String)],
    /// The binary directories (`CNI_PATH`).
    pub bin_dirs: &'a [PathBuf],
    /// The longest the plugin may run.
    pub timeout: Duration,
}

/// The spec's error object.
#[derive(Debug, Deserialize)]
struct ErrorObject {
    code: u32,
    #[serde(default)]
    msg: String,
    #[serde(default)]
    details: String,
}

/// Runs `plugin` with `config` on stdin; its stdout when it exits 0.
pub async fn invoke(plugin: &str, config: &[u8], call: &Invocation<'_>) -> Result<Vec<u8>, PluginError> {
    let path = find_plugin(plugin, call.bin_dirs)?;
    let spawn_error = |source| PluginError::Spawn {
        plugin: plugin.to_string(),
        source,
    };
    let cni_path = std::env::join_paths(call.bin_dirs).map_err(|e| spawn_error(std::io::Error::other(e)))?;
    let args: Vec<String> = call.args.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let mut child = tokio::process::Command::new(&path)
        .env("CNI_COMMAND", call.command)
        .env("CNI_CONTAINERID", call.container_id)
        .env("CNI_NETNS", call.netns)
        .env("CNI_IFNAME", call.ifname)
        .env("CNI_ARGS", args.join(";"))
        .env("CNI_PATH", cni_path)
        .current_dir(path.parent().unwrap_or(Path::new("/")))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(spawn_error)?;
    let mut stdin = child.stdin.take();
    let run = async {
        if let Some(stdin) = stdin.as_mut() {
            // A plugin that exits without reading its configuration closes the pipe: its exit
            // status says what happened.
            let _ = stdin.write_all(config).await;
        }
        drop(stdin.take());
        child.wait_with_output().await
    };
    let output = match tokio::time::timeout(call.timeout, run).await {
        Ok(output) => output.map_err(spawn_error)?,
        Err(_) => {
            return Err(PluginError::Timeout {
                plugin: plugin.to_string(),
                timeout: call.timeout,
            })
        }
    };
    if output.status.success() {
        return Ok(output.stdout);
    }
    if let Ok(e) = serde_json::from_slice::<ErrorObject>(&output.stdout) {
        return Err(PluginError::Failed {
            code: e.code,
            msg: e.msg,
            details: e.details,
        });
    }
    let text = [output.stdout, output.stderr]
        .iter()
        .map(|b| String::from_utf8_lossy(b).trim().to_string())
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("\n");
    if text.is_empty() {
        Err(PluginError::FailedSilently { status: output.status })
    } else {
        Err(PluginError::FailedWithOutput { output: text })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A plugin `name` in a new directory: a shell script with `body`.
    pub(crate) fn script_plugin(dir: &Path, name: &str, body: &str) {
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }

    fn call<'a>(bin: &'a [PathBuf], args: &'a [(String, String)], timeout: Duration) -> Invocation<'a> {
        Invocation {
            command: "ADD",
            container_id: "abc",
            netns: "/proc/1/ns/net",
            ifname: "eth0",
            args,
            bin_dirs: bin,
            timeout,
        }
    }

    /// The environment and stdin reach the plugin; its stdout comes back.
    #[tokio::test]
    async fn the_protocol_reaches_the_plugin() {
        let dir = tempfile::tempdir().expect("tempdir");
        script_plugin(
            dir.path(),
            "echoer",
            r#"conf=$(cat); printf '{"env":"%s|%s|%s|%s|%s|%s","conf":%s}' "$CNI_COMMAND" "$CNI_CONTAINERID" "$CNI_NETNS" "$CNI_IFNAME" "$CNI_ARGS" "$CNI_PATH" "$conf""#,
        );
        let bin = vec![PathBuf::from("/nonexistent"), dir.path().to_path_buf()];
        let args = vec![
            ("IgnoreUnknown".to_string(), "1".to_string()),
            ("K8S_POD_NAME".into(), "p".into()),
        ];
        let out = invoke("echoer", br#"{"a":1}"#, &call(&bin, &args, Duration::from_secs(10)))
            .await
            .expect("runs");
        let v: serde_json::Value = serde_json::from_slice(&out).expect("json");
        assert_eq!(
            v["env"],
            format!(
                "ADD|abc|/proc/1/ns/net|eth0|IgnoreUnknown=1;K8S_POD_NAME=p|/nonexistent:{}",
                dir.path().display()
            )
        );
        assert_eq!(v["conf"]["a"], 1);
    }

    /// A CNI error object, plain output, silence, a hang and a missing binary each give their
    /// own error.
    #[tokio::test]
    async fn failures_say_what_the_plugin_said() {
        let dir = tempfile::tempdir().expect("tempdir");
        script_plugin(
            dir.path(),
            "err",
            r#"cat >/dev/null; echo '{"cniVersion":"1.0.0","code":11,"msg":"no addresses","details":"range full"}'; exit 1"#,
        );
        script_plugin(dir.path(), "garbage", "cat >/dev/null; echo 'panic: oops' >&2; exit 2");
        script_plugin(dir.path(), "silent", "exit 3");
        script_plugin(dir.path(), "hang", "exec sleep 30");
        let bin = vec![dir.path().to_path_buf()];
        let run = |p: &'static str, t: u64| {
            let bin = bin.clone();
            async move {
                invoke(p, b"{}", &call(&bin, &[], Duration::from_millis(t)))
                    .await
                    .expect_err("fails")
            }
        };
        let e = run("err", 10_000).await;
        assert!(matches!(e, PluginError::Failed { code: 11, .. }));
        assert_eq!(e.to_string(), "no addresses; range full");
        assert_eq!(
            run("garbage", 10_000).await.to_string(),
            "netplugin failed: \"panic: oops\""
        );
        assert!(run("silent", 10_000)
            .await
            .to_string()
            .starts_with("netplugin failed with no error message: exit status: 3"));
        let began = std::time::Instant::now();
        assert!(matches!(run("hang", 300).await, PluginError::Timeout { .. }));
        assert!(began.elapsed() < Duration::from_secs(10));
        assert!(run("nope", 1000)
            .await
            .to_string()
            .starts_with("failed to find plugin \"nope\" in path"));
        assert!(find_plugin("../err", &bin).is_err());
    }
}
