//! Tests of the `/metrics/resource` and `/metrics/cadvisor` expositions.

use super::*;
use dockerlet_messages::stats::{
    CfsStats, CgroupSeries, CpuStats, DeviceBlockIo, FsStats, InterfaceStats, MachineInfo, MemoryStats, NodeStats,
    PodReference,
};
use std::sync::Arc;

fn at(s: &str) -> Time {
    serde_json::from_str(&format!("\"{s}\"")).unwrap()
}

fn cpu(ns: u64) -> Option<CpuStats> {
    Some(CpuStats {
        time: at("2026-12-01T10:00:05Z"),
        usage_nano_cores: Some(1000),
        usage_core_nano_seconds: Some(ns),
        psi: None,
        user_nano_seconds: Some(ns / 5 * 4),
        system_nano_seconds: Some(ns / 5),
    })
}

fn memory(ws: u64, available: Option<u64>) -> Option<MemoryStats> {
    Some(MemoryStats {
        time: at("2026-12-01T10:00:06Z"),
        available_bytes: available,
        usage_bytes: Some(ws + 100),
        working_set_bytes: Some(ws),
        rss_bytes: Some(ws / 2),
        page_faults: Some(7),
        major_page_faults: Some(1),
        psi: None,
    })
}

fn container(name: &str) -> ContainerStats {
    ContainerStats {
        name: name.into(),
        start_time: at("2026-12-01T09:00:00Z"),
        cpu: cpu(2_500_000_000),
        memory: memory(4096, Some(1000)),
        accelerators: Vec::new(),
        rootfs: Some(FsStats {
            time: at("2026-12-01T10:00:00Z"),
            available_bytes: None,
            capacity_bytes: None,
            used_bytes: Some(12288),
            inodes_free: None,
            inodes: None,
            inodes_used: Some(3),
        }),
        logs: None,
        user_defined_metrics: Vec::new(),
        swap: None,
        io: None,
    }
}

fn view() -> StatsView {
    let pod = PodStats {
        pod_ref: PodReference {
            name: "web\"1".into(),
            namespace: "default".into(),
            uid: "u1".into(),
        },
        start_time: at("2026-12-01T08:59:59Z"),
        containers: vec![container("app")],
        cpu: cpu(3_000_000_000),
        memory: memory(8192, None),
        network: Some(NetworkStats {
            time: at("2026-12-01T10:00:07Z"),
            default: InterfaceStats {
                name: "eth0".into(),
                rx_bytes: Some(10),
                rx_errors: Some(0),
                tx_bytes: Some(20),
                tx_errors: Some(0),
            },
            interfaces: Vec::new(),
        }),
        volume_stats: Vec::new(),
        ephemeral_storage: None,
        process_stats: None,
        swap: None,
        io: None,
    };
    let summary = Summary {
        node: NodeStats {
            node_name: "n1".into(),
            system_containers: vec![ContainerStats {
                rootfs: None,
                ..container("kubelet")
            }],
            start_time: at("2026-12-01T00:00:00Z"),
            cpu: cpu(90_000_000_000),
            memory: memory(1 << 30, None),
            network: None,
            fs: None,
            runtime: None,
            rlimit: None,
            swap: None,
            io: None,
        },
        pods: vec![pod],
    };
    let app = ContainerRef {
        pod_uid: "u1".into(),
        container: "app".into(),
        id: "abc".into(),
        docker_name: "k8s_app_web_default_u1_0".into(),
        image: "busybox:1".into(),
        image_id: "sha256:1".into(),
        cgroup: "/kubepods/burstable/podu1/abc".into(),
        pod_cgroup: "/kubepods/burstable/podu1".into(),
    };
    StatsView {
        summary: Arc::new(summary),
        containers: Arc::new(vec![app.clone()]),
        machine: MachineInfo {
            cpu_cores: Some(2),
            memory_bytes: Some(24 << 30),
        },
        block_io: Arc::new(vec![CgroupBlockIo {
            cgroup: "/kubepods/burstable/podu1/abc".into(),
            time: at("2026-12-01T10:00:08Z"),
            devices: vec![DeviceBlockIo {
                device: "/dev/vda".into(),
                read_bytes: 4096,
                write_bytes: 8192,
                reads: 1,
                writes: 2,
            }],
        }]),
        sandboxes: Arc::new(vec![(
            ContainerRef {
                container: "POD".into(),
                id: "sb1".into(),
                docker_name: "k8s_POD_web_default_u1_0".into(),
                image: "dockerlet.local/pause:1".into(),
                cgroup: "/kubepods/burstable/podu1/sb1".into(),
                ..app.clone()
            },
            ContainerStats {
                rootfs: None,
                logs: None,
                ..container("POD")
            },
        )]),
        other_cgroups: Arc::new(vec![CgroupSeries {
            id: "/system.slice/dockerlet.service".into(),
            stats: ContainerStats {
                rootfs: None,
                ..container("kubelet")
            },
        }]),
        extras: Arc::new(vec![
            CgroupExtras {
                cgroup: "/kubepods/burstable/podu1/abc".into(),
                time: at("2026-12-01T10:00:06Z"),
                cache_bytes: Some(1024),
                mapped_file_bytes: Some(0),
                swap_bytes: None,
                swap_limit_bytes: Some(10_240),
                cfs: Some(CfsStats {
                    periods: 10,
                    throttled_periods: 4,
                    throttled_ns: 250_000_000,
                }),
            },
            CgroupExtras {
                cgroup: "/kubepods/burstable/podu1".into(),
                time: at("2026-12-01T10:00:06Z"),
                cache_bytes: Some(2048),
                mapped_file_bytes: None,
                swap_bytes: Some(0),
                swap_limit_bytes: None,
                cfs: Some(CfsStats {
                    periods: 0,
                    throttled_periods: 0,
                    throttled_ns: 0,
                }),
            },
        ]),
    }
}

#[test]
fn resource_metrics_are_kubelets_with_timestamps() {
    let v = view();
    let text = resource(Some(&v.summary));
    for line in [
            "# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the container in core-seconds",
            "# TYPE container_cpu_usage_seconds_total counter",
            "container_cpu_usage_seconds_total{container=\"app\",namespace=\"default\",pod=\"web\\\"1\"} 2.5 1796119205000",
            "container_memory_working_set_bytes{container=\"app\",namespace=\"default\",pod=\"web\\\"1\"} 4096 1796119206000",
            "container_start_time_seconds{container=\"app\",namespace=\"default\",pod=\"web\\\"1\"} 1796115600",
            "node_cpu_usage_seconds_total 90 1796119205000",
            "node_memory_working_set_bytes 1073741824 1796119206000",
            "pod_cpu_usage_seconds_total{namespace=\"default\",pod=\"web\\\"1\"} 3 1796119205000",
            "pod_memory_working_set_bytes{namespace=\"default\",pod=\"web\\\"1\"} 8192 1796119206000",
            "resource_scrape_error 0",
            "scrape_error 0",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
        }
    // Families sorted by name, each declared once.
    let names: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("# TYPE ")).collect();
    let mut sorted = names.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(names, sorted);
    let none = resource(None);
    assert!(none.lines().any(|l| l == "resource_scrape_error 1"), "{none}");
    assert!(!none.contains("node_cpu"));
}

#[test]
fn cadvisor_metrics_carry_cadvisors_labels() {
    let v = view();
    let text = cadvisor(Some(&v));
    for line in [
            "container_cpu_usage_seconds_total{container=\"app\",id=\"/kubepods/burstable/podu1/abc\",image=\"busybox:1\",name=\"k8s_app_web_default_u1_0\",namespace=\"default\",pod=\"web\\\"1\",cpu=\"total\"} 2.5 1796119205000",
            "container_cpu_usage_seconds_total{container=\"\",id=\"/\",image=\"\",name=\"\",namespace=\"\",pod=\"\",cpu=\"total\"} 90 1796119205000",
            "container_cpu_usage_seconds_total{container=\"\",id=\"/kubepods/burstable/podu1\",image=\"\",name=\"\",namespace=\"default\",pod=\"web\\\"1\",cpu=\"total\"} 3 1796119205000",
            "container_cpu_user_seconds_total{container=\"app\",id=\"/kubepods/burstable/podu1/abc\",image=\"busybox:1\",name=\"k8s_app_web_default_u1_0\",namespace=\"default\",pod=\"web\\\"1\"} 2 1796119205000",
            "container_cpu_system_seconds_total{container=\"app\",id=\"/kubepods/burstable/podu1/abc\",image=\"busybox:1\",name=\"k8s_app_web_default_u1_0\",namespace=\"default\",pod=\"web\\\"1\"} 0.5 1796119205000",
            "container_memory_working_set_bytes{container=\"app\",id=\"/kubepods/burstable/podu1/abc\",image=\"busybox:1\",name=\"k8s_app_web_default_u1_0\",namespace=\"default\",pod=\"web\\\"1\"} 4096 1796119206000",
            "container_spec_memory_limit_bytes{container=\"app\",id=\"/kubepods/burstable/podu1/abc\",image=\"busybox:1\",name=\"k8s_app_web_default_u1_0\",namespace=\"default\",pod=\"web\\\"1\"} 5096",
            "container_memory_failures_total{container=\"app\",id=\"/kubepods/burstable/podu1/abc\",image=\"busybox:1\",name=\"k8s_app_web_default_u1_0\",namespace=\"default\",pod=\"web\\\"1\",failure_type=\"pgmajfault\",scope=\"container\"} 1 1796119206000",
            "container_network_receive_bytes_total{container=\"\",id=\"/kubepods/burstable/podu1\",image=\"\",name=\"\",namespace=\"default\",pod=\"web\\\"1\",interface=\"eth0\"} 10 1796119207000",
            "container_fs_usage_bytes{container=\"app\",id=\"/kubepods/burstable/podu1/abc\",image=\"busybox:1\",name=\"k8s_app_web_default_u1_0\",namespace=\"default\",pod=\"web\\\"1\",device=\"\"} 12288 1796119200000",
            "container_fs_reads_bytes_total{container=\"app\",id=\"/kubepods/burstable/podu1/abc\",image=\"busybox:1\",name=\"k8s_app_web_default_u1_0\",namespace=\"default\",pod=\"web\\\"1\",device=\"/dev/vda\"} 4096 1796119208000",
            "container_fs_writes_total{container=\"app\",id=\"/kubepods/burstable/podu1/abc\",image=\"busybox:1\",name=\"k8s_app_web_default_u1_0\",namespace=\"default\",pod=\"web\\\"1\",device=\"/dev/vda\"} 2 1796119208000",
            "container_memory_cache{container=\"app\",id=\"/kubepods/burstable/podu1/abc\",image=\"busybox:1\",name=\"k8s_app_web_default_u1_0\",namespace=\"default\",pod=\"web\\\"1\"} 1024 1796119206000",
            "container_memory_cache{container=\"\",id=\"/kubepods/burstable/podu1\",image=\"\",name=\"\",namespace=\"default\",pod=\"web\\\"1\"} 2048 1796119206000",
            "container_memory_swap{container=\"\",id=\"/kubepods/burstable/podu1\",image=\"\",name=\"\",namespace=\"default\",pod=\"web\\\"1\"} 0 1796119206000",
            "container_spec_memory_swap_limit_bytes{container=\"app\",id=\"/kubepods/burstable/podu1/abc\",image=\"busybox:1\",name=\"k8s_app_web_default_u1_0\",namespace=\"default\",pod=\"web\\\"1\"} 10240",
            "container_cpu_cfs_throttled_periods_total{container=\"app\",id=\"/kubepods/burstable/podu1/abc\",image=\"busybox:1\",name=\"k8s_app_web_default_u1_0\",namespace=\"default\",pod=\"web\\\"1\"} 4 1796119206000",
            "container_cpu_cfs_throttled_seconds_total{container=\"app\",id=\"/kubepods/burstable/podu1/abc\",image=\"busybox:1\",name=\"k8s_app_web_default_u1_0\",namespace=\"default\",pod=\"web\\\"1\"} 0.25 1796119206000",
            "container_cpu_usage_seconds_total{container=\"\",id=\"/system.slice/dockerlet.service\",image=\"\",name=\"\",namespace=\"\",pod=\"\",cpu=\"total\"} 2.5 1796119205000",
            "container_cpu_usage_seconds_total{container=\"POD\",id=\"/kubepods/burstable/podu1/sb1\",image=\"dockerlet.local/pause:1\",name=\"k8s_POD_web_default_u1_0\",namespace=\"default\",pod=\"web\\\"1\",cpu=\"total\"} 2.5 1796119205000",
            "machine_cpu_cores 2",
            "container_scrape_error 0",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
        }
    // No quota on the pod (no periods): no throttling series; no swap figure on the app.
    assert!(
        !text.contains("container_cpu_cfs_periods_total{container=\"\""),
        "{text}"
    );
    assert!(!text.contains("container_memory_swap{container=\"app\""), "{text}");
    // No limit on the pod: no spec limit series for it, nor a swap limit.
    for series in [
        "container_spec_memory_limit_bytes",
        "container_spec_memory_swap_limit_bytes",
    ] {
        let pod = format!("{series}{{container=\"\",id=\"/kubepods/burstable/podu1\"");
        assert!(!text.lines().any(|l| l.starts_with(&pod)), "{text}");
    }
    let none = cadvisor(None);
    assert_eq!(
            none,
            "# HELP container_scrape_error 1 if there was an error while getting container metrics, 0 otherwise\n# TYPE container_scrape_error gauge\ncontainer_scrape_error 1\n"
        );
}
