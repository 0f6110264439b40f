//! Pod admission: what kubelet's admit handlers refuse before a pod's first sync. A rejected pod
//! never runs: its phase is Failed with the handler's reason, as kubelet's `rejectPod` reports it.
//!
//! - The operating system (`pkg/kubelet/lifecycle/predicate.go`): a `kubernetes.io/os` pod
//!   label other than `linux` (reason `PodOSSelectorNodeLabelDoesNotMatch`; kubelet reads the
//!   pod's labels here, not its node selector), and `spec.os.name` other than `linux` (reason
//!   `PodOSNotSupported`).
//! - sysctls (`pkg/kubelet/sysctl`): the safe set, plus `--allowed-unsafe-sysctls`; a sysctl in a
//!   namespace the pod shares with the host is refused. Reason `SysctlForbidden`.
//! - AppArmor (`pkg/kubelet/lifecycle` + `pkg/security/apparmor`): a profile other than
//!   Unconfined on a host without AppArmor. Reason `AppArmor`.
//! - `supplementalGroupsPolicy: Strict`: Docker always merges the image's `/etc/group`
//!   memberships. Reason `SupplementalGroupsPolicyNotSupported`, as kubelet on such a runtime.
//! - `hostUsers: false` and Windows options: Docker cannot give a pod its own user namespace,
//!   and this is a Linux node. Reason `UnsupportedSecurityContext`.
//! - An init container `restartPolicy` other than `Always` (a sidecar): the API accepts no
//!   other value, and run as anything else the pod could hang. Reason `UnsupportedPodSpec`.
//! - Newer features not implemented here, refused rather than ignored (reason
//!   `UnsupportedPodSpec`): `hostnameOverride`, pod-level `resources`, `resourceClaims` and
//!   `resources.claims`, a regular container's `restartPolicy` and `restartPolicyRules`.
//!   (`recursiveReadOnly: Enabled` is the container's `CreateContainerConfigError`, as kubelet
//!   on a runtime without it: `volume::mounts`.)

use k8s_openapi::api::core::v1::{Pod, PodStatus};

use crate::security::{apparmor_profile, normalize_sysctl, SecurityConfig};
use crate::spec::{containers_with_fields, qos_class};

/// The first pod field of a newer (alpha or beta) feature this node does not implement, with
/// why, so a pod that asks for one is refused rather than run without it.
fn unsupported_feature(spec: &k8s_openapi::api::core::v1::PodSpec) -> Option<String> {
    let not_yet = |field: String, what: &str| Some(format!("{field}: {what} is not supported by this node yet"));
    if spec.hostname_override.is_some() {
        return not_yet("spec.hostnameOverride".into(), "a hostname override");
    }
    if spec.resources.is_some() {
        return not_yet("spec.resources".into(), "pod-level resources");
    }
    if spec.resource_claims.as_ref().is_some_and(|c| !c.is_empty()) {
        return not_yet("spec.resourceClaims".into(), "dynamic resource allocation");
    }
    for (field, c) in crate::spec::containers_with_fields(spec) {
        if field.starts_with("spec.containers") && c.restart_policy.is_some() {
            return not_yet(format!("{field}.restartPolicy"), "a container-level restart policy");
        }
        if c.restart_policy_rules.as_ref().is_some_and(|r| !r.is_empty()) {
            return not_yet(format!("{field}.restartPolicyRules"), "container restart rules");
        }
        if c.resources
            .as_ref()
            .and_then(|r| r.claims.as_ref())
            .is_some_and(|c| !c.is_empty())
        {
            return not_yet(format!("{field}.resources.claims"), "dynamic resource allocation");
        }
    }
    None
}

/// kubelet's reason for a pod whose `kubernetes.io/os` label is not the node's OS.
pub const POD_OS_SELECTOR_NODE_LABEL_DOES_NOT_MATCH: &str = "PodOSSelectorNodeLabelDoesNotMatch";
/// kubelet's reason for a pod whose `spec.os.name` is not the node's OS.
pub const POD_OS_NOT_SUPPORTED: &str = "PodOSNotSupported";
/// The node's operating system, as `kubernetes.io/os` and `spec.os.name` name it.
const NODE_OS: &str = "linux";
/// kubelet's `ForbiddenReason` for sysctls.
pub const SYSCTL_FORBIDDEN: &str = "SysctlForbidden";
/// kubelet's AppArmor admission reason.
pub const APPARMOR: &str = "AppArmor";
/// kubelet's reason for `supplementalGroupsPolicy: Strict` on a runtime that cannot do it.
pub const SUPPLEMENTAL_GROUPS_POLICY_NOT_SUPPORTED: &str = "SupplementalGroupsPolicyNotSupported";
/// dockerlet's reason for other pod-level security settings Docker cannot honour.
pub const UNSUPPORTED_SECURITY_CONTEXT: &str = "UnsupportedSecurityContext";
/// dockerlet's reason for pod features it does not implement yet.
pub const UNSUPPORTED_POD_SPEC: &str = "UnsupportedPodSpec";

/// kubelet's safe sysctls (`pkg/kubelet/sysctl/safe_sysctls.go`); all are namespaced.
pub const SAFE_SYSCTLS: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
];

/// Why a pod was not admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// The pod status reason (`SysctlForbidden`, …), also the event's reason.
    pub reason: String,
    /// What was refused and why, naming the field.
    pub message: String,
}

fn reject(reason: &str, message: String) -> Rejection {
    Rejection {
        reason: reason.to_string(),
        message,
    }
}

/// A kernel namespace a sysctl belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Namespace {
    Ipc,
    Net,
}

impl Namespace {
    fn name(self) -> &'static str {
        match self {
            Namespace::Ipc => "ipc",
            Namespace::Net => "net",
        }
    }
}

/// The namespace of a sysctl or a sysctl prefix (component-helpers' `NamespacedBy`).
fn namespace_of(name: &str) -> Option<Namespace> {
    if name == "kernel.sem" {
        return Some(Namespace::Ipc);
    }
    if ["kernel.shm", "kernel.msg", "fs.mqueue."]
        .iter()
        .any(|p| name.starts_with(p))
    {
        return Some(Namespace::Ipc);
    }
    name.starts_with("net.").then_some(Namespace::Net)
}

/// An `--allowed-unsafe-sysctls` entry that kubelet would refuse at start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the sysctls {0:?} are not known to be namespaced")]
pub struct NotNamespaced(pub String);

/// Check the `--allowed-unsafe-sysctls` patterns as kubelet's `NewAllowlist` does: each (or
/// its prefix, for a pattern ending in `*`) must be namespaced.
pub fn check_unsafe_sysctl_patterns(patterns: &[String]) -> Result<(), NotNamespaced> {
    for pattern in patterns {
        let name = normalize_sysctl(pattern);
        let name = name.strip_suffix('*').unwrap_or(&name);
        if namespace_of(name).is_none() {
            return Err(NotNamespaced(name.to_string()));
        }
    }
    Ok(())
}

/// Why kubelet forbids a pod's sysctl (`SysctlForbidden`), in its words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum SysctlForbidden {
    /// Neither safe nor named by `--allowed-unsafe-sysctls`.
    #[error("{0:?} not allowlisted")]
    NotAllowlisted(String),
    /// In a namespace the pod shares with the host (`hostNetwork`, `hostIPC`).
    #[error("{name:?} not allowed with host {namespace} enabled")]
    HostNamespace {
        /// The sysctl, normalized.
        name: String,
        /// `net` or `ipc`.
        namespace: &'static str,
    },
}

/// kubelet's `validateSysctl`: allowlisted (safe, or named by an unsafe pattern), and not in a
/// namespace the pod shares with the host.
fn validate_sysctl(name: &str, allowed: &[String], host_net: bool, host_ipc: bool) -> Result<(), SysctlForbidden> {
    let name = normalize_sysctl(name);
    let exact = SAFE_SYSCTLS
        .iter()
        .copied()
        .chain(allowed.iter().map(String::as_str).filter(|p| !p.ends_with('*')))
        .any(|s| normalize_sysctl(s) == name);
    let prefixed = allowed
        .iter()
        .filter_map(|p| p.strip_suffix('*'))
        .any(|p| name.starts_with(&normalize_sysctl(p)));
    if !exact && !prefixed {
        return Err(SysctlForbidden::NotAllowlisted(name));
    }
    match namespace_of(&name) {
        Some(ns) if (ns == Namespace::Ipc && host_ipc) || (ns == Namespace::Net && host_net) => {
            Err(SysctlForbidden::HostNamespace {
                name,
                namespace: ns.name(),
            })
        }
        _ => Ok(()),
    }
}

/// Admit the pod, or say why not.
pub fn admit(pod: &Pod, config: &SecurityConfig) -> Result<(), Rejection> {
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(());
    };
    let os_label = pod.metadata.labels.as_ref().and_then(|l| l.get("kubernetes.io/os"));
    if os_label.is_some_and(|os| os != NODE_OS) {
        return Err(reject(
            POD_OS_SELECTOR_NODE_LABEL_DOES_NOT_MATCH,
            "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label".to_string(),
        ));
    }
    if spec.os.as_ref().is_some_and(|os| os.name != NODE_OS) {
        return Err(reject(
            POD_OS_NOT_SUPPORTED,
            "Failed to admit pod as the OS field doesn't match node OS".to_string(),
        ));
    }
    let psc = spec.security_context.clone().unwrap_or_default();
    let host_net = spec.host_network == Some(true);
    let host_ipc = spec.host_ipc == Some(true);
    for sysctl in psc.sysctls.iter().flatten() {
        validate_sysctl(&sysctl.name, &config.allowed_unsafe_sysctls, host_net, host_ipc)
            .map_err(|e| reject(SYSCTL_FORBIDDEN, format!("forbidden sysctl: {e}")))?;
    }
    if !config.apparmor_enabled {
        for (_, container) in containers_with_fields(spec) {
            let profile = apparmor_profile(pod, container).map_err(|e| reject(APPARMOR, e.to_string()))?;
            if profile.is_some_and(|p| p.type_ != "Unconfined") {
                return Err(reject(
                    APPARMOR,
                    "Cannot enforce AppArmor: AppArmor is not enabled on the host".to_string(),
                ));
            }
        }
    }
    if psc.supplemental_groups_policy.as_deref() == Some("Strict") {
        return Err(reject(
            SUPPLEMENTAL_GROUPS_POLICY_NOT_SUPPORTED,
            "SupplementalGroupsPolicy=Strict is not supported in this node".to_string(),
        ));
    }
    if let Some(other) = psc
        .supplemental_groups_policy
        .as_deref()
        .filter(|p| *p != "Merge" && *p != "Strict")
    {
        return Err(reject(
            UNSUPPORTED_SECURITY_CONTEXT,
            format!(
                "spec.securityContext.supplementalGroupsPolicy: unsupported value {other:?}: expected Merge or Strict"
            ),
        ));
    }
    if spec.host_users == Some(false) {
        return Err(reject(
            UNSUPPORTED_SECURITY_CONTEXT,
            "spec.hostUsers: false needs a user namespace per pod, which Docker cannot give (it has one remapping for the whole engine)".to_string(),
        ));
    }
    if psc.windows_options.is_some() {
        return Err(reject(
            UNSUPPORTED_SECURITY_CONTEXT,
            "spec.securityContext.windowsOptions: Windows options cannot be honoured on a Linux node".to_string(),
        ));
    }
    if let Some(message) = unsupported_feature(spec) {
        return Err(reject(UNSUPPORTED_POD_SPEC, message));
    }
    for (i, init) in spec.init_containers.iter().flatten().enumerate() {
        if let Some(policy) = init.restart_policy.as_deref().filter(|p| *p != "Always") {
            return Err(reject(
                UNSUPPORTED_POD_SPEC,
                format!(
                    "spec.initContainers[{i}].restartPolicy: Unsupported value: {policy:?}: supported values: \"Always\""
                ),
            ));
        }
    }
    for (field, container) in containers_with_fields(spec) {
        if container
            .security_context
            .as_ref()
            .is_some_and(|sc| sc.windows_options.is_some())
        {
            return Err(reject(
                UNSUPPORTED_SECURITY_CONTEXT,
                format!("{field}.securityContext.windowsOptions: Windows options cannot be honoured on a Linux node"),
            ));
        }
    }
    Ok(())
}

/// The status of a rejected pod, as kubelet's `rejectPod` sets it.
pub fn rejected_status(pod: &Pod, rejection: &Rejection) -> PodStatus {
    PodStatus {
        phase: Some("Failed".to_string()),
        reason: Some(rejection.reason.clone()),
        message: Some(format!("Pod was rejected: {}", rejection.message)),
        qos_class: Some(qos_class(pod).to_string()),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        AppArmorProfile, Container, PodSecurityContext, PodSpec, SecurityContext, Sysctl, WindowsSecurityContextOptions,
    };

    fn pod_with(psc: PodSecurityContext, edit: impl FnOnce(&mut PodSpec)) -> Pod {
        let mut spec = PodSpec {
            security_context: Some(psc),
            containers: vec![Container {
                name: "c".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        edit(&mut spec);
        Pod {
            spec: Some(spec),
            ..Default::default()
        }
    }

    fn sysctls(names: &[&str]) -> PodSecurityContext {
        PodSecurityContext {
            sysctls: Some(
                names
                    .iter()
                    .map(|n| Sysctl {
                        name: n.to_string(),
                        value: "1".into(),
                    })
                    .collect(),
            ),
            ..Default::default()
        }
    }

    /// Safe sysctls pass, others need --allowed-unsafe-sysctls, host namespaces refuse theirs;
    /// messages as kubelet's.
    #[test]
    fn sysctls_are_admitted_as_kubelet_admits_them() {
        let config = SecurityConfig::default();
        let unsafe_ok = SecurityConfig {
            allowed_unsafe_sysctls: vec!["kernel.msg*".into(), "net.core.somaxconn".into()],
            ..Default::default()
        };
        /// Sysctls, node settings, hostNetwork, hostIPC, the rejection message.
        type Case<'a> = (&'a [&'a str], &'a SecurityConfig, bool, bool, Option<&'a str>);
        let table: Vec<Case> = vec![
            (&["kernel.shm_rmid_forced"], &config, false, false, None),
            (&["kernel/shm_rmid_forced"], &config, false, false, None),
            (
                &["kernel.msgmax"],
                &config,
                false,
                false,
                Some(r#"forbidden sysctl: "kernel.msgmax" not allowlisted"#),
            ),
            (&["kernel.msgmax", "net.core.somaxconn"], &unsafe_ok, false, false, None),
            (
                &["kernel.sem"],
                &unsafe_ok,
                false,
                false,
                Some(r#"forbidden sysctl: "kernel.sem" not allowlisted"#),
            ),
            (
                &["kernel.shm_rmid_forced"],
                &config,
                false,
                true,
                Some(r#"forbidden sysctl: "kernel.shm_rmid_forced" not allowed with host ipc enabled"#),
            ),
            (
                &["net.ipv4.tcp_syncookies"],
                &config,
                true,
                false,
                Some(r#"forbidden sysctl: "net.ipv4.tcp_syncookies" not allowed with host net enabled"#),
            ),
        ];
        for (names, config, host_net, host_ipc, want) in table {
            let pod = pod_with(sysctls(names), |s| {
                s.host_network = Some(host_net);
                s.host_ipc = Some(host_ipc);
            });
            let got = admit(&pod, config).err();
            assert_eq!(got.as_ref().map(|r| r.message.as_str()), want, "{names:?}");
            if let Some(r) = got {
                assert_eq!(r.reason, SYSCTL_FORBIDDEN);
                let status = rejected_status(&pod, &r);
                assert_eq!(status.phase.as_deref(), Some("Failed"));
                assert_eq!(status.reason.as_deref(), Some("SysctlForbidden"));
                assert_eq!(status.message, Some(format!("Pod was rejected: {}", r.message)));
            }
        }
        assert!(check_unsafe_sysctl_patterns(&["net.*".into(), "kernel.shm*".into(), "fs/mqueue/x".into()]).is_ok());
        assert_eq!(
            check_unsafe_sysctl_patterns(&["vm.swappiness".into()])
                .unwrap_err()
                .to_string(),
            r#"the sysctls "vm.swappiness" are not known to be namespaced"#
        );
    }

    /// AppArmor profiles other than Unconfined are refused on a host without AppArmor.
    #[test]
    fn apparmor_needs_the_host_to_have_it() {
        let profile = |type_: &str| AppArmorProfile {
            type_: type_.into(),
            localhost_profile: Some("p".into()),
        };
        let with = |type_: &str| {
            pod_with(PodSecurityContext::default(), |s| {
                s.containers[0].security_context = Some(SecurityContext {
                    app_armor_profile: Some(profile(type_)),
                    ..Default::default()
                });
            })
        };
        let off = SecurityConfig::default();
        let on = SecurityConfig {
            apparmor_enabled: true,
            ..Default::default()
        };
        assert_eq!(admit(&with("Unconfined"), &off), Ok(()));
        assert_eq!(admit(&with("Localhost"), &on), Ok(()));
        for type_ in ["RuntimeDefault", "Localhost"] {
            let r = admit(&with(type_), &off).unwrap_err();
            assert_eq!(r.reason, "AppArmor");
            assert_eq!(
                r.message,
                "Cannot enforce AppArmor: AppArmor is not enabled on the host"
            );
        }
    }

    /// Newer pod features this node does not implement are refused, naming the field.
    #[test]
    fn unimplemented_newer_features_are_refused() {
        use k8s_openapi::api::core::v1::ResourceRequirements;
        let config = SecurityConfig::default();
        let refused = |edit: &dyn Fn(&mut PodSpec)| {
            let r = admit(&pod_with(PodSecurityContext::default(), edit), &config).unwrap_err();
            assert_eq!(r.reason, UNSUPPORTED_POD_SPEC);
            r.message
        };
        assert_eq!(
            refused(&|s| s.hostname_override = Some("h".into())),
            "spec.hostnameOverride: a hostname override is not supported by this node yet"
        );
        assert_eq!(
            refused(&|s| s.resources = Some(ResourceRequirements::default())),
            "spec.resources: pod-level resources is not supported by this node yet"
        );
        assert_eq!(
            refused(&|s| s.containers[0].restart_policy = Some("Never".into())),
            "spec.containers[0].restartPolicy: a container-level restart policy is not supported by this node yet"
        );
    }

    /// kubelet's OS predicates: `spec.os.name` and the `kubernetes.io/os` pod label must be
    /// linux (the podOSRejection conformance test asks for PodOSNotSupported).
    #[test]
    fn pods_for_another_os_are_rejected() {
        let config = SecurityConfig::default();
        let windows = pod_with(PodSecurityContext::default(), |s| {
            s.os = Some(k8s_openapi::api::core::v1::PodOS { name: "windows".into() });
        });
        let r = admit(&windows, &config).unwrap_err();
        assert_eq!(r.reason, POD_OS_NOT_SUPPORTED);
        assert_eq!(r.message, "Failed to admit pod as the OS field doesn't match node OS");
        let linux = pod_with(PodSecurityContext::default(), |s| {
            s.os = Some(k8s_openapi::api::core::v1::PodOS { name: "linux".into() });
        });
        assert_eq!(admit(&linux, &config), Ok(()));
        let mut labelled = pod_with(PodSecurityContext::default(), |_| {});
        labelled.metadata.labels = Some([("kubernetes.io/os".to_string(), "windows".to_string())].into());
        let r = admit(&labelled, &config).unwrap_err();
        assert_eq!(r.reason, POD_OS_SELECTOR_NODE_LABEL_DOES_NOT_MATCH);
        assert_eq!(
            r.message,
            "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"
        );
    }

    /// A sidecar (restartable init container, `restartPolicy: Always`) is admitted; any other
    /// init container restart policy is refused, as the API refuses it.
    #[test]
    fn sidecars_are_admitted_other_init_restart_policies_refused() {
        let config = SecurityConfig::default();
        let with_policy = |policy: &str| {
            pod_with(PodSecurityContext::default(), |s| {
                s.init_containers = Some(vec![
                    Container {
                        name: "setup".into(),
                        ..Default::default()
                    },
                    Container {
                        name: "proxy".into(),
                        restart_policy: Some(policy.into()),
                        ..Default::default()
                    },
                ]);
            })
        };
        assert_eq!(admit(&with_policy("Always"), &config), Ok(()));
        let r = admit(&with_policy("OnFailure"), &config).unwrap_err();
        assert_eq!(r.reason, UNSUPPORTED_POD_SPEC);
        assert_eq!(
            r.message,
            r#"spec.initContainers[1].restartPolicy: Unsupported value: "OnFailure": supported values: "Always""#
        );
    }

    /// Strict supplemental groups, user namespaces and Windows options are refused, naming the
    /// field.
    #[test]
    fn what_docker_cannot_do_is_refused_at_admission() {
        let config = SecurityConfig::default();
        let strict = pod_with(
            PodSecurityContext {
                supplemental_groups_policy: Some("Strict".into()),
                ..Default::default()
            },
            |_| {},
        );
        let r = admit(&strict, &config).unwrap_err();
        assert_eq!(
            (r.reason.as_str(), r.message.as_str()),
            (
                "SupplementalGroupsPolicyNotSupported",
                "SupplementalGroupsPolicy=Strict is not supported in this node"
            )
        );
        let merge = pod_with(
            PodSecurityContext {
                supplemental_groups_policy: Some("Merge".into()),
                ..Default::default()
            },
            |_| {},
        );
        assert_eq!(admit(&merge, &config), Ok(()));
        let userns = pod_with(PodSecurityContext::default(), |s| s.host_users = Some(false));
        assert!(admit(&userns, &config)
            .unwrap_err()
            .message
            .starts_with("spec.hostUsers: false"));
        let windows = pod_with(PodSecurityContext::default(), |s| {
            s.containers[0].security_context = Some(SecurityContext {
                windows_options: Some(WindowsSecurityContextOptions::default()),
                ..Default::default()
            });
        });
        let r = admit(&windows, &config).unwrap_err();
        assert_eq!(r.reason, UNSUPPORTED_SECURITY_CONTEXT);
        assert!(
            r.message
                .starts_with("spec.containers[0].securityContext.windowsOptions:"),
            "{}",
            r.message
        );
    }
}
