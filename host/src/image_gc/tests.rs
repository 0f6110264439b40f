//! Ported from `k/k pkg/kubelet/images/image_gc_manager_test.go` (newest): the same images,
//! sizes, containers and expectations, table-driven where upstream repeats one shape.

use super::*;

fn image(n: u32, size: u64) -> RuntimeImage {
    RuntimeImage {
        id: id(n),
        repo_tags: vec![format!("image-{n}-name:latest")],
        repo_digests: vec![],
        size,
        created: 0,
        parent: None,
    }
}

fn id(n: u32) -> String {
    format!("image-{n}")
}

fn used(ns: &[u32]) -> BTreeSet<String> {
    ns.iter().map(|n| id(*n)).collect()
}

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + seconds).unwrap()
}

fn policy(min_age: Duration) -> ImageGcPolicy {
    ImageGcPolicy {
        high_threshold_percent: 90,
        low_threshold_percent: 80,
        min_age,
        max_age: Duration::ZERO,
    }
}

/// The engine: the listed images (removal takes them away), refusals, the filesystem.
#[derive(Default)]
struct Engine {
    images: Vec<RuntimeImage>,
    refuse: BTreeSet<String>,
    fs: Option<(u64, u64)>,
}

impl GcEngine for Engine {
    async fn remove(&mut self, image_id: &str) -> Result<(), RemoveError> {
        if self.refuse.contains(image_id) {
            let refusal = std::io::Error::other(format!("conflict: unable to delete {image_id} (must be forced)"));
            return Err(RemoveError::engine(refusal));
        }
        self.images.retain(|i| i.id != image_id);
        Ok(())
    }

    async fn image_fs(&mut self) -> Option<(u64, u64)> {
        self.fs
    }
}

/// Detect, order and free as upstream's `getImagesAndFreeSpace` helper.
fn free(
    policy: &ImageGcPolicy,
    records: &mut ImageRecords,
    engine: &mut Engine,
    in_use: &BTreeSet<String>,
    wanted: u64,
    free_time: Timestamp,
) -> GcReport {
    records.detect(&engine.images.clone(), in_use, &[], free_time);
    let candidates = records.eviction_order(in_use);
    let mut report = GcReport::default();
    let result = futures::executor::block_on(free_space(
        policy,
        records,
        candidates,
        wanted,
        free_time,
        engine,
        &mut report,
    ));
    report.error = result.err();
    report
}

/// TestDetectImagesInitialDetect, TestDetectImagesWithNewImage, TestDetectImagesContainerStopped,
/// TestDetectImagesWithRemovedImages: first detection, last use, and forgetting. (Upstream's
/// first detection is "now" in the newest kubelet; the zero time was a 2017 behaviour.)
#[test]
fn detection_records_first_detection_and_last_use() {
    let mut records = ImageRecords::default();
    let images = [image(0, 1024), image(1, 2048), image(2, 2048)];
    records.detect(&images[..2], &used(&[1]), &[], at(0));
    assert_eq!(records.0.len(), 2);
    // A new image, and image 1's container gone: its last use stays.
    records.detect(&images, &used(&[]), &[], at(10));
    let r = |n| records.0[&id(n)];
    assert_eq!((r(0).first_detected, r(0).last_used), (at(0), Timestamp::UNIX_EPOCH));
    assert_eq!((r(1).first_detected, r(1).last_used), (at(0), at(0)));
    assert_eq!(
        (r(2).first_detected, r(2).last_used, r(2).size),
        (at(10), Timestamp::UNIX_EPOCH, 2048)
    );
    // Both images removed outside the agent: their records go.
    records.detect(&[], &used(&[]), &[], at(20));
    assert!(records.0.is_empty());
}

/// The freeSpace cases: in-use images are never candidates (TestFreeSpaceImagesInUseContainersAreIgnored),
/// DeleteUnusedImages removes every unused image (TestDeleteUnusedImagesRemoveAllUnusedImages),
/// an image too young is kept until minAge passed (TestGarbageCollectImageNotOldEnough,
/// TestDeleteUnusedImagesLimitByImageLiveTime).
#[test]
fn free_space_cases() {
    struct Case {
        name: &'static str,
        images: Vec<RuntimeImage>,
        in_use: Vec<u32>,
        min_age: Duration,
        wanted: u64,
        /// Seconds after detection the pass runs.
        after: i64,
        freed: u64,
        left: usize,
    }
    let cases = [
        Case {
            name: "in-use images are ignored",
            images: vec![image(0, 1024), image(1, 2048)],
            in_use: vec![1],
            min_age: Duration::ZERO,
            wanted: 2048,
            after: 0,
            freed: 1024,
            left: 1,
        },
        Case {
            name: "delete unused removes all unused",
            images: vec![image(0, 1024), image(1, 2048), image(2, 2048)],
            in_use: vec![2],
            min_age: Duration::ZERO,
            wanted: u64::MAX,
            after: 0,
            freed: 3072,
            left: 1,
        },
        Case {
            name: "not old enough: one in use, one too young",
            images: vec![image(0, 1024), image(1, 2048)],
            in_use: vec![1],
            min_age: Duration::from_secs(60),
            wanted: 1024,
            after: 0,
            freed: 0,
            left: 2,
        },
        Case {
            name: "old enough once minAge passed",
            images: vec![image(0, 1024), image(1, 2048)],
            in_use: vec![1],
            min_age: Duration::from_secs(60),
            wanted: 1024,
            after: 60,
            freed: 1024,
            left: 1,
        },
        Case {
            name: "delete unused limited by live time",
            images: vec![image(0, 1024), image(1, 2048), image(2, 2048)],
            in_use: vec![2],
            min_age: Duration::from_secs(3),
            wanted: u64::MAX,
            after: 2,
            freed: 0,
            left: 3,
        },
    ];
    for case in cases {
        let mut engine = Engine {
            images: case.images,
            ..Default::default()
        };
        let mut records = ImageRecords::default();
        let in_use = used(&case.in_use);
        records.detect(&engine.images.clone(), &in_use, &[], at(0));
        let report = free(
            &policy(case.min_age),
            &mut records,
            &mut engine,
            &in_use,
            case.wanted,
            at(case.after),
        );
        assert_eq!(report.error, None, "{}", case.name);
        assert_eq!(report.freed, case.freed, "{}", case.name);
        assert_eq!(engine.images.len(), case.left, "{}", case.name);
    }
}

/// TestFreeSpaceRemoveByLeastRecentlyUsed: of two unused images, the one used longer ago goes.
#[test]
fn least_recently_used_goes_first() {
    let mut engine = Engine {
        images: vec![image(0, 1024), image(1, 2048)],
        ..Default::default()
    };
    let mut records = ImageRecords::default();
    records.detect(&engine.images.clone(), &used(&[0, 1]), &[], at(0));
    records.detect(&engine.images.clone(), &used(&[1]), &[], at(1));
    records.detect(&engine.images.clone(), &used(&[]), &[], at(2));
    let report = free(
        &policy(Duration::ZERO),
        &mut records,
        &mut engine,
        &used(&[]),
        1024,
        at(60),
    );
    assert_eq!((report.freed, report.removed), (1024, vec![(id(0), GcReason::Space)]));
    assert_eq!(engine.images, vec![image(1, 2048)]);
}

/// TestFreeSpaceTiesBrokenByDetectedTime: image 1 (detected later, never used) sorts before
/// image 0 (used); its 2048 bytes cover the 1024 wanted.
#[test]
fn ties_are_broken_by_detection() {
    let mut engine = Engine {
        images: vec![image(0, 1024)],
        ..Default::default()
    };
    let mut records = ImageRecords::default();
    records.detect(&engine.images.clone(), &used(&[0]), &[], at(0));
    engine.images.push(image(1, 2048));
    records.detect(&engine.images.clone(), &used(&[0]), &[], at(1));
    records.detect(&engine.images.clone(), &used(&[]), &[], at(2));
    let report = free(
        &policy(Duration::ZERO),
        &mut records,
        &mut engine,
        &used(&[]),
        1024,
        at(3),
    );
    assert_eq!(report.freed, 2048);
    assert_eq!(engine.images, vec![image(0, 1024)]);
}

/// The GarbageCollect cases: TestGarbageCollectBelowLowThreshold (40 % used: nothing),
/// TestGarbageCollectCadvisorFailure (no stats: error), TestGarbageCollectBelowSuccess (95 %:
/// 150 bytes to free, 450 found), TestGarbageCollectNotEnoughFreed (95 %, 50 found: kubelet's
/// FreeDiskSpaceFailed message), and capacity 0 (InvalidDiskCapacity).
#[test]
fn garbage_collect_cases() {
    /// Name, the filesystem's (capacity, available), the images, the error, the bytes freed.
    type Case = (
        &'static str,
        Option<(u64, u64)>,
        Vec<RuntimeImage>,
        Option<GcError>,
        u64,
    );
    let cases: [Case; 5] = [
        (
            "below the low threshold",
            Some((1000, 600)),
            vec![image(0, 450)],
            None,
            0,
        ),
        ("no image filesystem stats", None, vec![], Some(GcError::NoImageFs), 0),
        (
            "over the high threshold, enough freed",
            Some((1000, 50)),
            vec![image(0, 450)],
            None,
            450,
        ),
        (
            "over the high threshold, not enough",
            Some((1000, 50)),
            vec![image(0, 50)],
            Some(GcError::NotEnoughFreed { wanted: 150, freed: 50 }),
            50,
        ),
        (
            "invalid capacity",
            Some((0, 0)),
            vec![],
            Some(GcError::InvalidCapacity),
            0,
        ),
    ];
    for (name, fs, images, error, freed) in cases {
        let mut engine = Engine {
            images,
            fs,
            ..Default::default()
        };
        let mut records = ImageRecords::default();
        records.detect(&engine.images.clone(), &used(&[]), &[], at(0));
        let candidates = records.eviction_order(&used(&[]));
        let policy = policy(Duration::ZERO);
        let report = futures::executor::block_on(garbage_collect(
            &policy,
            &mut records,
            candidates,
            at(0),
            at(0),
            &mut engine,
        ));
        assert_eq!((report.error.clone(), report.freed), (error, freed), "{name}");
    }
    let message = GcError::NotEnoughFreed { wanted: 150, freed: 50 }.to_string();
    assert_eq!(
        message,
        "Failed to garbage collect required amount of images. Attempted to free 150 bytes, but only found 50 bytes eligible to free."
    );
    assert_eq!(
        GcError::InvalidCapacity.to_string(),
        "invalid capacity 0 on image filesystem"
    );
}

/// TestGarbageCollectImageTooOld and TestGarbageCollectImageMaxAgeDisabled: the age pass waits
/// until maxAge has passed since GC began, then removes what was unused for longer; maxAge 0
/// never removes by age.
#[test]
fn age_pass() {
    for (max_age, removed_after) in [(Duration::from_secs(60), true), (Duration::ZERO, false)] {
        let mut engine = Engine {
            images: vec![image(0, 1024), image(1, 2048)],
            fs: Some((1000, 1000)),
            ..Default::default()
        };
        let policy = ImageGcPolicy {
            max_age,
            ..policy(Duration::ZERO)
        };
        let mut records = ImageRecords::default();
        let began = at(0);
        records.detect(&engine.images.clone(), &used(&[0, 1]), &[], began);
        let mut run = |free_time| {
            let candidates = records.eviction_order(&used(&[1]));
            futures::executor::block_on(garbage_collect(
                &policy,
                &mut records,
                candidates,
                began,
                free_time,
                &mut engine,
            ))
        };
        assert_eq!(run(began).removed, vec![], "{max_age:?}: too early");
        let later = began.checked_add(Duration::from_millis(60_001)).unwrap();
        let report = run(later);
        let expected = if removed_after {
            vec![(id(0), GcReason::Age)]
        } else {
            vec![]
        };
        assert_eq!(report.removed, expected, "{max_age:?}");
    }
}

/// A removal Docker refuses (a container it does not know of uses the image) is skipped; the
/// next candidate is removed, and the refusal reported in kubelet's words.
#[test]
fn a_refused_removal_is_skipped() {
    let mut engine = Engine {
        images: vec![image(0, 1024), image(1, 2048)],
        refuse: used(&[0]),
        ..Default::default()
    };
    let mut records = ImageRecords::default();
    records.detect(&engine.images.clone(), &used(&[]), &[], at(0));
    let report = free(
        &policy(Duration::ZERO),
        &mut records,
        &mut engine,
        &used(&[]),
        1000,
        at(1),
    );
    assert_eq!(report.removed, vec![(id(1), GcReason::Space)]);
    assert_eq!(
        report.error.unwrap().to_string(),
        "wanted to free 1000 bytes, but freed 2048 bytes space with errors in image deletion: \
         conflict: unable to delete image-0 (must be forced)"
    );
    assert!(records.0.contains_key(&id(0)), "a refused image keeps its record");
}

/// The sandbox image is pinned whichever way it is named, and never a candidate.
#[test]
fn the_sandbox_image_is_pinned() {
    let pause = RuntimeImage {
        id: "sha256:p".into(),
        repo_tags: vec!["registry.k8s.io/pause:3.10".into()],
        ..image(9, 1)
    };
    let busybox = RuntimeImage {
        id: "sha256:b".into(),
        repo_tags: vec!["busybox:latest".into()],
        ..image(8, 1)
    };
    for (pinned, pause_pinned, busybox_pinned) in [
        ("registry.k8s.io/pause:3.10", true, false),
        ("docker.io/library/busybox", false, true),
        ("busybox", false, true),
        ("sha256:p", true, false),
        ("registry.k8s.io/pause", false, false),
    ] {
        let mut records = ImageRecords::default();
        records.detect(
            &[pause.clone(), busybox.clone()],
            &BTreeSet::new(),
            &[pinned.to_string()],
            at(0),
        );
        assert_eq!(records.0["sha256:p"].pinned, pause_pinned, "{pinned}");
        assert_eq!(records.0["sha256:b"].pinned, busybox_pinned, "{pinned}");
        let order: Vec<_> = records
            .eviction_order(&BTreeSet::new())
            .into_iter()
            .map(|c| c.id)
            .collect();
        assert_eq!(order.contains(&"sha256:p".to_string()), !pause_pinned, "{pinned}");
    }
}

/// TestValidateImageGCPolicy: kubelet's refusals, word for word.
#[test]
fn policy_validation() {
    let cases = [
        (2, 1, None),
        (-1, 0, Some("invalid HighThresholdPercent -1, must be in range [0-100]")),
        (
            101,
            0,
            Some("invalid HighThresholdPercent 101, must be in range [0-100]"),
        ),
        (0, -1, Some("invalid LowThresholdPercent -1, must be in range [0-100]")),
        (
            100,
            101,
            Some("invalid LowThresholdPercent 101, must be in range [0-100]"),
        ),
        (
            1,
            2,
            Some("LowThresholdPercent 2 can not be higher than HighThresholdPercent 1"),
        ),
    ];
    for (high, low, expected) in cases {
        let policy = ImageGcPolicy {
            high_threshold_percent: high,
            low_threshold_percent: low,
            ..ImageGcPolicy::default()
        };
        assert_eq!(
            policy.validate().err().map(|e| e.to_string()).as_deref(),
            expected,
            "{high}/{low}"
        );
    }
    assert!(ImageGcPolicy {
        high_threshold_percent: 100,
        ..ImageGcPolicy::default()
    }
    .disabled());
    assert!(!ImageGcPolicy::default().disabled());
}

/// usagePercent and amountToFree with kubelet's integer arithmetic.
#[test]
fn threshold_arithmetic() {
    let p = policy(Duration::ZERO);
    assert_eq!(usage_percent(1000, 50), 95);
    assert_eq!(usage_percent(1000, 999), 1);
    assert_eq!(amount_to_free(&p, 1000, 50), Some(150));
    assert_eq!(amount_to_free(&p, 1000, 110), None, "89 % is under 90 %");
    assert_eq!(
        usage_percent(1000, 101),
        90,
        "kubelet floors the free share: 89.9 % counts as 90 %"
    );
    assert_eq!(amount_to_free(&p, 1000, 100), Some(100), "90 % is at the threshold");
    assert_eq!(go_duration(Duration::from_secs(120)), "2m0s");
    assert_eq!(go_duration(Duration::from_secs(3)), "3s");
    assert_eq!(go_duration(Duration::from_secs(3600)), "1h0m0s");
}

/// The records survive a restart through the file; a missing file is no records, a broken one
/// an error naming it.
#[test]
fn records_persist() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(RECORDS_FILE);
    assert_eq!(ImageRecords::load(&path).unwrap(), ImageRecords::default());
    let mut records = ImageRecords::default();
    records.detect(
        &[image(0, 5), image(1, 6)],
        &used(&[1]),
        &["image-0-name".into()],
        at(7),
    );
    records.save(&path).unwrap();
    assert_eq!(ImageRecords::load(&path).unwrap(), records);
    std::fs::write(&path, "{").unwrap();
    let e = ImageRecords::load(&path).unwrap_err().to_string();
    assert!(e.contains(&path.display().to_string()), "{e}");
}

/// An image others are built on counts as in use until they are gone.
#[test]
fn parents_count_as_in_use() {
    let base = image(0, 10);
    let child = RuntimeImage {
        parent: Some(id(0)),
        ..image(1, 20)
    };
    let used_now = in_use_with_parents(&[base.clone(), child.clone()], used(&[]));
    assert_eq!(used_now, used(&[0]));
    assert!(in_use_with_parents(&[base], used(&[])).is_empty());
}

/// status.images as kubelet's setter: largest first, at most nodeStatusMaxImages (-1: all),
/// digests then tags, five names at most.
#[test]
fn node_status_images() {
    let many = RuntimeImage {
        repo_digests: vec!["r/a@sha256:1".into()],
        repo_tags: (0..6).map(|n| format!("r/a:{n}")).collect(),
        ..image(0, 10)
    };
    let images = [image(1, 5), many, image(2, 20)];
    let all = node_images(&images, -1);
    let sizes: Vec<_> = all.iter().map(|i| i.size_bytes.unwrap()).collect();
    assert_eq!(sizes, vec![20, 10, 5]);
    let names = all[1].names.clone().unwrap();
    assert_eq!(names, vec!["r/a@sha256:1", "r/a:0", "r/a:1", "r/a:2", "r/a:3"]);
    assert_eq!(node_images(&images, 2).len(), 2);
    assert!(node_images(&images, 0).is_empty());
}
