//! Static-pod volumes against real Docker: `medium: Memory` emptyDirs (tmpfs of `sizeLimit`),
//! emptyDir modes, subPath and subPathExpr (and the subPath escape check), env resourceFieldRef,
//! and the removal of the pod's directory with its mounts. Expected strings are the upstream
//! conformance tests' (`empty_dir.go`, `common/node/downwardapi.go`).

use dockerlet_integration_tests::{Agent, ManifestDir, PodExt, CHANGE_TIMEOUT};

const POD: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: vols
spec:
  terminationGracePeriodSeconds: 2
  volumes:
  - name: shm
    emptyDir: {medium: Memory, sizeLimit: 10Mi}
  - name: work
    emptyDir: {}
  containers:
  - name: client-container
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "echo hello > /sub/file; trap 'exit 0' TERM; sleep 3600 & wait"]
    env:
    - name: POD_NAME
      valueFrom: {fieldRef: {fieldPath: metadata.name}}
    - name: CPU_LIMIT
      valueFrom: {resourceFieldRef: {resource: limits.cpu}}
    - name: MEMORY_LIMIT
      valueFrom: {resourceFieldRef: {resource: limits.memory}}
    - name: CPU_REQUEST
      valueFrom: {resourceFieldRef: {resource: requests.cpu}}
    - name: MEMORY_REQUEST
      valueFrom: {resourceFieldRef: {resource: requests.memory}}
    resources:
      requests: {cpu: 250m, memory: 32Mi}
      limits: {cpu: 1250m, memory: 64Mi}
    volumeMounts:
    - {name: shm, mountPath: /usr/share/volumeshare}
    - {name: work, mountPath: /sub, subPath: fixed/dir}
    - {name: work, mountPath: /expr, subPathExpr: "logs/$(POD_NAME)"}
    - {name: work, mountPath: /all}
"#;

/// Env resourceFieldRefs give the conformance values (CPU_LIMIT=2 for 1250m,
/// MEMORY_LIMIT=67108864, CPU_REQUEST=1, MEMORY_REQUEST=33554432); a Memory emptyDir is a tmpfs of its sizeLimit (df: 10240); a
/// subPath and a subPathExpr mount their part of the volume; deleting the pod unmounts its tmpfs
/// and subPath binds and removes its directory.
#[test]
fn resource_env_memory_empty_dir_and_sub_paths_in_a_static_pod() {
    let manifests = ManifestDir::new();
    manifests.write("vols.yaml", POD);
    let agent = Agent::start("static-volumes", manifests.path(), &[]);
    let pod = agent.wait_for_running("vols");
    let uid = pod.uid().to_string();
    let name = agent.pod_name("vols");
    let id = agent
        .pod_containers(&uid)
        .into_iter()
        .find(|c| c.kube_name() == "client-container")
        .expect("container")
        .id;
    let sh = |script: &str| {
        let out = dockerlet_integration_tests::docker::exec(&id, &["sh", "-c", script]);
        assert!(
            out.status.success(),
            "{script}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let env = sh("env");
    for line in [
        "CPU_LIMIT=2",
        "MEMORY_LIMIT=67108864",
        "CPU_REQUEST=1",
        "MEMORY_REQUEST=33554432",
    ] {
        assert!(env.lines().any(|l| l == line), "{line} in {env}");
    }

    assert!(
        sh("mount")
            .lines()
            .any(|l| l.contains("/usr/share/volumeshare") && l.contains("tmpfs")),
        "the Memory emptyDir is a tmpfs"
    );
    assert_eq!(
        sh("df | grep /usr/share/volumeshare | awk '{print $2}'").trim(),
        "10240"
    );
    assert_eq!(sh("stat -c %a /all").trim(), "777", "emptyDir directories are 0777");

    assert_eq!(
        sh("cat /all/fixed/dir/file").trim(),
        "hello",
        "the subPath is that part of the volume"
    );
    sh("echo from-expr > /expr/x");
    assert_eq!(
        sh(&format!("cat /all/logs/{name}/x")).trim(),
        "from-expr",
        "subPathExpr expands $(POD_NAME)"
    );

    let pod_dir = agent.root_dir().join("pods").join(&uid);
    assert!(
        mounts_under(&pod_dir) >= 2,
        "the tmpfs and the subPath binds are the agent's mounts"
    );
    std::fs::remove_file(manifests.path().join("vols.yaml")).expect("remove manifest");
    dockerlet_integration_tests::wait_for("pod directory removed", CHANGE_TIMEOUT, || {
        (!pod_dir.exists() && agent.pod_containers(&uid).is_empty()).then_some(())
    });
    assert_eq!(
        mounts_under(&pod_dir),
        0,
        "nothing stays mounted under the removed pod directory"
    );
}

/// A subPath that the container turns into a symlink out of its volume is refused at the next
/// start (CVE-2017-1002101): the container waits with CreateContainerConfigError naming the
/// mount, and nothing of the node is mounted into it.
#[test]
fn a_sub_path_symlinked_out_of_its_volume_is_refused() {
    let manifests = ManifestDir::new();
    manifests.write(
        "escape.yaml",
        r#"apiVersion: v1
kind: Pod
metadata:
  name: escape
spec:
  terminationGracePeriodSeconds: 1
  restartPolicy: Always
  initContainers:
  - name: plant
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "ln -s /etc /vol/evil"]
    volumeMounts:
    - {name: vol, mountPath: /vol}
  containers:
  - name: victim
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
    volumeMounts:
    - {name: vol, mountPath: /host-etc, subPath: evil}
  volumes:
  - name: vol
    emptyDir: {}
"#,
    );
    let agent = Agent::start("subpath-escape", manifests.path(), &[]);
    let waiting = dockerlet_integration_tests::wait_for("victim refused", CHANGE_TIMEOUT, || {
        let pod = agent.pod("escape")?;
        let status = pod.status.as_ref()?.container_statuses.as_ref()?.first()?.clone();
        let waiting = status.state.as_ref()?.waiting.clone()?;
        (waiting.reason.as_deref() == Some("CreateContainerConfigError")).then_some(waiting)
    });
    let message = waiting.message.unwrap_or_default();
    assert!(
        message.contains("volumeMounts[vol]") && message.contains("outside of the volume"),
        "{message}"
    );
    let uid = agent.pod("escape").expect("pod").uid().to_string();
    assert!(
        agent.pod_containers(&uid).iter().all(|c| c.kube_name() != "victim"),
        "the victim was never created"
    );
}

/// Mount points of this process's namespace at or under `dir`.
fn mounts_under(dir: &std::path::Path) -> usize {
    let info = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    let dir = dir.to_string_lossy().into_owned();
    info.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|p| p.starts_with(&dir))
        .count()
}

/// Upstream e2e_node `volume_manager_test.go` ("should remove the volume from the node"): once a
/// pod has finished (Succeeded, not deleted), its memory-backed emptyDir is unmounted and its
/// directory removed, as kubelet's volume manager does; the pod stays Succeeded.
#[test]
fn a_finished_pods_volumes_are_torn_down() {
    let manifests = ManifestDir::new();
    manifests.write(
        "finished.yaml",
        r#"apiVersion: v1
kind: Pod
metadata: {name: finished}
spec:
  restartPolicy: Never
  volumes:
  - name: memory-volume
    emptyDir: {medium: Memory}
  containers:
  - name: memory-volume-test
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "echo"]
    volumeMounts: [{name: memory-volume, mountPath: /tmp}]
"#,
    );
    let agent = Agent::start("finished-volumes", manifests.path(), &[]);
    let pod = agent.wait_for_pod("finished", "Succeeded", CHANGE_TIMEOUT, |p| p.phase() == "Succeeded");
    let volume = agent
        .root_dir()
        .join("pods")
        .join(pod.uid())
        .join("volumes/kubernetes.io~empty-dir/memory-volume");
    let volume = volume.to_str().expect("utf-8").to_string();
    dockerlet_integration_tests::wait_for("the volume unmounted and removed", CHANGE_TIMEOUT, || {
        let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
        let mounted = mounts.lines().any(|l| l.split(' ').nth(1) == Some(volume.as_str()));
        (!mounted && !std::path::Path::new(&volume).exists()).then_some(())
    });
    let after = agent.pod("finished").expect("pod");
    assert_eq!(after.phase(), "Succeeded", "{}", after.summary());
}
