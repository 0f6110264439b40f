//! Cluster DNS, the managed /etc/hosts, host names and service link env vars, against real
//! Docker: each pod's `/etc/resolv.conf` per dnsPolicy and dnsConfig (kubelet's
//! `network/dns/dns.go`), the hosts file of `kubelet_etc_hosts.go` and `kubelet.go`'s hostAliases
//! test, `pod_hostnamefqdn_test.go`'s `hostname`/`hostname -f`, and `expansion`/`pods.go`'s
//! service environment variables in API-server mode.

use dockerlet_fake_apiserver::ApiServer;
use dockerlet_integration_tests::docker::{docker, exec};
use dockerlet_integration_tests::{
    wait_until, Agent, Container, ContainerStatusExt, EventLog, ManifestDir, PodExt, CHANGE_TIMEOUT, POD_START_TIMEOUT,
};
use serde_json::json;

/// The node resolv.conf the DNS tests start from (`--resolv-conf`).
const NODE_RESOLV_CONF: &str =
    "# the test's node file\nnameserver 192.168.0.53\nsearch corp.example.\noptions timeout:2\n";

/// A busybox container that sleeps until stopped.
fn sleeper(name: &str) -> String {
    format!(
        r#"  - name: {name}
    image: dockerlet.local/busybox:1
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
"#
    )
}

/// A pod manifest named `name` with `spec` lines (indented two spaces) and containers.
fn pod(name: &str, spec: &str, containers: &[String]) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 1\n{spec}  containers:\n{}",
        containers.concat()
    )
}

/// The container `container` of the running pod from manifest `manifest`.
fn container_of(agent: &Agent, manifest: &str, container: &str) -> Container {
    let pod = agent.wait_for_running(manifest);
    agent
        .pod_containers(pod.uid())
        .into_iter()
        .find(|c| c.kube_name() == container && c.state.running)
        .unwrap_or_else(|| panic!("container {container} of {manifest}"))
}

/// `cat <path>` in a container.
fn cat(c: &Container, path: &str) -> String {
    let out = exec(&c.id, &["cat", path]);
    assert!(
        out.status.success(),
        "cat {path}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A container's output (`docker logs`, stdout and stderr).
fn logs(id: &str) -> String {
    let out = docker(&["logs", id]);
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// ClusterFirst (unset or explicit), Default, hostNetwork with ClusterFirst (= Default) and
/// ClusterFirstWithHostNet, None with dnsConfig, and dnsConfig merged into ClusterFirst past the
/// nameserver and search-path limits (DNSConfigForming): each pod's `/etc/resolv.conf`, line
/// by line. A static pod with an unknown dnsPolicy is refused, naming the field.
#[test]
fn resolv_conf_follows_the_dns_policy_and_dns_config() {
    let dir = tempfile::tempdir().expect("temp dir");
    let node_file = dir.path().join("resolv.conf");
    std::fs::write(&node_file, NODE_RESOLV_CONF).expect("write the node resolv.conf");
    let manifests = ManifestDir::new();
    let one = [sleeper("app")];
    manifests.write("cf.yaml", &pod("cf", "", &one));
    manifests.write("cfx.yaml", &pod("cfx", "  dnsPolicy: ClusterFirst\n", &one));
    manifests.write("dflt.yaml", &pod("dflt", "  dnsPolicy: Default\n", &one));
    manifests.write("hn.yaml", &pod("hn", "  hostNetwork: true\n", &one));
    manifests.write(
        "hncf.yaml",
        &pod(
            "hncf",
            "  hostNetwork: true\n  dnsPolicy: ClusterFirstWithHostNet\n",
            &one,
        ),
    );
    // dns.go's "should support configurable pod DNS nameservers" pod.
    manifests.write(
        "none.yaml",
        &pod(
            "none",
            "  dnsPolicy: None\n  dnsConfig:\n    nameservers: [1.1.1.1]\n    searches: [resolv.conf.local]\n    options:\n    - name: ndots\n      value: \"2\"\n",
            &one,
        ),
    );
    manifests.write(
        "many.yaml",
        &pod(
            "many",
            "  dnsConfig:\n    nameservers: [1.1.1.1, 2.2.2.2, 3.3.3.3]\n    searches: [extra.example]\n    options:\n    - name: ndots\n      value: \"3\"\n    - name: edns0\n",
            &one,
        ),
    );
    let extra: Vec<String> = (0..30).map(|i| format!("s{i}.example")).collect();
    manifests.write(
        "searches.yaml",
        &pod(
            "searches",
            &format!("  dnsConfig:\n    searches: [{}]\n", extra.join(", ")),
            &one,
        ),
    );
    // The API server's validation, for a static pod: refused, naming the field.
    manifests.write("bad.yaml", &pod("bad", "  dnsPolicy: Cluster\n", &one));
    let resolv = node_file.display().to_string();
    let agent = Agent::start(
        "dns-policy",
        manifests.path(),
        &[
            "--cluster-dns",
            "10.96.0.10",
            "--cluster-domain",
            "cluster.local",
            "--resolv-conf",
            &resolv,
        ],
    );
    let events = EventLog::watch(&agent);
    let cluster = "nameserver 10.96.0.10\nsearch default.svc.cluster.local svc.cluster.local cluster.local corp.example\noptions ndots:5\n";
    let node = "nameserver 192.168.0.53\nsearch corp.example\noptions timeout:2\n";
    for (manifest, expected) in [
        ("cf", cluster),
        ("cfx", cluster),
        ("dflt", node),
        ("hn", node),
        ("hncf", cluster),
        ("none", "nameserver 1.1.1.1\nsearch resolv.conf.local\noptions ndots:2\n"),
        (
            "many",
            "nameserver 10.96.0.10\nnameserver 1.1.1.1\nnameserver 2.2.2.2\nsearch default.svc.cluster.local svc.cluster.local cluster.local corp.example extra.example\noptions ndots:3 edns0\n",
        ),
    ] {
        let c = container_of(&agent, manifest, "app");
        assert_eq!(cat(&c, "/etc/resolv.conf"), expected, "pod {manifest}");
    }
    // 3 cluster domains, the node's and 30 more: cut to 32, the last ones dropped.
    let mut applied = vec![
        "default.svc.cluster.local".to_string(),
        "svc.cluster.local".to_string(),
        "cluster.local".to_string(),
        "corp.example".to_string(),
    ];
    applied.extend(extra[..28].iter().cloned());
    let c = container_of(&agent, "searches", "app");
    assert_eq!(
        cat(&c, "/etc/resolv.conf"),
        format!("nameserver 10.96.0.10\nsearch {}\noptions ndots:5\n", applied.join(" "))
    );
    events.wait_for(&agent.pod_object("searches"), "DNSConfigForming", CHANGE_TIMEOUT, |m| {
        m == format!(
            "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: {}",
            applied.join(" ")
        )
    });
    let errors = wait_until("an error for bad.yaml", CHANGE_TIMEOUT, || {
        let errors = agent.manifest_errors();
        match errors
            .iter()
            .find(|e| e["file"].as_str().is_some_and(|f| f.ends_with("bad.yaml")))
        {
            Some(e) => Ok(e["reason"].as_str().unwrap_or_default().to_string()),
            None => Err(format!("{errors:?}")),
        }
    });
    assert!(
        errors.contains("spec.dnsPolicy: Unsupported value: \"Cluster\""),
        "the error names the field: {errors}"
    );
    events.wait_for(&agent.pod_object("many"), "DNSConfigForming", CHANGE_TIMEOUT, |m| {
        m == "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: 10.96.0.10 1.1.1.1 2.2.2.2"
    });
    assert!(
        events.about(&agent.pod_object("cf"), "DNSConfigForming").is_empty()
            && events.about(&agent.pod_object("cf"), "MissingClusterDNS").is_empty(),
        "a pod within the limits gets no DNS warning: {:?}",
        events.all()
    );
}

/// The kubelet_etc_hosts.go conformance test, ported: in a pod on the pod network, containers
/// see the managed file (kubelet's header, localhost lines, the pod IP and name, hostAliases
/// tab-separated as kubelet.go's hostAliases test expects); a container mounting its own
/// /etc/hosts keeps it; a host-network pod gets the node's file under the host-network header.
/// Without --cluster-dns a ClusterFirst pod gets the node's resolv.conf and MissingClusterDNS.
#[test]
fn etc_hosts_is_managed_as_kubelet_manages_it() {
    let own_mount = |name: &str, own: bool| {
        let mut c = sleeper(name);
        c.push_str("    volumeMounts:\n    - name: host-etc-hosts\n      mountPath: /etc/hosts-original\n");
        if own {
            c.push_str("    - name: host-etc-hosts\n      mountPath: /etc/hosts\n");
        }
        c
    };
    let volumes = "  volumes:\n  - name: host-etc-hosts\n    hostPath: {path: /etc/hosts, type: FileOrCreate}\n";
    let manifests = ManifestDir::new();
    manifests.write(
        "test-pod.yaml",
        &format!(
            "{}{volumes}",
            pod(
                "test-pod",
                "  hostAliases:\n  - ip: 123.45.67.89\n    hostnames: [foo, bar]\n",
                &[
                    own_mount("busybox-1", false),
                    own_mount("busybox-2", false),
                    own_mount("busybox-3", true)
                ],
            )
        ),
    );
    manifests.write(
        "test-host-network-pod.yaml",
        &format!(
            "{}{volumes}",
            pod(
                "test-host-network-pod",
                "  hostNetwork: true\n",
                &[own_mount("busybox-1", false), own_mount("busybox-2", false)],
            )
        ),
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let node_file = dir.path().join("resolv.conf");
    std::fs::write(&node_file, NODE_RESOLV_CONF).expect("write the node resolv.conf");
    let resolv = node_file.display().to_string();
    let agent = Agent::start("etc-hosts", manifests.path(), &["--resolv-conf", &resolv]);
    let events = EventLog::watch(&agent);
    let node_hosts = std::fs::read_to_string("/etc/hosts").expect("the node's /etc/hosts");

    let pod = agent.wait_for_running("test-pod");
    let ip = pod.pod_ip().expect("pod IP").to_string();
    let name = agent.pod_name("test-pod");
    let managed = format!(
        "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n{ip}\t{name}\n\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\n"
    );
    let is_managed =
        |hosts: &str, original: &str| hosts.starts_with("# Kubernetes-managed hosts file.") && hosts != original;
    for container in ["busybox-1", "busybox-2"] {
        let c = container_of(&agent, "test-pod", container);
        let (hosts, original) = (cat(&c, "/etc/hosts"), cat(&c, "/etc/hosts-original"));
        assert!(is_managed(&hosts, &original), "{container}: {hosts}");
        assert_eq!(hosts, managed, "{container}");
        assert!(
            hosts.contains("123.45.67.89\tfoo\tbar"),
            "kubelet.go's hostAliases assertion"
        );
    }
    let c = container_of(&agent, "test-pod", "busybox-3");
    let (hosts, original) = (cat(&c, "/etc/hosts"), cat(&c, "/etc/hosts-original"));
    assert!(
        !is_managed(&hosts, &original),
        "busybox-3 mounts its own /etc/hosts: {hosts}"
    );
    assert_eq!(hosts, node_hosts);
    let file = agent.root_dir().join("pods").join(pod.uid()).join("etc-hosts");
    assert_eq!(std::fs::read_to_string(&file).expect("<pod dir>/etc-hosts"), managed);

    for container in ["busybox-1", "busybox-2"] {
        let c = container_of(&agent, "test-host-network-pod", container);
        let (hosts, original) = (cat(&c, "/etc/hosts"), cat(&c, "/etc/hosts-original"));
        assert!(!is_managed(&hosts, &original), "host network {container}: {hosts}");
        assert_eq!(
            hosts,
            format!("# Kubernetes-managed hosts file (host network).\n{node_hosts}"),
            "host network {container}"
        );
    }

    // No --cluster-dns: ClusterFirst falls back to Default, with kubelet's event.
    let c = container_of(&agent, "test-pod", "busybox-1");
    assert_eq!(
        cat(&c, "/etc/resolv.conf"),
        "nameserver 192.168.0.53\nsearch corp.example\noptions timeout:2\n"
    );
    events.wait_for(&agent.pod_object("test-pod"), "MissingClusterDNS", CHANGE_TIMEOUT, |m| {
        m == format!("pod: \"{name}_default({})\". kubelet does not have ClusterDNS IP configured and cannot create Pod using \"ClusterFirst\" policy. Falling back to \"Default\" policy.", pod.uid())
    });
}

/// pod_hostnamefqdn_test.go, ported (busybox `echo $(hostname)';'$(hostname -f)';'`): the pod
/// name; the same with setHostnameAsFQDN but no subdomain; with a subdomain the FQDN for
/// `hostname -f`; with both the FQDN as hostname; spec.hostname replaces the name; a second
/// container of the pod sees the same hostname; an FQDN over 64 bytes leaves the pod Pending
/// with FailedCreatePodSandBox.
#[test]
fn hostnames_follow_hostname_subdomain_and_set_hostname_as_fqdn() {
    let echo = |name: &str| {
        format!(
            "  - name: {name}\n    image: dockerlet.local/busybox:1\n    command: [\"sh\", \"-c\", \"echo $(hostname)';'$(hostname -f)';'; trap 'exit 0' TERM; sleep 3600 & wait\"]\n"
        )
    };
    let manifests = ManifestDir::new();
    let long = "a".repeat(30);
    // A hostNetwork pod whose FQDN is too long: its sandbox has no name of its own, so it is
    // created and each container fails instead, as kubelet's GenerateRunContainerOptions.
    let hostnet_spec = format!(
        "  hostNetwork: true\n  hostname: {}\n  subdomain: t\n  setHostnameAsFQDN: true\n",
        "b".repeat(40)
    );
    for (manifest, spec) in [
        ("plain", ""),
        ("fqdnonly", "  setHostnameAsFQDN: true\n"),
        ("sub", "  subdomain: t\n"),
        ("subfqdn", "  subdomain: t\n  setHostnameAsFQDN: true\n"),
        ("named", "  hostname: h1\n  subdomain: t\n"),
        (long.as_str(), "  subdomain: t\n  setHostnameAsFQDN: true\n"),
        ("hostnet", &hostnet_spec),
    ] {
        manifests.write(
            &format!("{manifest}.yaml"),
            &pod(manifest, spec, &[echo("c1"), echo("c2")]),
        );
    }
    let agent = Agent::start("fqdn", manifests.path(), &["--cluster-domain", "cluster.local"]);
    let events = EventLog::watch(&agent);
    let domain = "t.default.svc.cluster.local";
    let name = |m: &str| agent.pod_name(m);
    for (manifest, expected) in [
        ("plain", format!("{0};{0};", name("plain"))),
        ("fqdnonly", format!("{0};{0};", name("fqdnonly"))),
        ("sub", format!("{0};{0}.{domain};", name("sub"))),
        ("subfqdn", format!("{0}.{domain};{0}.{domain};", name("subfqdn"))),
        ("named", format!("h1;h1.{domain};")),
    ] {
        for container in ["c1", "c2"] {
            let c = container_of(&agent, manifest, container);
            let out = wait_until(&format!("{manifest}/{container} output"), CHANGE_TIMEOUT, || {
                let out = logs(&c.id);
                if out.is_empty() {
                    Err("no output yet".to_string())
                } else {
                    Ok(out)
                }
            });
            assert_eq!(out.trim_end(), expected, "pod {manifest}, container {container}");
        }
    }
    let fqdn = format!("{}.{domain}", name(&long));
    events.wait_for(&agent.pod_object(&long), "FailedCreatePodSandBox", POD_START_TIMEOUT, |m| {
        m == format!("Failed to create pod sandbox: failed to construct FQDN from pod hostname and cluster domain, FQDN {fqdn} is too long (64 characters is the max, {} characters requested)", fqdn.len())
    });
    let pod = agent.pod(&long).expect("the long-named pod in /pods");
    assert_eq!(pod.phase(), "Pending");
    assert!(agent.pod_containers(pod.uid()).is_empty(), "no sandbox is created");

    let hostnet_fqdn = format!("{}.{domain}", "b".repeat(40));
    let message = format!("failed to construct FQDN from pod hostname and cluster domain, FQDN {hostnet_fqdn} is too long (64 characters is the max, {} characters requested)", hostnet_fqdn.len());
    events.wait_for(&agent.pod_object("hostnet"), "Failed", POD_START_TIMEOUT, |m| {
        m == format!("Error: {message}")
    });
    let pod = wait_until("the hostNetwork pod's containers waiting", CHANGE_TIMEOUT, || {
        let pod = agent.pod("hostnet").ok_or("not in /pods")?;
        let waiting: Vec<_> = ["c1", "c2"]
            .iter()
            .map(|c| pod.container(c).and_then(|s| s.waiting_reason()))
            .collect();
        if waiting == [Some("CreateContainerConfigError"); 2] {
            Ok(pod)
        } else {
            Err(format!("{waiting:?}"))
        }
    });
    let containers = agent.pod_containers(pod.uid());
    assert_eq!(containers.len(), 1, "the sandbox alone: {containers:?}");
}

/// The "Pods should contain environment variables for services" conformance test in API mode:
/// a Service's `_SERVICE_HOST`, `_SERVICE_PORT`, `_PORT`, `_PORT_<port>_TCP[_PROTO|_PORT|_ADDR]`
/// reach the container's env (read from its output), with `kubernetes` from `default`; an
/// explicit env var wins over a service variable and `$(VAR)` can use them; with
/// enableServiceLinks false only the KUBERNETES_ variables remain; Services without a cluster IP
/// and of other namespaces give none.
#[test]
fn service_links_reach_the_environment() {
    let api = ApiServer::start();
    if api.get("services", "default", "kubernetes").is_none() {
        api.create(json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "kubernetes", "namespace": "default"},
            "spec": {"clusterIP": "10.96.0.1", "ports": [{"name": "https", "port": 443, "protocol": "TCP"}]}
        }))
        .expect("create the kubernetes Service");
    }
    let kube_host = api
        .get("services", "default", "kubernetes")
        .expect("kubernetes Service")["spec"]["clusterIP"]
        .as_str()
        .expect("its cluster IP")
        .to_string();
    let service = |ns: &str, name: &str, ip: &str| {
        json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"clusterIP": ip, "ports": [{"name": "http", "port": 8765, "protocol": "TCP", "targetPort": 8080}]}
        })
    };
    api.create(service("default", "fooservice", "10.96.0.50"))
        .expect("create fooservice");
    api.create(service("default", "headless", "None"))
        .expect("create headless");
    api.create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}}))
        .expect("create namespace other");
    api.create(service("other", "elsewhere", "10.96.0.60"))
        .expect("create elsewhere");

    let manifests = ManifestDir::new();
    let kubeconfig = api.kubeconfig_path().display().to_string();
    let agent = Agent::start("svc-links", manifests.path(), &["--kubeconfig", &kubeconfig]);
    let client = |name: &str, links: bool| {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "nodeName": agent.node(),
                "restartPolicy": "Never",
                "automountServiceAccountToken": false,
                "enableServiceLinks": links,
                "containers": [{
                    "name": "env3cont",
                    "image": "dockerlet.local/busybox:1",
                    "command": ["sh", "-c", "env"],
                    "env": [
                        {"name": "FOOSERVICE_SERVICE_PORT", "value": "overridden"},
                        {"name": "FOO_URL", "value": "http://$(FOOSERVICE_SERVICE_HOST):$(FOOSERVICE_SERVICE_PORT_HTTP)"}
                    ]
                }]
            }
        })
    };
    api.create(client("client-envvars", true))
        .expect("create the client pod");
    api.create(client("client-nolinks", false))
        .expect("create the pod without links");

    let output = |pod: &str| {
        wait_until(&format!("{pod}'s env output"), POD_START_TIMEOUT, || {
            let c = agent
                .containers()
                .into_iter()
                .find(|c| c.pod_name() == pod && c.kube_name() == "env3cont")
                .ok_or_else(|| format!("no container of {pod} yet"))?;
            let out = logs(&c.id);
            if out.contains("PATH=") {
                Ok(out)
            } else {
                Err(format!("output so far: {out:?}"))
            }
        })
    };
    let env = output("client-envvars");
    let lines: Vec<&str> = env.lines().collect();
    for expected in [
        "FOOSERVICE_SERVICE_HOST=10.96.0.50".to_string(),
        "FOOSERVICE_SERVICE_PORT=overridden".to_string(),
        "FOOSERVICE_SERVICE_PORT_HTTP=8765".to_string(),
        "FOOSERVICE_PORT=tcp://10.96.0.50:8765".to_string(),
        "FOOSERVICE_PORT_8765_TCP=tcp://10.96.0.50:8765".to_string(),
        "FOOSERVICE_PORT_8765_TCP_PROTO=tcp".to_string(),
        "FOOSERVICE_PORT_8765_TCP_PORT=8765".to_string(),
        "FOOSERVICE_PORT_8765_TCP_ADDR=10.96.0.50".to_string(),
        "FOO_URL=http://10.96.0.50:8765".to_string(),
        format!("KUBERNETES_SERVICE_HOST={kube_host}"),
    ] {
        assert!(lines.contains(&expected.as_str()), "{expected} in the env:\n{env}");
    }
    assert!(
        !env.contains("HEADLESS_") && !env.contains("ELSEWHERE_"),
        "no variables for a headless Service or another namespace's:\n{env}"
    );
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.starts_with("FOOSERVICE_SERVICE_PORT="))
            .count(),
        1,
        "the explicit value replaces the service variable:\n{env}"
    );

    let env = output("client-nolinks");
    assert!(
        env.lines().any(|l| l == format!("KUBERNETES_SERVICE_HOST={kube_host}")),
        "KUBERNETES_* even without service links:\n{env}"
    );
    let service_vars: Vec<&str> = env.lines().filter(|l| l.starts_with("FOOSERVICE_")).collect();
    assert_eq!(
        service_vars,
        ["FOOSERVICE_SERVICE_PORT=overridden"],
        "no service variables but KUBERNETES_* (the container's own variable stays):\n{env}"
    );
}
