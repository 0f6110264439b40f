//! securityContext honoured or refused, never ignored: the upstream conformance tests'
//! assertions (`test/e2e/common/node/security_context.go`, `test/e2e/node/security_context.go`,
//! `test/e2e/common/node/sysctl.go`) ported to busybox, plus what dockerlet refuses and why.
//!
//! Every pod runs to completion (`restartPolicy: Never`) and is judged by its phase and its
//! output, as upstream's `TestContainerOutput` does; refusals are read from `/pods` and events.

use std::io::Write as _;
use std::time::Duration;

use dockerlet_integration_tests::docker::{docker, docker_ok};
use dockerlet_integration_tests::{
    holds_for, Agent, ContainerStatusExt, EventLog, ManifestDir, PodExt, BUSYBOX_IMAGE, CHANGE_TIMEOUT,
    POD_START_TIMEOUT,
};
use k8s_openapi::api::core::v1::Pod;

/// A pod of one busybox container `c` running `script` once; `pod_fields` go under `spec`,
/// `container_fields` under the container (one YAML line each).
fn manifest(name: &str, pod_fields: &[&str], container_fields: &[&str], script: &str) -> String {
    let mut yaml = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  restartPolicy: Never\n  terminationGracePeriodSeconds: 1\n"
    );
    for field in pod_fields {
        yaml.push_str(&format!("  {field}\n"));
    }
    yaml.push_str(&format!(
        "  containers:\n  - name: c\n    image: {BUSYBOX_IMAGE}\n    imagePullPolicy: Never\n    command: [\"sh\", \"-c\", {script:?}]\n"
    ));
    for field in container_fields {
        yaml.push_str(&format!("    {field}\n"));
    }
    yaml
}

/// Waits until the pod from `name` has finished (Succeeded or Failed); returns it and the
/// output of its container `c`.
fn finished(agent: &Agent, name: &str) -> (Pod, String) {
    let pod = agent.wait_for_pod(name, "Succeeded or Failed", POD_START_TIMEOUT, |p| {
        matches!(p.phase(), "Succeeded" | "Failed")
    });
    let id = pod
        .container("c")
        .and_then(|c| c.docker_id())
        .unwrap_or_else(|| panic!("{} has no container ID: {}", name, pod.summary()))
        .to_string();
    (pod, docker_ok(&["logs", &id]))
}

/// Asserts the pod from `name` ran to `phase`; returns its output.
fn expect_phase(agent: &Agent, name: &str, phase: &str) -> String {
    let (pod, logs) = finished(agent, name);
    assert_eq!(pod.phase(), phase, "{}; output: {logs}", pod.summary());
    logs
}

/// Waits until container `c` of the pod from `name` waits with CreateContainerConfigError;
/// returns the waiting message.
fn expect_config_error(agent: &Agent, name: &str) -> String {
    expect_waiting(agent, name, "CreateContainerConfigError")
}

/// Waits until container `c` of the pod from `name` waits with `reason`; the pod is Pending.
/// Returns the waiting message.
fn expect_waiting(agent: &Agent, name: &str, reason: &str) -> String {
    let pod = agent.wait_for_pod(name, &format!("c waiting with {reason}"), POD_START_TIMEOUT, |p| {
        p.container("c").and_then(|c| c.waiting_reason()) == Some(reason)
    });
    assert_eq!(pod.phase(), "Pending", "{}", pod.summary());
    pod.container("c")
        .and_then(|c| c.waiting_message())
        .unwrap_or_default()
        .to_string()
}

/// Waits until the pod from `name` was rejected at admission with `reason`; asserts nothing of
/// it ever ran in Docker and returns the status message.
fn expect_rejected(agent: &Agent, name: &str, reason: &str) -> String {
    let pod = agent.wait_for_pod(name, &format!("Failed with reason {reason}"), POD_START_TIMEOUT, |p| {
        p.phase() == "Failed"
    });
    let status = pod.status.clone().unwrap_or_default();
    assert_eq!(status.reason.as_deref(), Some(reason), "{}", pod.summary());
    let uid = pod.uid().to_string();
    holds_for("no container of a rejected pod", Duration::from_secs(2), || {
        let containers = agent.pod_containers(&uid);
        if containers.is_empty() {
            Ok(())
        } else {
            Err(format!("{} containers", containers.len()))
        }
    });
    status.message.unwrap_or_default()
}

/// CapEff of `/proc/self/status` in the output, as a number.
fn cap_eff(logs: &str) -> u64 {
    let hex = logs
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .unwrap_or_else(|| panic!("no CapEff in {logs:?}"))
        .trim();
    u64::from_str_radix(hex, 16).unwrap_or_else(|e| panic!("CapEff {hex:?}: {e}"))
}

/// runAsUser 65534 and 0, runAsUser/runAsGroup 1001/2002 at pod and at container level (the
/// container's winning), a runAsGroup alone completing the image's user, and fsGroup and
/// supplementalGroups as supplementary groups.
#[test]
fn users_and_groups_are_those_the_pod_asks_for() {
    let manifests = ManifestDir::new();
    let check_ids = "test $(id -u) -eq 1001 && test $(id -g) -eq 2002";
    manifests.write(
        "u65534.yaml",
        &manifest(
            "u65534",
            &["securityContext: {runAsUser: 65534}"],
            &[],
            "test $(id -u) -eq 65534",
        ),
    );
    manifests.write(
        "u0.yaml",
        &manifest("u0", &[], &["securityContext: {runAsUser: 0}"], "test $(id -u) -eq 0"),
    );
    manifests.write(
        "podlevel.yaml",
        &manifest(
            "podlevel",
            &["securityContext: {runAsUser: 1001, runAsGroup: 2002}"],
            &[],
            check_ids,
        ),
    );
    manifests.write(
        "containerlevel.yaml",
        &manifest(
            "containerlevel",
            &["securityContext: {runAsUser: 5, runAsGroup: 6}"],
            &["securityContext: {runAsUser: 1001, runAsGroup: 2002}"],
            check_ids,
        ),
    );
    manifests.write(
        "grouponly.yaml",
        &manifest(
            "grouponly",
            &["securityContext: {runAsGroup: 2002}"],
            &[],
            "test $(id -u) -eq 0 && test $(id -g) -eq 2002",
        ),
    );
    manifests.write(
        "groups.yaml",
        &manifest(
            "groups",
            &["securityContext: {runAsUser: 1001, fsGroup: 3000, supplementalGroups: [4000, 4001]}"],
            &[],
            "id -G",
        ),
    );
    let agent = Agent::start("sc-users", manifests.path(), &[]);
    for name in ["u65534", "u0", "podlevel", "containerlevel", "grouponly"] {
        expect_phase(&agent, name, "Succeeded");
    }
    // The sandbox runs as the pod-level user too, as kubelet's sandbox config says.
    let pod = agent.pod("podlevel").expect("podlevel in /pods");
    let sandbox = agent
        .pod_containers(pod.uid())
        .into_iter()
        .find(|c| c.is_sandbox())
        .expect("the sandbox of podlevel");
    let user = docker_ok(&["inspect", "--format", "{{.Config.User}}", &sandbox.id]);
    assert_eq!(user.trim(), "1001:2002");
    let groups = expect_phase(&agent, "groups", "Succeeded");
    let groups: Vec<&str> = groups.split_whitespace().collect();
    for gid in ["3000", "4000", "4001"] {
        assert!(groups.contains(&gid), "id -G shows {gid}: {groups:?}");
    }
}

/// A copy of busybox whose image config names `user`, removed when dropped.
struct UserImage(String);

impl UserImage {
    fn new(test: &str, user: &str) -> Self {
        let suffix = format!("{test}-{}", std::process::id());
        let tag = format!("dockerlet.local/busybox-user:{suffix}");
        let holder = format!("dockerlet-userimage-{suffix}");
        docker_ok(&[
            "create",
            "--name",
            &holder,
            "--label",
            "dockerlet-test-image=1",
            BUSYBOX_IMAGE,
        ]);
        let committed = docker(&["commit", "--change", &format!("USER {user}"), &holder, &tag]);
        docker_ok(&["rm", "-f", &holder]);
        assert!(
            committed.status.success(),
            "docker commit: {}",
            String::from_utf8_lossy(&committed.stderr)
        );
        UserImage(tag)
    }
}

impl Drop for UserImage {
    fn drop(&mut self) {
        let _ = docker(&["rmi", "-f", &self.0]);
    }
}

/// runAsNonRoot: an explicit non-root uid runs, and so does an image whose user is non-root
/// (upstream's nonroot image, USER 1234); the busybox image (root), an explicit runAsUser 0 and
/// an image naming its user by name are refused with kubelet's messages as
/// CreateContainerConfigError and a Failed event, and never run.
#[test]
fn run_as_non_root_refuses_root() {
    let numeric = UserImage::new("nonroot-1234", "1234");
    let named = UserImage::new("nonroot-named", "nobody");
    let manifests = ManifestDir::new();
    let image_pod = |name: &str, image: &str| {
        manifest(name, &["securityContext: {runAsNonRoot: true}"], &[], "id -u").replace(BUSYBOX_IMAGE, image)
    };
    manifests.write("imageuser.yaml", &image_pod("imageuser", &numeric.0));
    manifests.write("imagename.yaml", &image_pod("imagename", &named.0));
    manifests.write(
        "nonroot.yaml",
        &manifest(
            "nonroot",
            &["securityContext: {runAsNonRoot: true}"],
            &["securityContext: {runAsUser: 1000}"],
            "id -u",
        ),
    );
    manifests.write(
        "imageroot.yaml",
        &manifest("imageroot", &[], &["securityContext: {runAsNonRoot: true}"], "id -u"),
    );
    manifests.write(
        "uidzero.yaml",
        &manifest(
            "uidzero",
            &["securityContext: {runAsNonRoot: true, runAsUser: 0}"],
            &[],
            "id -u",
        ),
    );
    let agent = Agent::start("sc-nonroot", manifests.path(), &[]);
    let events = EventLog::watch(&agent);
    assert_eq!(expect_phase(&agent, "nonroot", "Succeeded").trim(), "1000");

    let pod = agent.wait_for_pod("imageroot", "has a UID", POD_START_TIMEOUT, |p| !p.uid().is_empty());
    let message = expect_config_error(&agent, "imageroot");
    let want = format!(
        "container has runAsNonRoot and image will run as root (pod: \"{}_default({})\", container: c)",
        agent.pod_name("imageroot"),
        pod.uid()
    );
    assert_eq!(message, want);
    events.wait_for(&agent.pod_object("imageroot"), "Failed", CHANGE_TIMEOUT, |m| {
        m.contains(&want)
    });
    let uid = pod.uid().to_string();
    assert!(
        agent.pod_containers(&uid).iter().all(|c| c.is_sandbox()),
        "a refused container is never created"
    );

    assert_eq!(expect_phase(&agent, "imageuser", "Succeeded").trim(), "1234");
    let pod = agent.wait_for_pod("imagename", "has a UID", POD_START_TIMEOUT, |p| !p.uid().is_empty());
    assert_eq!(
        expect_config_error(&agent, "imagename"),
        format!(
            "container has runAsNonRoot and image has non-numeric user (nobody), cannot verify user is non-root \
             (pod: \"{}_default({})\", container: c)",
            agent.pod_name("imagename"),
            pod.uid()
        )
    );

    let pod = agent.wait_for_pod("uidzero", "has a UID", POD_START_TIMEOUT, |p| !p.uid().is_empty());
    assert_eq!(
        expect_config_error(&agent, "uidzero"),
        format!(
            "container's runAsUser breaks non-root policy (pod: \"{}_default({})\", container: c)",
            agent.pod_name("uidzero"),
            pod.uid()
        )
    );
}

/// readOnlyRootFilesystem true makes `touch checkfile` fail (phase Failed); false lets it
/// succeed.
#[test]
fn read_only_root_filesystem_refuses_writes() {
    let manifests = ManifestDir::new();
    manifests.write(
        "ro.yaml",
        &manifest(
            "ro",
            &[],
            &["securityContext: {readOnlyRootFilesystem: true}"],
            "touch checkfile 2>&1",
        ),
    );
    manifests.write(
        "rw.yaml",
        &manifest(
            "rw",
            &[],
            &["securityContext: {readOnlyRootFilesystem: false}"],
            "touch checkfile",
        ),
    );
    let agent = Agent::start("sc-rootfs", manifests.path(), &[]);
    let logs = expect_phase(&agent, "ro", "Failed");
    assert!(logs.contains("Read-only file system"), "{logs}");
    expect_phase(&agent, "rw", "Succeeded");
}

/// privileged false: `ip link add` is not permitted; allowPrivilegeEscalation false sets
/// no_new_privs (unset leaves it off); capabilities added and dropped show in CapEff; a
/// privileged container runs privileged, or — on an engine that refuses privileged
/// containers — the refusal is reported, never silently passed over.
#[test]
fn privileges_and_capabilities_are_those_the_pod_asks_for() {
    let manifests = ManifestDir::new();
    let status = "grep -E '^(NoNewPrivs|CapEff):' /proc/self/status";
    manifests.write(
        "unprivileged.yaml",
        &manifest(
            "unprivileged",
            &[],
            &["securityContext: {privileged: false}"],
            "ip link add dummy0 type dummy 2>&1 || true",
        ),
    );
    manifests.write("plain.yaml", &manifest("plain", &[], &[], status));
    manifests.write(
        "nnp.yaml",
        &manifest(
            "nnp",
            &[],
            &["securityContext: {allowPrivilegeEscalation: false}"],
            status,
        ),
    );
    manifests.write(
        "capadd.yaml",
        &manifest(
            "capadd",
            &[],
            &["securityContext: {capabilities: {add: [SYS_TIME], drop: [CAP_CHOWN]}}"],
            status,
        ),
    );
    manifests.write(
        "capdropall.yaml",
        &manifest(
            "capdropall",
            &[],
            &["securityContext: {capabilities: {drop: [ALL]}}"],
            status,
        ),
    );
    manifests.write(
        "privileged.yaml",
        &manifest(
            "privileged",
            &[],
            &["securityContext: {privileged: true}"],
            "ip link add dummy0 type dummy 2>&1 || true",
        ),
    );
    let agent = Agent::start("sc-privileges", manifests.path(), &[]);
    let events = EventLog::watch(&agent);
    let logs = expect_phase(&agent, "unprivileged", "Succeeded");
    assert!(logs.contains("Operation not permitted"), "{logs}");

    let plain = expect_phase(&agent, "plain", "Succeeded");
    assert!(plain.contains("NoNewPrivs:\t0"), "{plain}");
    let nnp = expect_phase(&agent, "nnp", "Succeeded");
    assert!(nnp.contains("NoNewPrivs:\t1"), "{nnp}");

    const CAP_CHOWN: u64 = 1 << 0;
    const CAP_SYS_TIME: u64 = 1 << 25;
    let base = cap_eff(&plain);
    assert_ne!(base & CAP_CHOWN, 0, "Docker's default set has CAP_CHOWN: {base:x}");
    assert_eq!(
        base & CAP_SYS_TIME,
        0,
        "Docker's default set lacks CAP_SYS_TIME: {base:x}"
    );
    let added = cap_eff(&expect_phase(&agent, "capadd", "Succeeded"));
    assert_eq!(added, (base | CAP_SYS_TIME) & !CAP_CHOWN, "{added:x} from {base:x}");
    assert_eq!(cap_eff(&expect_phase(&agent, "capdropall", "Succeeded")), 0);

    // Privileged: Docker runs it, or refuses (this sandbox VM does); either is reported.
    let pod = agent.wait_for_pod("privileged", "finished, or its start refused", POD_START_TIMEOUT, |p| {
        matches!(p.phase(), "Succeeded" | "Failed")
            || p.container("c")
                .and_then(|c| c.waiting_reason())
                .is_some_and(|r| r != "ContainerCreating")
    });
    let refused = events
        .about(&agent.pod_object("privileged"), "Failed")
        .into_iter()
        .find(|e| e.message.starts_with("Error: "));
    match refused {
        Some(event) => {
            // Written to stderr directly, not through the test harness's capture: visible in
            // every run, passing or not.
            let _ = writeln!(
                std::io::stderr(),
                "NOTE: this Docker engine refuses privileged containers, so privileged: true could not be \
                 checked here; the refusal was reported: {}",
                event.message
            );
            assert_ne!(
                pod.phase(),
                "Succeeded",
                "a refused container did not succeed: {}",
                pod.summary()
            );
        }
        None => {
            let (pod, logs) = finished(&agent, "privileged");
            assert_eq!(pod.phase(), "Succeeded", "{}", pod.summary());
            assert!(
                !logs.contains("Operation not permitted"),
                "privileged may add links: {logs}"
            );
            let inspect = docker_ok(&[
                "inspect",
                "--format",
                "{{.HostConfig.Privileged}}",
                pod.container("c").and_then(|c| c.docker_id()).unwrap_or_default(),
            ]);
            assert_eq!(inspect.trim(), "true");
        }
    }
}

/// Safe sysctls are set on the sandbox and seen by the container (also written with `/`
/// separators); an unsafe one is rejected at admission with SysctlForbidden and never runs,
/// unless `--allowed-unsafe-sysctls` names it.
#[test]
fn sysctls_are_set_or_the_pod_is_rejected() {
    let manifests = ManifestDir::new();
    manifests.write(
        "safe.yaml",
        &manifest(
            "safe",
            &["securityContext: {sysctls: [{name: kernel.shm_rmid_forced, value: '1'}]}"],
            &[],
            "sysctl kernel.shm_rmid_forced",
        ),
    );
    manifests.write(
        "slashes.yaml",
        &manifest(
            "slashes",
            &["securityContext: {sysctls: [{name: kernel/shm_rmid_forced, value: '1'}]}"],
            &[],
            "sysctl kernel.shm_rmid_forced",
        ),
    );
    let unsafe_pod = manifest(
        "unsafe",
        &["securityContext: {sysctls: [{name: kernel.msgmax, value: '10000000'}]}"],
        &[],
        "sysctl kernel.msgmax",
    );
    manifests.write("unsafe.yaml", &unsafe_pod);
    let agent = Agent::start("sc-sysctls", manifests.path(), &[]);
    let events = EventLog::watch(&agent);
    for name in ["safe", "slashes"] {
        let logs = expect_phase(&agent, name, "Succeeded");
        assert!(logs.contains("kernel.shm_rmid_forced = 1"), "{name}: {logs}");
    }
    let message = expect_rejected(&agent, "unsafe", "SysctlForbidden");
    assert_eq!(
        message,
        "Pod was rejected: forbidden sysctl: \"kernel.msgmax\" not allowlisted"
    );
    events.wait_for(&agent.pod_object("unsafe"), "SysctlForbidden", CHANGE_TIMEOUT, |m| {
        m == "forbidden sysctl: \"kernel.msgmax\" not allowlisted"
    });

    let allowed = ManifestDir::new();
    allowed.write("unsafe.yaml", &unsafe_pod);
    let agent = Agent::start(
        "sc-sysctls-allowed",
        allowed.path(),
        &["--allowed-unsafe-sysctls", "kernel.msg*"],
    );
    let logs = expect_phase(&agent, "unsafe", "Succeeded");
    assert!(logs.contains("kernel.msgmax = 10000000"), "{logs}");
}

/// shareProcessNamespace: the container sees the pause process as PID 1; hostPID: it sees the
/// host's PID 1; hostIPC: it is in the host's IPC namespace.
#[test]
fn process_namespaces_are_shared_as_asked() {
    let manifests = ManifestDir::new();
    manifests.write(
        "shared.yaml",
        &manifest(
            "shared",
            &["shareProcessNamespace: true"],
            &[],
            "cat /proc/1/cmdline; echo",
        ),
    );
    manifests.write(
        "hostpid.yaml",
        &manifest("hostpid", &["hostPID: true"], &[], "cat /proc/1/cmdline; echo"),
    );
    manifests.write(
        "private.yaml",
        &manifest("private", &[], &[], "cat /proc/1/cmdline; echo"),
    );
    let ipc = "readlink /proc/self/ns/ipc";
    manifests.write("hostipc.yaml", &manifest("hostipc", &["hostIPC: true"], &[], ipc));
    manifests.write("podipc.yaml", &manifest("podipc", &[], &[], ipc));
    let agent = Agent::start("sc-pid", manifests.path(), &[]);
    let shared = expect_phase(&agent, "shared", "Succeeded");
    assert_eq!(shared.trim_end_matches(['\0', '\n']), "/pause", "{shared:?}");
    let private = expect_phase(&agent, "private", "Succeeded");
    assert!(private.starts_with("sh\0-c\0"), "its own PID namespace: {private:?}");
    let host_init = std::fs::read("/proc/1/cmdline").expect("the host's PID 1");
    let host_pid = expect_phase(&agent, "hostpid", "Succeeded");
    assert_eq!(
        host_pid.trim_end_matches('\n').as_bytes(),
        &host_init[..],
        "the host's PID 1: {host_pid:?}"
    );
    let host_ipc = std::fs::read_link("/proc/self/ns/ipc").expect("the host's IPC namespace");
    let host_ipc = host_ipc.to_string_lossy();
    assert_eq!(expect_phase(&agent, "hostipc", "Succeeded").trim(), host_ipc);
    assert_ne!(expect_phase(&agent, "podipc", "Succeeded").trim(), host_ipc);
}

/// Seccomp: unset is Unconfined (kubelet without --seccomp-default), RuntimeDefault is Docker's
/// filter, Localhost loads `<root-dir>/seccomp/<name>`; a missing profile (CreateContainerError,
/// as the runtime's failure under kubelet) or one outside that directory is refused naming it.
#[test]
fn seccomp_profiles_are_applied_or_refused() {
    let manifests = ManifestDir::new();
    let agent = Agent::start("sc-seccomp", manifests.path(), &[]);
    let profiles = agent.root_dir().join("seccomp/profiles");
    std::fs::create_dir_all(&profiles).unwrap();
    std::fs::write(
        profiles.join("no-mkdir.json"),
        r#"{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO"}]}"#,
    )
    .unwrap();
    let status = "grep Seccomp: /proc/self/status; mkdir /tmp/made 2>&1; echo mkdir=$?";
    manifests.write("unset.yaml", &manifest("unset", &[], &[], status));
    manifests.write(
        "default.yaml",
        &manifest(
            "default",
            &["securityContext: {seccompProfile: {type: RuntimeDefault}}"],
            &[],
            status,
        ),
    );
    manifests.write(
        "local.yaml",
        &manifest(
            "local",
            &["securityContext: {seccompProfile: {type: RuntimeDefault}}"],
            &["securityContext: {seccompProfile: {type: Localhost, localhostProfile: profiles/no-mkdir.json}}"],
            status,
        ),
    );
    manifests.write(
        "missing.yaml",
        &manifest(
            "missing",
            &[],
            &["securityContext: {seccompProfile: {type: Localhost, localhostProfile: profiles/missing.json}}"],
            status,
        ),
    );
    manifests.write(
        "escape.yaml",
        &manifest(
            "escape",
            &[],
            &["securityContext: {seccompProfile: {type: Localhost, localhostProfile: ../../etc/passwd}}"],
            status,
        ),
    );
    let unset = expect_phase(&agent, "unset", "Succeeded");
    assert!(unset.contains("Seccomp:\t0") && unset.contains("mkdir=0"), "{unset}");
    let runtime_default = expect_phase(&agent, "default", "Succeeded");
    assert!(runtime_default.contains("Seccomp:\t2"), "{runtime_default}");
    let local = expect_phase(&agent, "local", "Succeeded");
    assert!(local.contains("Seccomp:\t2"), "{local}");
    assert!(
        local.contains("Operation not permitted") && local.contains("mkdir=1"),
        "the profile denies mkdir: {local}"
    );
    // kubelet hands the path to the runtime, whose failure to read it is a CreateContainerError.
    let missing = expect_waiting(&agent, "missing", "CreateContainerError");
    assert!(
        missing.starts_with("cannot load seccomp profile \"") && missing.contains("seccomp/profiles/missing.json"),
        "{missing}"
    );
    let escape = expect_config_error(&agent, "escape");
    assert!(
        escape.starts_with("securityContext.seccompProfile.localhostProfile: \"../../etc/passwd\""),
        "{escape}"
    );

    // --seccomp-default: an unset profile is Docker's default filter.
    let defaulted = ManifestDir::new();
    defaulted.write("unset.yaml", &manifest("unset", &[], &[], status));
    let agent = Agent::start("sc-seccomp-default", defaulted.path(), &["--seccomp-default"]);
    let unset = expect_phase(&agent, "unset", "Succeeded");
    assert!(unset.contains("Seccomp:\t2"), "{unset}");
}

/// AppArmor other than Unconfined needs AppArmor on the host (rejected with kubelet's reason
/// otherwise); seLinuxOptions run (labels Docker ignores without SELinux); procMount Unmasked
/// leaves /proc unmasked; hostUsers false is refused: Docker cannot give a pod its own user
/// namespace.
#[test]
fn apparmor_selinux_proc_mount_and_user_namespaces() {
    let apparmor = std::fs::read_to_string("/sys/module/apparmor/parameters/enabled")
        .is_ok_and(|s| s.trim_start().starts_with('Y'));
    let manifests = ManifestDir::new();
    manifests.write(
        "apparmor.yaml",
        &manifest(
            "apparmor",
            &[],
            &["securityContext: {appArmorProfile: {type: RuntimeDefault}}"],
            "true",
        ),
    );
    manifests.write(
        "unconfined.yaml",
        &manifest(
            "unconfined",
            &["securityContext: {appArmorProfile: {type: Unconfined}}"],
            &[],
            "true",
        ),
    );
    manifests.write(
        "selinux.yaml",
        &manifest(
            "selinux",
            &["securityContext: {seLinuxOptions: {level: 's0:c123,c456'}}"],
            &[],
            "true",
        ),
    );
    let masks = "grep -c ' /proc/keys ' /proc/mounts || true";
    manifests.write("masked.yaml", &manifest("masked", &[], &[], masks));
    manifests.write(
        "unmasked.yaml",
        &manifest("unmasked", &[], &["securityContext: {procMount: Unmasked}"], masks),
    );
    manifests.write("userns.yaml", &manifest("userns", &["hostUsers: false"], &[], "true"));
    let agent = Agent::start("sc-apparmor", manifests.path(), &[]);
    if apparmor {
        expect_phase(&agent, "apparmor", "Succeeded");
    } else {
        let message = expect_rejected(&agent, "apparmor", "AppArmor");
        assert_eq!(
            message,
            "Pod was rejected: Cannot enforce AppArmor: AppArmor is not enabled on the host"
        );
    }
    expect_phase(&agent, "unconfined", "Succeeded");
    expect_phase(&agent, "selinux", "Succeeded");
    assert_eq!(
        expect_phase(&agent, "masked", "Succeeded").trim(),
        "1",
        "Docker masks /proc/keys"
    );
    assert_eq!(
        expect_phase(&agent, "unmasked", "Succeeded").trim(),
        "0",
        "Unmasked: nothing masked"
    );
    let message = expect_rejected(&agent, "userns", "UnsupportedSecurityContext");
    assert!(
        message.starts_with("Pod was rejected: spec.hostUsers: false"),
        "{message}"
    );
}
