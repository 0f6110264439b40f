use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use dockerlet_pod::volume::FileProjection;

use super::*;

fn file(data: &str, mode: u32) -> FileProjection {
    FileProjection {
        data: data.as_bytes().to_vec(),
        mode,
        owner: None,
    }
}

fn payload(files: &[(&str, &str, u32)]) -> Payload {
    files.iter().map(|(p, d, m)| (p.to_string(), file(d, *m))).collect()
}

fn data_target(dir: &Path) -> String {
    std::fs::read_link(dir.join(DATA_DIR))
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with("..2"))
        .collect();
    names.sort();
    names
}

/// Files land in a timestamped directory with their modes; `..data` points at it and each
/// top-level name is a symlink through `..data`.
#[test]
fn writes_a_timestamped_dir_behind_data_symlinks() {
    let dir = tempfile::tempdir().unwrap();
    let vol = dir.path().join("vol");
    let p = payload(&[("data-1", "value-1", 0o644), ("path/to/data-2", "value-2", 0o400)]);
    assert!(write(&vol, &p, None).unwrap());
    let ts = data_target(&vol);
    assert!(
        ts.starts_with("..2") && ts.len() == "..2026_12_01_15_04_05.123456789".len(),
        "{ts}"
    );
    assert_eq!(entries(&vol), vec!["..data", "data-1", "path"]);
    assert_eq!(
        std::fs::read_link(vol.join("data-1")).unwrap(),
        Path::new("..data/data-1")
    );
    assert_eq!(std::fs::read_to_string(vol.join("path/to/data-2")).unwrap(), "value-2");
    let mode = |p: &str| std::fs::metadata(vol.join(p)).unwrap().mode() & 0o7777;
    assert_eq!(mode("data-1"), 0o644);
    assert_eq!(mode("path/to/data-2"), 0o400);
    assert_eq!(std::fs::metadata(vol.join(&ts)).unwrap().mode() & 0o7777, 0o755);
}

/// The same payload again writes nothing (the same `..data`); a removed user-visible link is
/// restored.
#[test]
fn unchanged_payload_is_not_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let p = payload(&[("a", "1", 0o644)]);
    assert!(write(dir.path(), &p, None).unwrap());
    let ts = data_target(dir.path());
    std::fs::remove_file(dir.path().join("a")).unwrap();
    assert!(!write(dir.path(), &p, None).unwrap());
    assert_eq!(data_target(dir.path()), ts);
    assert_eq!(std::fs::read_to_string(dir.path().join("a")).unwrap(), "1");
    let mode_change = payload(&[("a", "1", 0o600)]);
    assert!(write(dir.path(), &mode_change, None).unwrap());
}

/// An update swaps in a new directory, removes the old one and the names no longer in the
/// payload (a deleted key disappears from the volume).
#[test]
fn updates_swap_and_remove_stale_files() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        &payload(&[
            ("data-1", "value-1", 0o644),
            ("data-3", "x", 0o644),
            ("d/e", "y", 0o644),
        ]),
        None,
    )
    .unwrap();
    let old = data_target(dir.path());
    assert!(write(
        dir.path(),
        &payload(&[("data-1", "value-2", 0o644), ("d/f", "z", 0o644)]),
        None
    )
    .unwrap());
    let new = data_target(dir.path());
    assert_ne!(old, new);
    assert!(!dir.path().join(&old).exists(), "old timestamped directory removed");
    assert_eq!(entries(dir.path()), vec!["..data", "d", "data-1"]);
    assert_eq!(std::fs::read_to_string(dir.path().join("data-1")).unwrap(), "value-2");
    assert!(!dir.path().join("d/e").exists());
    assert_eq!(std::fs::read_to_string(dir.path().join("d/f")).unwrap(), "z");
    write(dir.path(), &Payload::new(), None).unwrap();
    assert_eq!(entries(dir.path()), vec!["..data"]);
}

/// A reader that resolves `..data` once always sees one complete set, never old and new mixed.
#[test]
fn readers_only_see_complete_sets() {
    let dir = tempfile::tempdir().unwrap();
    let vol = dir.path().to_path_buf();
    write(&vol, &payload(&[("a", "0", 0o644), ("b", "0", 0o644)]), None).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (vol, done) = (vol.clone(), done.clone());
        std::thread::spawn(move || {
            let mut seen = 0;
            while !done.load(Ordering::Relaxed) {
                let Ok(ts) = std::fs::canonicalize(vol.join(DATA_DIR)) else {
                    continue;
                };
                let (Ok(a), Ok(b)) = (
                    std::fs::read_to_string(ts.join("a")),
                    std::fs::read_to_string(ts.join("b")),
                ) else {
                    continue; // that set was removed between the two reads
                };
                assert_eq!(a, b, "a reader saw a mixed set");
                seen += 1;
            }
            seen
        })
    };
    for i in 1..300 {
        let v = i.to_string();
        write(&vol, &payload(&[("a", &v, 0o644), ("b", &v, 0o644)]), None).unwrap();
    }
    done.store(true, Ordering::Relaxed);
    assert!(reader.join().unwrap() > 0);
}

/// A bad path is refused before anything is written.
#[test]
fn invalid_paths_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let err = write(dir.path(), &payload(&[("ok", "1", 0o644), ("../x", "2", 0o644)]), None).unwrap_err();
    assert!(err.to_string().contains("must not contain '..'"), "{err}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// A `..data` pointing out of the volume is neither read nor removed; the writer replaces it.
#[test]
fn a_data_link_out_of_the_volume_is_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let outside = dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("keep"), "precious").unwrap();
    let vol = dir.path().join("vol");
    std::fs::create_dir(&vol).unwrap();
    std::os::unix::fs::symlink(&outside, vol.join(DATA_DIR)).unwrap();
    std::os::unix::fs::symlink("../outside/keep", vol.join("keep")).unwrap();
    assert!(write(&vol, &payload(&[("a", "1", 0o644)]), None).unwrap());
    assert_eq!(std::fs::read_to_string(outside.join("keep")).unwrap(), "precious");
    assert!(data_target(&vol).starts_with("..2"));
    assert_eq!(std::fs::read_to_string(vol.join("a")).unwrap(), "1");
}

/// fsGroup as the secret conformance test sets it (defaultMode 0440, fsGroup 1001): files
/// `-r--r-----` of group 1001; a file with an owner is chowned.
#[test]
fn fs_group_and_owner_apply() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: chown needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut p = payload(&[("data-1", "value-1", 0o440)]);
    p.insert(
        "token".into(),
        FileProjection {
            data: b"jwt".to_vec(),
            mode: 0o600,
            owner: Some(1000),
        },
    );
    let o = Ownership {
        fs_group: 1001,
        on_root_mismatch: false,
    };
    write(dir.path(), &p, Some(o)).unwrap();
    let m = std::fs::metadata(dir.path().join("data-1")).unwrap();
    assert_eq!((m.mode() & 0o7777, m.gid()), (0o440, 1001));
    let m = std::fs::metadata(dir.path().join("token")).unwrap();
    assert_eq!((m.mode() & 0o7777, m.uid(), m.gid()), (0o640, 1000, 1001));
    let ts = std::fs::metadata(dir.path().join(data_target(dir.path()))).unwrap();
    assert_eq!(ts.mode() & 0o7777, 0o2755);
}

/// kubelet's timestamp format, in UTC.
#[test]
fn timestamp_names_are_kubelets() {
    // 2026-12-01T15:04:05Z
    assert_eq!(
        timestamp_name(1_796_137_445, 123_456_789),
        "..2026_12_01_15_04_05.123456789"
    );
    assert_eq!(timestamp_name(0, 5), "..1970_01_01_00_00_00.000000005");
    assert_eq!(timestamp_name(951_782_400, 0), "..2000_02_29_00_00_00.000000000");
}
