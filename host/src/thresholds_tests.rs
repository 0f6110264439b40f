//! After upstream's `helpers_test.go` (`TestParseThresholdConfig`, `TestThresholdsMet`,
//! `TestThresholdsMetGracePeriod`) and `eviction_manager_test.go` (`TestMinReclaim`).

use super::*;

fn observation(memory_available: i64) -> Observation {
    Observation {
        memory_capacity: 4 << 30,
        memory_available,
        nodefs: None,
        imagefs: None,
        pids: None,
        allocatable_memory: None,
    }
}

const MI: i64 = 1 << 20;

fn settings(hard: &str, soft: &str, grace: &str, min_reclaim: &str) -> EvictionSettings {
    let pairs = |text: &'static str, sep: char| -> Vec<(&'static str, &'static str)> {
        text.split(',')
            .filter(|e| !e.is_empty())
            .map(|e| e.split_once(sep).unwrap())
            .collect()
    };
    let leak = |s: &str| -> &'static str { Box::leak(s.to_string().into_boxed_str()) };
    EvictionSettings {
        hard: Thresholds::parse(pairs(leak(hard), '<')).unwrap(),
        soft: Thresholds::parse(pairs(leak(soft), '<')).unwrap(),
        soft_grace: parse_grace_periods(pairs(leak(grace), '=')).unwrap(),
        min_reclaim: parse_min_reclaim(pairs(leak(min_reclaim), '=')).unwrap(),
        max_pod_grace: Duration::ZERO,
    }
}

#[test]
fn settings_are_refused_in_kubelets_words() {
    let e = parse_grace_periods([("memory.available", "-30s")])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("invalid eviction grace period specified: -30s, must be a positive value"),
        "{e}"
    );
    let e = parse_min_reclaim([("memory.available", "0%")]).unwrap_err().to_string();
    assert!(
        e.contains("eviction percentage minimum reclaim memory.available must be positive: 0%"),
        "{e}"
    );
    let e = parse_min_reclaim([("nodefs.available", "-1Gi")])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("negative eviction minimum reclaim specified for nodefs.available"),
        "{e}"
    );
    let e = parse_grace_periods([("memory.free", "1m")]).unwrap_err().to_string();
    assert!(e.contains("unsupported eviction signal memory.free"), "{e}");
    let unpaired = settings("", "memory.available<1Gi", "", "");
    let e = unpaired.validate().unwrap_err().to_string();
    assert!(
        e.contains("grace period must be specified for the soft eviction threshold memory.available"),
        "{e}"
    );
    assert!(settings("", "memory.available<1Gi", "memory.available=30s", "")
        .validate()
        .is_ok());
}

#[test]
fn a_soft_threshold_evicts_only_after_its_grace_period() {
    let s = settings(
        "memory.available<100Mi",
        "memory.available<1Gi",
        "memory.available=30s",
        "",
    );
    let mut e = Evaluator::default();
    let t0 = Instant::now();
    let (met, eligible) = e.evaluate(&s, &observation(500 * MI), t0);
    assert_eq!(met.len(), 1, "the soft threshold is met: the condition is on");
    assert!(met[0].soft);
    assert!(eligible.is_empty(), "but it does not evict yet");
    let (_, eligible) = e.evaluate(&s, &observation(500 * MI), t0 + Duration::from_secs(29));
    assert!(eligible.is_empty());
    let (_, eligible) = e.evaluate(&s, &observation(500 * MI), t0 + Duration::from_secs(30));
    assert_eq!(eligible.len(), 1, "met for its grace period");
    // Not met for a moment: the grace period starts again.
    e.evaluate(&s, &observation(2048 * MI), t0 + Duration::from_secs(31));
    let (_, eligible) = e.evaluate(&s, &observation(500 * MI), t0 + Duration::from_secs(32));
    assert!(eligible.is_empty());
    // The hard threshold acts at once.
    let (met, eligible) = e.evaluate(&s, &observation(50 * MI), t0 + Duration::from_secs(33));
    assert_eq!(met.len(), 2);
    assert_eq!(eligible.len(), 1);
    assert!(!eligible[0].soft);
}

#[test]
fn a_met_threshold_stays_met_until_its_minimum_reclaim_is_back() {
    let s = settings("memory.available<1Gi", "", "", "memory.available=500Mi");
    let mut e = Evaluator::default();
    let t0 = Instant::now();
    assert!(
        e.evaluate(&s, &observation(1200 * MI), t0).0.is_empty(),
        "not met: no reclaim counts"
    );
    assert_eq!(e.evaluate(&s, &observation(900 * MI), t0).0.len(), 1);
    assert_eq!(
        e.evaluate(&s, &observation(1200 * MI), t0).0.len(),
        1,
        "below 1Gi + 500Mi: still met"
    );
    assert!(
        e.evaluate(&s, &observation(1600 * MI), t0).0.is_empty(),
        "back above 1.5Gi"
    );
}

#[test]
fn a_soft_eviction_takes_the_smaller_grace_period() {
    let mut s = settings("", "", "", "");
    assert_eq!(
        s.soft_pod_grace(Duration::from_secs(30)),
        Duration::from_secs(30),
        "0: the pod's own"
    );
    s.max_pod_grace = Duration::from_secs(10);
    assert_eq!(s.soft_pod_grace(Duration::from_secs(30)), Duration::from_secs(10));
    assert_eq!(s.soft_pod_grace(Duration::from_secs(5)), Duration::from_secs(5));
}

/// kubelet's `TestAddAllocatableThresholds`: only a hard `memory.available` threshold is copied
/// to `allocatableMemory.available`, with its minimum reclaim; one given is kept.
#[test]
fn allocatable_thresholds_copy_the_hard_memory_threshold() {
    let hard = Thresholds::parse([("memory.available", "150Mi"), ("imagefs.available", "15%")]).unwrap();
    let mut settings = EvictionSettings::hard_only(hard);
    settings
        .min_reclaim
        .insert(Signal::MemoryAvailable, ThresholdValue::Quantity(1 << 20));
    let with = settings.clone().with_allocatable_thresholds();
    assert_eq!(
        with.hard.0.get(&Signal::AllocatableMemoryAvailable),
        Some(&ThresholdValue::Quantity(150 << 20))
    );
    assert_eq!(
        with.min_reclaim.get(&Signal::AllocatableMemoryAvailable),
        Some(&ThresholdValue::Quantity(1 << 20))
    );
    assert_eq!(with.hard.0.len(), 3);
    let soft_only = EvictionSettings {
        soft: Thresholds::parse([("memory.available", "300Mi")]).unwrap(),
        ..EvictionSettings::hard_only(Thresholds(Default::default()))
    };
    assert!(!soft_only
        .with_allocatable_thresholds()
        .hard
        .0
        .contains_key(&Signal::AllocatableMemoryAvailable));
    let own = Thresholds::parse([("memory.available", "150Mi"), ("allocatableMemory.available", "1Gi")]).unwrap();
    assert_eq!(
        EvictionSettings::hard_only(own)
            .with_allocatable_thresholds()
            .hard
            .0
            .get(&Signal::AllocatableMemoryAvailable),
        Some(&ThresholdValue::Quantity(1 << 30))
    );
}
