//! Headless Chromium (Debian package `chromium`) for tests that read a page as a browser
//! renders it: `--dump-dom` prints the DOM after the page loaded.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

/// How long one page load may take.
const LOAD_TIMEOUT: Duration = Duration::from_secs(60);

/// The Chromium binary. Panics with what to install when there is none: a test that needs a
/// browser must fail without one, never pass (CI installs it, see `.ci/run`).
pub fn chromium() -> PathBuf {
    let candidates = ["chromium", "chromium-browser", "google-chrome"];
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for name in candidates {
            let bin = dir.join(name);
            if bin.is_file() {
                return bin;
            }
        }
    }
    panic!(
        "headless Chromium is needed and none of {candidates:?} is on PATH: install the Debian \
         package `chromium` (apt-get install chromium; .ci/run installs it in CI)"
    );
}

/// Load `url` in headless Chromium and return the DOM it rendered.
pub fn dump_dom(url: &str) -> anyhow::Result<String> {
    let profile = tempfile::tempdir().context("cannot create a Chromium profile directory")?;
    let mut child = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--no-first-run",
            "--disable-dev-shm-usage",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--dump-dom")
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot run chromium")?;
    let began = Instant::now();
    loop {
        if child.try_wait()?.is_some() {
            break;
        }
        if began.elapsed() > LOAD_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            bail!("chromium did not load {url} within {LOAD_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output()?;
    let dom = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() || dom.is_empty() {
        bail!(
            "chromium failed on {url} ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(dom)
}

/// The text of every element whose opening tag contains `marker` (an attribute such as
/// `class="explanation"`), with its tags removed and entities decoded, in document order.
/// Enough for the small pages the agent serves; not an HTML parser.
pub fn texts_of(dom: &str, marker: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut rest = dom;
    while let Some(at) = rest.find(marker) {
        let open_start = rest[..at].rfind('<').unwrap_or(0);
        let tag = &rest[open_start..at + marker.len()];
        let Some(open_end) = rest[at..].find('>').map(|i| at + i + 1) else {
            break;
        };
        let opening = &rest[open_start..open_end];
        let name: String = tag[1..].chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
        let close = format!("</{name}>");
        let Some(end) = rest[open_end..].find(&close).map(|i| open_end + i) else {
            break;
        };
        found.push((opening.to_string(), decode(&strip_tags(&rest[open_end..end]))));
        rest = &rest[end..];
    }
    found
}

fn strip_tags(s: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in s.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

fn decode(s: &str) -> String {
    s.replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}
