//! `securityContext` (pod and container level, the container's value winning) → the
//! Docker-neutral security fields of a [`CreateSpec`], as kubelet's
//! `pkg/kubelet/kuberuntime/security_context*.go` and `pkg/securitycontext` compute them and
//! dockershim/cri-dockerd's `security_context.go` hand them to Docker. Pure: what needs the
//! image (its user) or the node (a Localhost seccomp profile's file) is read by the caller
//! beforehand and handed in through [`SecurityInput`].
//!
//! Pod-level settings that can never be honoured on this node (forbidden sysctls, AppArmor on a
//! host without it, user namespaces, Windows options, `supplementalGroupsPolicy: Strict`) are
//! refused once, at admission ([`crate::admission`]); what depends on the image or a file is
//! refused here, per container, as the container's `CreateContainerConfigError`.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use dockerlet_messages::ContainerId;
use k8s_openapi::api::core::v1::{
    AppArmorProfile, Container, Pod, PodSecurityContext, SELinuxOptions, SeccompProfile, SecurityContext,
};

use crate::container::CreateSpec;
use crate::spec::pod_identity;

/// Directory under `--root-dir` holding Localhost seccomp profiles (kubelet's
/// `<root-dir>/seccomp`).
pub const SECCOMP_DIR: &str = "seccomp";

/// Prefix of the per-container AppArmor annotation (deprecated upstream, still read by
/// kubelet for static pods): `container.apparmor.security.beta.kubernetes.io/<container>`.
pub const APPARMOR_ANNOTATION_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";

/// The node-wide security settings (kubelet flags and config fields).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecurityConfig {
    /// `--seccomp-default` (config `seccompDefault`): an unset seccomp profile means
    /// RuntimeDefault instead of Unconfined.
    pub seccomp_default: bool,
    /// `--allowed-unsafe-sysctls` (config `allowedUnsafeSysctls`): sysctls or patterns ending
    /// in `*` allowed beyond the safe set.
    pub allowed_unsafe_sysctls: Vec<String>,
    /// AppArmor is enabled on the host (`/sys/module/apparmor/parameters/enabled`).
    pub apparmor_enabled: bool,
}

/// Why a container's security context cannot be honoured (its `CreateContainerConfigError`).
/// The runAsNonRoot messages are kubelet's `verifyRunAsNonRoot`, word for word.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecurityError {
    /// runAsNonRoot with an explicit runAsUser of 0.
    #[error("container's runAsUser breaks non-root policy (pod: {pod:?}, container: {container})")]
    RunAsUserIsRoot {
        /// `name_namespace(uid)`.
        pod: String,
        /// The container's name.
        container: String,
    },
    /// runAsNonRoot, no runAsUser, and the image runs as uid 0 (or names no user).
    #[error("container has runAsNonRoot and image will run as root (pod: {pod:?}, container: {container})")]
    ImageRunsAsRoot {
        /// `name_namespace(uid)`.
        pod: String,
        /// The container's name.
        container: String,
    },
    /// runAsNonRoot, no runAsUser, and the image names its user by name.
    #[error(
        "container has runAsNonRoot and image has non-numeric user ({user}), cannot verify user is non-root (pod: {pod:?}, container: {container})"
    )]
    NonNumericImageUser {
        /// The image's user.
        user: String,
        /// `name_namespace(uid)`.
        pod: String,
        /// The container's name.
        container: String,
    },
    /// runAsNonRoot, no runAsUser, and the image's uid is out of range.
    #[error(
        "container has runAsNonRoot and image has an invalid user id ({uid}). (Must be 1-(2147483647)): must be between 0 and 2147483647, inclusive (pod: {pod:?}, container: {container})"
    )]
    InvalidImageUid {
        /// The image's uid.
        uid: i64,
        /// `name_namespace(uid)`.
        pod: String,
        /// The container's name.
        container: String,
    },
    /// A field dockerlet cannot honour, or a value it cannot use.
    #[error("{field}: {reason}")]
    Refused {
        /// The field, as a path (`securityContext.seccompProfile.localhostProfile`).
        field: String,
        /// Why.
        reason: String,
    },
}

fn refused(field: &str, reason: impl Into<String>) -> SecurityError {
    SecurityError::Refused {
        field: field.to_string(),
        reason: reason.into(),
    }
}

/// What a container's security translation needs beyond the pod spec.
#[derive(Debug, Clone)]
pub struct SecurityInput<'a> {
    /// The pod.
    pub pod: &'a Pod,
    /// The container.
    pub container: &'a Container,
    /// The sandbox (shareProcessNamespace joins its PID namespace).
    pub sandbox_id: &'a ContainerId,
    /// The image's `Config.User`, when [`needs_image_user`] said it is needed.
    pub image_user: Option<&'a str>,
    /// The Localhost seccomp profile's file content, when [`localhost_seccomp_profile`] named one.
    pub seccomp_profile: Option<&'a str>,
    /// Node settings.
    pub config: &'a SecurityConfig,
}

/// The effective security context of a container: kubelet's
/// `DetermineEffectiveSecurityContext` (container fields over pod fields).
#[derive(Debug, Clone, Default, PartialEq)]
struct Effective {
    run_as_user: Option<i64>,
    run_as_group: Option<i64>,
    run_as_non_root: Option<bool>,
    se_linux: Option<SELinuxOptions>,
    seccomp: Option<SeccompProfile>,
}

fn pod_sc(pod: &Pod) -> Option<&PodSecurityContext> {
    pod.spec.as_ref().and_then(|s| s.security_context.as_ref())
}

fn effective(pod: &Pod, container: &Container) -> Effective {
    let p = pod_sc(pod);
    let c = container.security_context.as_ref();
    Effective {
        run_as_user: c.and_then(|c| c.run_as_user).or(p.and_then(|p| p.run_as_user)),
        run_as_group: c.and_then(|c| c.run_as_group).or(p.and_then(|p| p.run_as_group)),
        run_as_non_root: c.and_then(|c| c.run_as_non_root).or(p.and_then(|p| p.run_as_non_root)),
        se_linux: c
            .and_then(|c| c.se_linux_options.clone())
            .or_else(|| p.and_then(|p| p.se_linux_options.clone())),
        seccomp: c
            .and_then(|c| c.seccomp_profile.clone())
            .or_else(|| p.and_then(|p| p.seccomp_profile.clone())),
    }
}

/// Does the translation need the image's user? Yes when runAsNonRoot must be checked against
/// it, or when a runAsGroup without a runAsUser completes the image's user.
pub fn needs_image_user(pod: &Pod, container: &Container) -> bool {
    let e = effective(pod, container);
    e.run_as_user.is_none() && (e.run_as_non_root == Some(true) || e.run_as_group.is_some())
}

/// The image's `Config.User` split as dockershim's `getUserFromImageUser` does: the part before
/// `:`; a number is a uid, anything else a user name; empty means root (kubelet's
/// `getImageUser`: "if none of them is set, treat it as root").
fn image_uid(user: &str) -> (Option<i64>, String) {
    let name = user.split(':').next().unwrap_or_default();
    if name.is_empty() {
        return (Some(0), String::new());
    }
    match name.parse::<i64>() {
        Ok(uid) => (Some(uid), String::new()),
        Err(_) => (None, name.to_string()),
    }
}

/// kubelet's `verifyRunAsNonRoot`.
fn verify_run_as_non_root(
    pod: &Pod,
    container: &Container,
    e: &Effective,
    image_user: &str,
) -> Result<(), SecurityError> {
    if e.run_as_non_root != Some(true) {
        return Ok(());
    }
    let crate::spec::PodIdentity { name, namespace, uid } = pod_identity(pod);
    let pod_name = format!("{name}_{namespace}({uid})");
    let container_name = container.name.clone();
    if let Some(user) = e.run_as_user {
        return if user == 0 {
            Err(SecurityError::RunAsUserIsRoot {
                pod: pod_name,
                container: container_name,
            })
        } else {
            Ok(())
        };
    }
    match image_uid(image_user) {
        (None, user) => Err(SecurityError::NonNumericImageUser {
            user,
            pod: pod_name,
            container: container_name,
        }),
        (Some(0), _) => Err(SecurityError::ImageRunsAsRoot {
            pod: pod_name,
            container: container_name,
        }),
        (Some(uid), _) if !(0..=i64::from(i32::MAX)).contains(&uid) => Err(SecurityError::InvalidImageUid {
            uid,
            pod: pod_name,
            container: container_name,
        }),
        _ => Ok(()),
    }
}

/// The name of the Localhost seccomp profile the container uses, if any (container over pod;
/// unset means Unconfined, or RuntimeDefault with `--seccomp-default`).
pub fn localhost_seccomp_profile(pod: &Pod, container: &Container) -> Result<Option<String>, SecurityError> {
    match effective(pod, container).seccomp {
        Some(p) if p.type_ == "Localhost" => match p.localhost_profile.filter(|l| !l.is_empty()) {
            Some(name) => Ok(Some(name)),
            None => Err(refused(
                "securityContext.seccompProfile.localhostProfile",
                "must be set when seccompProfile.type is Localhost",
            )),
        },
        _ => Ok(None),
    }
}

/// Where a Localhost seccomp profile lives: `<root-dir>/seccomp/<name>`; a name that is
/// absolute or climbs out of that directory is refused.
pub fn seccomp_profile_path(root_dir: &Path, name: &str) -> Result<PathBuf, SecurityError> {
    let relative = Path::new(name);
    let inside = relative
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if !inside || relative.as_os_str().is_empty() {
        return Err(refused(
            "securityContext.seccompProfile.localhostProfile",
            format!(
                "{name:?} must be a relative path inside {}",
                root_dir.join(SECCOMP_DIR).display()
            ),
        ));
    }
    Ok(root_dir.join(SECCOMP_DIR).join(relative))
}

/// The seccomp security option: none for RuntimeDefault (Docker's default profile),
/// `seccomp=unconfined`, or `seccomp=<profile JSON>` for Localhost (as dockershim's
/// `getSeccompDockerOpts`).
fn seccomp_opt(e: &Effective, input: &SecurityInput<'_>) -> Result<Option<String>, SecurityError> {
    let kind = match &e.seccomp {
        Some(p) => p.type_.as_str(),
        None if input.config.seccomp_default => "RuntimeDefault",
        None => "Unconfined",
    };
    match kind {
        "RuntimeDefault" => Ok(None),
        "Unconfined" => Ok(Some("seccomp=unconfined".to_string())),
        "Localhost" => {
            let name = localhost_seccomp_profile(input.pod, input.container)?.unwrap_or_default();
            let text = input.seccomp_profile.ok_or_else(|| {
                refused(
                    "securityContext.seccompProfile.localhostProfile",
                    format!("seccomp profile {name:?} was not read"),
                )
            })?;
            let json: serde_json::Value = serde_json::from_str(text).map_err(|err| {
                refused(
                    "securityContext.seccompProfile.localhostProfile",
                    format!("seccomp profile {name:?} is not valid JSON: {err}"),
                )
            })?;
            Ok(Some(format!("seccomp={json}")))
        }
        other => Err(refused(
            "securityContext.seccompProfile.type",
            format!("unsupported value {other:?}: expected RuntimeDefault, Unconfined or Localhost"),
        )),
    }
}

/// kubelet's `apparmor.GetProfile`: the container's field, then its annotation, then the pod's
/// field.
pub fn apparmor_profile(pod: &Pod, container: &Container) -> Result<Option<AppArmorProfile>, SecurityError> {
    if let Some(p) = container
        .security_context
        .as_ref()
        .and_then(|c| c.app_armor_profile.clone())
    {
        return Ok(Some(p));
    }
    let key = format!("{APPARMOR_ANNOTATION_PREFIX}{}", container.name);
    if let Some(value) = pod.metadata.annotations.as_ref().and_then(|a| a.get(&key)) {
        let profile = |type_: &str, localhost: Option<&str>| AppArmorProfile {
            type_: type_.to_string(),
            localhost_profile: localhost.map(str::to_string),
        };
        return match value.as_str() {
            "runtime/default" => Ok(Some(profile("RuntimeDefault", None))),
            "unconfined" => Ok(Some(profile("Unconfined", None))),
            other => match other.strip_prefix("localhost/") {
                Some(name) => Ok(Some(profile("Localhost", Some(name)))),
                None => Err(refused(
                    &format!("metadata.annotations[{key}]"),
                    format!(
                        "invalid AppArmor profile {other:?}: expected runtime/default, unconfined or localhost/<name>"
                    ),
                )),
            },
        };
    }
    Ok(pod_sc(pod).and_then(|p| p.app_armor_profile.clone()))
}

/// The AppArmor security option (dockershim's `getAppArmorOpts`): none for RuntimeDefault
/// (Docker applies its default profile), `apparmor=unconfined`, or `apparmor=<name>`. Without
/// AppArmor on the host, Unconfined is what every container gets anyway (admission refused the
/// other profiles).
fn apparmor_opt(input: &SecurityInput<'_>) -> Result<Option<String>, SecurityError> {
    let Some(profile) = apparmor_profile(input.pod, input.container)? else {
        return Ok(None);
    };
    match profile.type_.as_str() {
        "RuntimeDefault" => Ok(None),
        "Unconfined" if !input.config.apparmor_enabled => Ok(None),
        "Unconfined" => Ok(Some("apparmor=unconfined".to_string())),
        "Localhost" => match profile.localhost_profile.filter(|l| !l.is_empty()) {
            Some(name) => Ok(Some(format!("apparmor={name}"))),
            None => Err(refused(
                "securityContext.appArmorProfile.localhostProfile",
                "must be set when appArmorProfile.type is Localhost",
            )),
        },
        other => Err(refused(
            "securityContext.appArmorProfile.type",
            format!("unsupported value {other:?}: expected RuntimeDefault, Unconfined or Localhost"),
        )),
    }
}

/// SELinux labels as dockershim's `getSELinuxSecurityOpts` gives them (`label=user:…`,
/// `role:`, `type:`, `level:`).
fn selinux_opts(options: &SELinuxOptions) -> Vec<String> {
    [
        ("user", &options.user),
        ("role", &options.role),
        ("type", &options.type_),
        ("level", &options.level),
    ]
    .into_iter()
    .filter_map(|(key, value)| {
        value
            .as_deref()
            .filter(|v| !v.is_empty())
            .map(|v| format!("label={key}:{v}"))
    })
    .collect()
}

/// A capability as Docker names it: upper case with `CAP_`, `ALL` as is.
fn capability(name: &str) -> String {
    let upper = name.to_ascii_uppercase();
    if upper == "ALL" || upper.starts_with("CAP_") {
        upper
    } else {
        format!("CAP_{upper}")
    }
}

/// Docker's `User` for the effective runAsUser and runAsGroup (dockershim's
/// `modifyContainerConfig`); a runAsGroup alone completes the image's user.
fn user(e: &Effective, image_user: Option<&str>) -> Option<String> {
    let user = match (e.run_as_user, e.run_as_group) {
        (Some(uid), _) => uid.to_string(),
        (None, Some(_)) => {
            let name = image_user.unwrap_or_default().split(':').next().unwrap_or_default();
            if name.is_empty() {
                "0".to_string()
            } else {
                name.to_string()
            }
        }
        (None, None) => return None,
    };
    Some(match e.run_as_group {
        Some(gid) => format!("{user}:{gid}"),
        None => user,
    })
}

/// Fill the security fields of an app or init container's spec.
pub fn apply_container(spec: &mut CreateSpec, input: &SecurityInput<'_>) -> Result<(), SecurityError> {
    let pod = input.pod;
    let container = input.container;
    let e = effective(pod, container);
    let sc: SecurityContext = container.security_context.clone().unwrap_or_default();
    let pod_spec = pod.spec.as_ref();

    if needs_image_user(pod, container) && input.image_user.is_none() {
        return Err(refused("securityContext", "the image's user was not inspected"));
    }
    verify_run_as_non_root(pod, container, &e, input.image_user.unwrap_or_default())?;
    spec.user = user(&e, input.image_user);

    let p = pod_sc(pod);
    spec.group_add = p
        .and_then(|p| p.fs_group)
        .into_iter()
        .chain(p.and_then(|p| p.supplemental_groups.clone()).into_iter().flatten())
        .map(|g| g.to_string())
        .collect();

    let privileged = sc.privileged.unwrap_or(false);
    let caps = sc.capabilities.clone().unwrap_or_default();
    spec.cap_add = caps.add.iter().flatten().map(|c| capability(c)).collect();
    spec.cap_drop = caps.drop.iter().flatten().map(|c| capability(c)).collect();
    if sc.allow_privilege_escalation == Some(false) {
        if privileged {
            return Err(refused(
                "securityContext.allowPrivilegeEscalation",
                "cannot set allowPrivilegeEscalation to false and privileged to true",
            ));
        }
        if spec.cap_add.iter().any(|c| c == "CAP_SYS_ADMIN") {
            return Err(refused(
                "securityContext.allowPrivilegeEscalation",
                "cannot set allowPrivilegeEscalation to false and capabilities.add CAP_SYS_ADMIN",
            ));
        }
    }
    spec.privileged = privileged;
    spec.read_only_rootfs = sc.read_only_root_filesystem.unwrap_or(false);

    let mut opts = Vec::new();
    if let Some(options) = &e.se_linux {
        opts.extend(selinux_opts(options));
    }
    opts.extend(apparmor_opt(input)?);
    opts.extend(seccomp_opt(&e, input)?);
    // kubelet's AddNoNewPrivileges: only an explicit false sets no_new_privs.
    if sc.allow_privilege_escalation == Some(false) {
        opts.push("no-new-privileges".to_string());
    }
    spec.security_opt = opts;

    match sc.proc_mount.as_deref() {
        None | Some("Default") => {}
        // Docker masks and write-protects its default paths unless given empty lists.
        Some("Unmasked") => {
            spec.masked_paths = Some(Vec::new());
            spec.readonly_paths = Some(Vec::new());
        }
        Some(other) => {
            return Err(refused(
                "securityContext.procMount",
                format!("unsupported value {other:?}: expected Default or Unmasked"),
            ))
        }
    }

    spec.pid_mode = if pod_spec.and_then(|s| s.host_pid) == Some(true) {
        Some("host".to_string())
    } else if pod_spec.and_then(|s| s.share_process_namespace) == Some(true) {
        Some(format!("container:{}", input.sandbox_id))
    } else {
        None
    };
    Ok(())
}

/// A sysctl name with `/` separators in kubelet's dotted form (`NormalizeName`): when the first
/// separator is `/`, dots and slashes swap (`net/ipv4/conf/eno2.100/rp_filter` →
/// `net.ipv4.conf.eno2/100.rp_filter`).
pub fn normalize_sysctl(name: &str) -> String {
    match name.find(['.', '/']) {
        Some(i) if name.as_bytes()[i] == b'/' => name
            .chars()
            .map(|c| match c {
                '.' => '/',
                '/' => '.',
                c => c,
            })
            .collect(),
        _ => name.to_string(),
    }
}

/// Fill the sandbox's security fields as kubelet's sandbox config and dockershim's
/// `applySandboxSecurityContext` do: the pod-level runAsUser (with its runAsGroup), fsGroup and
/// supplementalGroups, `no-new-privileges` with Docker's default seccomp profile, the pod's
/// sysctls (the sandbox owns the network and IPC namespaces its containers join; admission
/// checked them) and the host PID namespace. It is never privileged: the pause process needs
/// nothing, and a privileged container asks for itself.
pub fn apply_sandbox(spec: &mut CreateSpec, pod: &Pod) {
    let p = pod_sc(pod);
    spec.user = p
        .and_then(|p| p.run_as_user)
        .map(|uid| match p.and_then(|p| p.run_as_group) {
            Some(gid) => format!("{uid}:{gid}"),
            None => uid.to_string(),
        });
    spec.group_add = p
        .and_then(|p| p.fs_group)
        .into_iter()
        .chain(p.and_then(|p| p.supplemental_groups.clone()).into_iter().flatten())
        .map(|g| g.to_string())
        .collect();
    spec.security_opt = vec!["no-new-privileges".to_string()];
    spec.sysctls = pod_sc(pod)
        .and_then(|p| p.sysctls.as_ref())
        .into_iter()
        .flatten()
        .map(|s| (normalize_sysctl(&s.name), s.value.clone()))
        .collect::<BTreeMap<_, _>>();
    if pod.spec.as_ref().and_then(|s| s.host_pid) == Some(true) {
        spec.pid_mode = Some("host".to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Capabilities, PodSpec, Sysctl};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod(pod_sc: Option<PodSecurityContext>, sc: Option<SecurityContext>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                uid: Some("u1".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                security_context: pod_sc,
                containers: vec![Container {
                    name: "c".into(),
                    image: Some("img".into()),
                    security_context: sc,
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: None,
        }
    }

    fn run(pod: &Pod, image_user: Option<&str>, config: &SecurityConfig) -> Result<CreateSpec, SecurityError> {
        run_with(pod, image_user, None, config)
    }

    fn run_with(
        pod: &Pod,
        image_user: Option<&str>,
        seccomp: Option<&str>,
        config: &SecurityConfig,
    ) -> Result<CreateSpec, SecurityError> {
        let sandbox = ContainerId("sb".into());
        let container = &pod.spec.as_ref().unwrap().containers[0];
        let mut spec = CreateSpec::default();
        apply_container(
            &mut spec,
            &SecurityInput {
                pod,
                container,
                sandbox_id: &sandbox,
                image_user,
                seccomp_profile: seccomp,
                config,
            },
        )?;
        Ok(spec)
    }

    fn seccomp(type_: &str, localhost: Option<&str>) -> Option<SeccompProfile> {
        Some(SeccompProfile {
            type_: type_.into(),
            localhost_profile: localhost.map(str::to_string),
        })
    }

    /// Users and groups: container over pod, runAsGroup completing the image's user, fsGroup
    /// then supplementalGroups added; nothing set leaves the image's user.
    #[test]
    fn users_and_groups_follow_kubelet() {
        let config = SecurityConfig::default();
        /// Pod and container contexts, the image's user, the Docker user wanted.
        type Case<'a> = (
            Option<PodSecurityContext>,
            Option<SecurityContext>,
            Option<&'a str>,
            Option<&'a str>,
        );
        let table: Vec<Case> = vec![
            (None, None, None, None),
            (
                Some(PodSecurityContext {
                    run_as_user: Some(1001),
                    run_as_group: Some(2002),
                    ..Default::default()
                }),
                None,
                None,
                Some("1001:2002"),
            ),
            (
                Some(PodSecurityContext {
                    run_as_user: Some(5),
                    ..Default::default()
                }),
                Some(SecurityContext {
                    run_as_user: Some(1001),
                    run_as_group: Some(2002),
                    ..Default::default()
                }),
                None,
                Some("1001:2002"),
            ),
            (
                Some(PodSecurityContext {
                    run_as_user: Some(65534),
                    ..Default::default()
                }),
                None,
                None,
                Some("65534"),
            ),
            (
                None,
                Some(SecurityContext {
                    run_as_group: Some(7),
                    ..Default::default()
                }),
                Some("app:staff"),
                Some("app:7"),
            ),
            (
                None,
                Some(SecurityContext {
                    run_as_group: Some(7),
                    ..Default::default()
                }),
                Some(""),
                Some("0:7"),
            ),
        ];
        for (psc, sc, image_user, want) in table {
            let p = pod(psc.clone(), sc.clone());
            let spec = run(&p, image_user, &config).unwrap();
            assert_eq!(spec.user.as_deref(), want, "{psc:?} {sc:?}");
        }
        let p = pod(
            Some(PodSecurityContext {
                fs_group: Some(3000),
                supplemental_groups: Some(vec![4000, 4001]),
                ..Default::default()
            }),
            None,
        );
        assert_eq!(run(&p, None, &config).unwrap().group_add, vec!["3000", "4000", "4001"]);
    }

    /// runAsNonRoot is checked against runAsUser, else the image's user, with kubelet's messages.
    #[test]
    fn run_as_non_root_refusals_use_kubelets_messages() {
        let config = SecurityConfig::default();
        let non_root = |user: Option<i64>| {
            pod(
                Some(PodSecurityContext {
                    run_as_non_root: Some(true),
                    ..Default::default()
                }),
                Some(SecurityContext {
                    run_as_user: user,
                    ..Default::default()
                }),
            )
        };
        assert!(needs_image_user(
            &non_root(None),
            &non_root(None).spec.unwrap().containers[0]
        ));
        assert!(!needs_image_user(
            &non_root(Some(1)),
            &non_root(Some(1)).spec.unwrap().containers[0]
        ));
        assert_eq!(
            run(&non_root(Some(1000)), None, &config).unwrap().user.as_deref(),
            Some("1000")
        );
        assert!(run(&non_root(None), Some("1234"), &config).is_ok());
        let cases = [
            (
                non_root(Some(0)),
                None,
                r#"container's runAsUser breaks non-root policy (pod: "p_ns(u1)", container: c)"#,
            ),
            (
                non_root(None),
                Some(""),
                r#"container has runAsNonRoot and image will run as root (pod: "p_ns(u1)", container: c)"#,
            ),
            (
                non_root(None),
                Some("0:0"),
                r#"container has runAsNonRoot and image will run as root (pod: "p_ns(u1)", container: c)"#,
            ),
            (
                non_root(None),
                Some("nobody"),
                r#"container has runAsNonRoot and image has non-numeric user (nobody), cannot verify user is non-root (pod: "p_ns(u1)", container: c)"#,
            ),
        ];
        for (p, image_user, message) in cases {
            assert_eq!(run(&p, image_user, &config).unwrap_err().to_string(), message);
        }
        assert!(
            run(&non_root(None), None, &config).is_err(),
            "the image user must be handed in"
        );
    }

    /// Privileged, capabilities (with and without CAP_, ALL), read-only rootfs, no_new_privs and
    /// its conflicts, procMount.
    #[test]
    fn container_only_fields_map_to_docker() {
        let config = SecurityConfig::default();
        let p = pod(
            None,
            Some(SecurityContext {
                capabilities: Some(Capabilities {
                    add: Some(vec!["net_admin".into(), "CAP_SYS_TIME".into()]),
                    drop: Some(vec!["ALL".into()]),
                }),
                read_only_root_filesystem: Some(true),
                allow_privilege_escalation: Some(false),
                proc_mount: Some("Unmasked".into()),
                ..Default::default()
            }),
        );
        let spec = run(&p, None, &config).unwrap();
        assert_eq!(spec.cap_add, vec!["CAP_NET_ADMIN", "CAP_SYS_TIME"]);
        assert_eq!(spec.cap_drop, vec!["ALL"]);
        assert!(spec.read_only_rootfs);
        assert!(!spec.privileged);
        assert_eq!(spec.security_opt, vec!["seccomp=unconfined", "no-new-privileges"]);
        assert_eq!(spec.masked_paths, Some(vec![]));
        assert_eq!(spec.readonly_paths, Some(vec![]));

        let unset = run(&pod(None, None), None, &config).unwrap();
        assert_eq!(
            unset.masked_paths, None,
            "Default procMount keeps Docker's masked paths"
        );
        assert!(!unset.security_opt.contains(&"no-new-privileges".to_string()));

        let refusals = [
            (
                SecurityContext {
                    privileged: Some(true),
                    allow_privilege_escalation: Some(false),
                    ..Default::default()
                },
                "securityContext.allowPrivilegeEscalation: cannot set allowPrivilegeEscalation to false and privileged to true",
            ),
            (
                SecurityContext {
                    capabilities: Some(Capabilities {
                        add: Some(vec!["SYS_ADMIN".into()]),
                        drop: None,
                    }),
                    allow_privilege_escalation: Some(false),
                    ..Default::default()
                },
                "securityContext.allowPrivilegeEscalation: cannot set allowPrivilegeEscalation to false and capabilities.add CAP_SYS_ADMIN",
            ),
            (
                SecurityContext {
                    proc_mount: Some("Weird".into()),
                    ..Default::default()
                },
                "securityContext.procMount: unsupported value \"Weird\": expected Default or Unmasked",
            ),
        ];
        for (sc, message) in refusals {
            assert_eq!(
                run(&pod(None, Some(sc)), None, &config).unwrap_err().to_string(),
                message
            );
        }
        let privileged = SecurityContext {
            privileged: Some(true),
            ..Default::default()
        };
        assert!(run(&pod(None, Some(privileged)), None, &config).unwrap().privileged);
    }

    /// Seccomp: unset is Unconfined unless --seccomp-default; container over pod; Localhost is
    /// the profile's JSON; a bad name or profile is refused naming the field.
    #[test]
    fn seccomp_profiles_follow_kubelet() {
        let off = SecurityConfig::default();
        let on = SecurityConfig {
            seccomp_default: true,
            ..Default::default()
        };
        let with = |pod_profile: Option<SeccompProfile>, c: Option<SeccompProfile>| {
            pod(
                Some(PodSecurityContext {
                    seccomp_profile: pod_profile,
                    ..Default::default()
                }),
                Some(SecurityContext {
                    seccomp_profile: c,
                    ..Default::default()
                }),
            )
        };
        let opts = |p: &Pod, config: &SecurityConfig, file: Option<&str>| {
            run_with(p, None, file, config).map(|s| s.security_opt)
        };
        assert_eq!(opts(&with(None, None), &off, None).unwrap(), vec!["seccomp=unconfined"]);
        assert!(opts(&with(None, None), &on, None).unwrap().is_empty());
        let runtime_default = with(seccomp("Unconfined", None), seccomp("RuntimeDefault", None));
        assert!(opts(&runtime_default, &off, None).unwrap().is_empty());
        let unconfined = with(seccomp("RuntimeDefault", None), seccomp("Unconfined", None));
        assert_eq!(opts(&unconfined, &on, None).unwrap(), vec!["seccomp=unconfined"]);

        let local = with(seccomp("Localhost", Some("profiles/audit.json")), None);
        let c = &local.spec.as_ref().unwrap().containers[0];
        assert_eq!(
            localhost_seccomp_profile(&local, c).unwrap().as_deref(),
            Some("profiles/audit.json")
        );
        assert_eq!(
            opts(&local, &off, Some("{ \"defaultAction\": \"SCMP_ACT_LOG\" }\n")).unwrap(),
            vec![r#"seccomp={"defaultAction":"SCMP_ACT_LOG"}"#]
        );
        assert!(opts(&local, &off, Some("{nope"))
            .unwrap_err()
            .to_string()
            .starts_with("securityContext.seccompProfile.localhostProfile: seccomp profile \"profiles/audit.json\" is not valid JSON"));
        let root = Path::new("/var/lib/dockerlet");
        assert_eq!(
            seccomp_profile_path(root, "profiles/audit.json").unwrap(),
            Path::new("/var/lib/dockerlet/seccomp/profiles/audit.json")
        );
        for bad in ["../etc/passwd", "/etc/passwd", "a/../../b", ""] {
            assert!(seccomp_profile_path(root, bad).is_err(), "{bad}");
        }
        let nameless = with(None, seccomp("Localhost", None));
        assert!(opts(&nameless, &off, None)
            .unwrap_err()
            .to_string()
            .contains("localhostProfile"));
        let unknown = with(None, seccomp("Fancy", None));
        assert_eq!(
            opts(&unknown, &off, None).unwrap_err().to_string(),
            "securityContext.seccompProfile.type: unsupported value \"Fancy\": expected RuntimeDefault, Unconfined or Localhost"
        );
    }

    /// AppArmor: field over annotation over pod field; Docker's default for RuntimeDefault.
    #[test]
    fn apparmor_profiles_follow_kubelet() {
        let enabled = SecurityConfig {
            apparmor_enabled: true,
            seccomp_default: true,
            ..Default::default()
        };
        let mut p = pod(
            Some(PodSecurityContext {
                app_armor_profile: Some(AppArmorProfile {
                    type_: "Localhost".into(),
                    localhost_profile: Some("pod-profile".into()),
                }),
                ..Default::default()
            }),
            None,
        );
        assert_eq!(
            run(&p, None, &enabled).unwrap().security_opt,
            vec!["apparmor=pod-profile"]
        );
        p.metadata.annotations = Some(BTreeMap::from([(
            format!("{APPARMOR_ANNOTATION_PREFIX}c"),
            "unconfined".to_string(),
        )]));
        assert_eq!(
            run(&p, None, &enabled).unwrap().security_opt,
            vec!["apparmor=unconfined"]
        );
        let disabled = SecurityConfig {
            seccomp_default: true,
            ..Default::default()
        };
        assert!(run(&p, None, &disabled).unwrap().security_opt.is_empty());
        p.spec.as_mut().unwrap().containers[0].security_context = Some(SecurityContext {
            app_armor_profile: Some(AppArmorProfile {
                type_: "RuntimeDefault".into(),
                localhost_profile: None,
            }),
            ..Default::default()
        });
        assert!(run(&p, None, &enabled).unwrap().security_opt.is_empty());
        p.spec.as_mut().unwrap().containers[0].security_context = None;
        p.metadata.annotations = Some(BTreeMap::from([(
            format!("{APPARMOR_ANNOTATION_PREFIX}c"),
            "bogus".to_string(),
        )]));
        assert!(run(&p, None, &enabled).unwrap_err().to_string().starts_with(
            "metadata.annotations[container.apparmor.security.beta.kubernetes.io/c]: invalid AppArmor profile"
        ));
    }

    /// The sandbox runs as the pod-level user with the pod's groups.
    #[test]
    fn the_sandbox_takes_the_pod_level_user_and_groups() {
        let p = pod(
            Some(PodSecurityContext {
                run_as_user: Some(1001),
                run_as_group: Some(2002),
                fs_group: Some(3000),
                supplemental_groups: Some(vec![4000]),
                ..Default::default()
            }),
            Some(SecurityContext {
                run_as_user: Some(7),
                privileged: Some(true),
                ..Default::default()
            }),
        );
        let mut sandbox = CreateSpec::default();
        apply_sandbox(&mut sandbox, &p);
        assert_eq!(sandbox.user.as_deref(), Some("1001:2002"));
        assert_eq!(sandbox.group_add, vec!["3000", "4000"]);
        assert!(!sandbox.privileged);
    }

    /// SELinux options become Docker `label=` options.
    #[test]
    fn selinux_options_become_labels() {
        let p = pod(
            Some(PodSecurityContext {
                se_linux_options: Some(SELinuxOptions {
                    level: Some("s0:c123,c456".into()),
                    type_: Some("spc_t".into()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            None,
        );
        let config = SecurityConfig {
            seccomp_default: true,
            ..Default::default()
        };
        assert_eq!(
            run(&p, None, &config).unwrap().security_opt,
            vec!["label=type:spc_t", "label=level:s0:c123,c456"]
        );
    }

    /// hostPID gives every container (and the sandbox) the host's PID namespace;
    /// shareProcessNamespace joins the sandbox's; sysctls go to the sandbox, slashes converted.
    #[test]
    fn namespaces_and_sysctls() {
        let config = SecurityConfig::default();
        let mut p = pod(
            Some(PodSecurityContext {
                sysctls: Some(vec![
                    Sysctl {
                        name: "kernel/shm_rmid_forced".into(),
                        value: "1".into(),
                    },
                    Sysctl {
                        name: "net.ipv4.ip_local_port_range".into(),
                        value: "1024 65000".into(),
                    },
                ]),
                ..Default::default()
            }),
            None,
        );
        p.spec.as_mut().unwrap().share_process_namespace = Some(true);
        assert_eq!(
            run(&p, None, &config).unwrap().pid_mode.as_deref(),
            Some("container:sb")
        );
        let mut sandbox = CreateSpec::default();
        apply_sandbox(&mut sandbox, &p);
        assert_eq!(sandbox.pid_mode, None);
        assert_eq!(sandbox.user, None);
        assert_eq!(sandbox.security_opt, vec!["no-new-privileges"]);
        assert_eq!(
            sandbox.sysctls,
            BTreeMap::from([
                ("kernel.shm_rmid_forced".to_string(), "1".to_string()),
                ("net.ipv4.ip_local_port_range".to_string(), "1024 65000".to_string()),
            ])
        );
        p.spec.as_mut().unwrap().host_pid = Some(true);
        assert_eq!(run(&p, None, &config).unwrap().pid_mode.as_deref(), Some("host"));
        apply_sandbox(&mut sandbox, &p);
        assert_eq!(sandbox.pid_mode.as_deref(), Some("host"));
        assert_eq!(
            normalize_sysctl("net/ipv4/conf/eno2.100/rp_filter"),
            "net.ipv4.conf.eno2/100.rp_filter"
        );
        assert_eq!(
            normalize_sysctl("net.ipv4.conf.eno2/100.rp_filter"),
            "net.ipv4.conf.eno2/100.rp_filter"
        );
    }
}
