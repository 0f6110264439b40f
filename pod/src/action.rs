//! Probe and lifecycle-hook handlers as validated data: [`Action`] is what a probe or hook will
//! run, checked once with the field named in every error (kubelet: `pkg/apis/core/validation`
//! `validateHandler`, `validateProbe`). Running an action is the prober's job, not this crate's.

use k8s_openapi::api::core::v1::{
    Container, ExecAction, GRPCAction, HTTPGetAction, LifecycleHandler, Probe, SleepAction, TCPSocketAction,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::field::FieldError;

/// Stands for a gRPC probe port written as a name in a static manifest (the API type is an
/// integer): the manifest still loads and only the probe's container is refused.
pub const NON_NUMERIC_GRPC_PORT: i32 = i32::MIN;

/// A validated handler, ready to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// `httpGet`.
    Http {
        /// `http` or `https`.
        scheme: String,
        /// Host; none means the pod IP.
        host: Option<String>,
        /// Resolved port.
        port: u16,
        /// Path (with query).
        path: String,
        /// Extra headers, in order.
        headers: Vec<(String, String)>,
    },
    /// `tcpSocket`.
    Tcp {
        /// Host; none means the pod IP.
        host: Option<String>,
        /// Resolved port.
        port: u16,
    },
    /// `exec`.
    Exec {
        /// The command.
        command: Vec<String>,
    },
    /// `grpc`.
    Grpc {
        /// Port.
        port: u16,
        /// Service name (empty for the server's overall health).
        service: String,
    },
    /// `sleep` (hooks only).
    Sleep {
        /// How long.
        seconds: u64,
    },
}

impl Action {
    /// The handler's name, as the API spells it.
    pub fn name(&self) -> &'static str {
        match self {
            Action::Http { .. } => "httpGet",
            Action::Tcp { .. } => "tcpSocket",
            Action::Exec { .. } => "exec",
            Action::Grpc { .. } => "grpc",
            Action::Sleep { .. } => "sleep",
        }
    }
}

/// Resolve a port number or a container port name.
fn port(field: &str, port: &IntOrString, container: &Container) -> Result<u16, FieldError> {
    let number = match port {
        IntOrString::Int(n) => i64::from(*n),
        IntOrString::String(name) => match name.parse::<i64>() {
            Ok(n) => n,
            Err(_) => container
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(name.as_str()))
                .map(|p| i64::from(p.container_port))
                .ok_or_else(|| {
                    FieldError::invalid(
                        format!("{field}.port"),
                        format!("{name:?}: no container port with this name"),
                    )
                })?,
        },
    };
    u16::try_from(number).ok().filter(|p| *p > 0).ok_or_else(|| {
        FieldError::invalid(
            format!("{field}.port"),
            format!("{number}: must be between 1 and 65535"),
        )
    })
}

/// The one handler of a probe or hook; exactly one must be set.
#[allow(clippy::too_many_arguments)]
fn action(
    field: &str,
    container: &Container,
    exec: Option<&ExecAction>,
    http: Option<&HTTPGetAction>,
    tcp: Option<&TCPSocketAction>,
    grpc: Option<&GRPCAction>,
    sleep: Option<&SleepAction>,
) -> Result<Action, FieldError> {
    let set = [
        exec.is_some(),
        http.is_some(),
        tcp.is_some(),
        grpc.is_some(),
        sleep.is_some(),
    ];
    match set.iter().filter(|s| **s).count() {
        0 => return Err(FieldError::required(field, "must specify a handler type")),
        1 => {}
        _ => return Err(FieldError::forbidden(field, "may not specify more than 1 handler type")),
    }
    if let Some(e) = exec {
        let command = e.command.clone().unwrap_or_default();
        if command.is_empty() {
            return Err(FieldError::required(format!("{field}.exec.command"), ""));
        }
        return Ok(Action::Exec { command });
    }
    if let Some(h) = http {
        let scheme = h.scheme.as_deref().unwrap_or("HTTP").to_lowercase();
        if scheme != "http" && scheme != "https" {
            return Err(FieldError::unsupported(
                format!("{field}.httpGet.scheme"),
                format!("{:?}", h.scheme),
            ));
        }
        let path = h
            .path
            .clone()
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| "/".to_string());
        return Ok(Action::Http {
            scheme,
            host: h.host.clone().filter(|h| !h.is_empty()),
            port: port(&format!("{field}.httpGet"), &h.port, container)?,
            path: if path.starts_with('/') {
                path
            } else {
                format!("/{path}")
            },
            headers: h
                .http_headers
                .iter()
                .flatten()
                .map(|h| (h.name.clone(), h.value.clone()))
                .collect(),
        });
    }
    if let Some(t) = tcp {
        return Ok(Action::Tcp {
            host: t.host.clone().filter(|h| !h.is_empty()),
            port: port(&format!("{field}.tcpSocket"), &t.port, container)?,
        });
    }
    if let Some(g) = grpc {
        if g.port == NON_NUMERIC_GRPC_PORT {
            return Err(FieldError::invalid(
                format!("{field}.grpc.port"),
                "a port name: gRPC probes take a port number",
            ));
        }
        let port = u16::try_from(g.port).ok().filter(|p| *p > 0).ok_or_else(|| {
            FieldError::invalid(
                format!("{field}.grpc.port"),
                format!("{}: must be between 1 and 65535", g.port),
            )
        })?;
        return Ok(Action::Grpc {
            port,
            service: g.service.clone().unwrap_or_default(),
        });
    }
    let seconds = sleep.map_or(0, |s| s.seconds);
    if seconds < 0 {
        return Err(FieldError::invalid(
            format!("{field}.sleep.seconds"),
            format!("{seconds}: must be non-negative"),
        ));
    }
    Ok(Action::Sleep {
        seconds: seconds as u64,
    })
}

/// The action of a probe, validated with its numbers (the field names the probe, e.g.
/// `livenessProbe`).
pub fn probe_action(
    field: &str,
    probe: &Probe,
    container: &Container,
    must_be_one: bool,
) -> Result<Action, FieldError> {
    let positive = |name: &str, value: Option<i32>| match value {
        Some(v) if v < 1 => Err(FieldError::invalid(
            format!("{field}.{name}"),
            format!("{v}: must be greater than 0"),
        )),
        _ => Ok(()),
    };
    positive("periodSeconds", probe.period_seconds)?;
    positive("timeoutSeconds", probe.timeout_seconds)?;
    positive("successThreshold", probe.success_threshold)?;
    positive("failureThreshold", probe.failure_threshold)?;
    if probe.initial_delay_seconds.is_some_and(|d| d < 0) {
        return Err(FieldError::invalid(
            format!("{field}.initialDelaySeconds"),
            "must be non-negative",
        ));
    }
    if must_be_one && probe.success_threshold.is_some_and(|s| s != 1) {
        return Err(FieldError::invalid(format!("{field}.successThreshold"), "must be 1"));
    }
    action(
        field,
        container,
        probe.exec.as_ref(),
        probe.http_get.as_ref(),
        probe.tcp_socket.as_ref(),
        probe.grpc.as_ref(),
        None,
    )
}

/// The action of a lifecycle hook.
pub fn hook_action(field: &str, hook: &LifecycleHandler, container: &Container) -> Result<Action, FieldError> {
    action(
        field,
        container,
        hook.exec.as_ref(),
        hook.http_get.as_ref(),
        hook.tcp_socket.as_ref(),
        None,
        hook.sleep.as_ref(),
    )
}

/// Check every probe and hook of a container; the error names the field.
pub fn validate(container: &Container) -> Result<(), FieldError> {
    if let Some(p) = &container.liveness_probe {
        probe_action("livenessProbe", p, container, true)?;
    }
    if let Some(p) = &container.readiness_probe {
        probe_action("readinessProbe", p, container, false)?;
    }
    if let Some(p) = &container.startup_probe {
        probe_action("startupProbe", p, container, true)?;
    }
    if let Some(l) = &container.lifecycle {
        if let Some(h) = &l.post_start {
            hook_action("lifecycle.postStart", h, container)?;
        }
        if let Some(h) = &l.pre_stop {
            hook_action("lifecycle.preStop", h, container)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ContainerPort;

    fn container() -> Container {
        Container {
            name: "c".into(),
            ports: Some(vec![ContainerPort {
                name: Some("http".into()),
                container_port: 8080,
                ..Default::default()
            }]),
            ..Default::default()
        }
    }

    /// Named ports resolve against the container's ports; bad numbers and names, no handler or
    /// two handlers, and zero periods are refused with the field named.
    #[test]
    fn probes_are_validated_with_the_field_named() {
        let http = |port: IntOrString| Probe {
            http_get: Some(HTTPGetAction {
                port,
                ..Default::default()
            }),
            ..Default::default()
        };
        let c = container();
        let a = probe_action("livenessProbe", &http(IntOrString::String("http".into())), &c, true).unwrap();
        assert!(matches!(a, Action::Http { port: 8080, ref path, .. } if path == "/"));
        let err = probe_action("readinessProbe", &http(IntOrString::String("nope".into())), &c, false)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("readinessProbe.httpGet.port: Invalid value: \"nope\""),
            "{err}"
        );
        let err = probe_action("livenessProbe", &Probe::default(), &c, true)
            .unwrap_err()
            .to_string();
        assert_eq!(err, "livenessProbe: Required value: must specify a handler type");
        let mut both = http(IntOrString::Int(80));
        both.tcp_socket = Some(TCPSocketAction {
            port: IntOrString::Int(80),
            ..Default::default()
        });
        assert!(probe_action("livenessProbe", &both, &c, true)
            .unwrap_err()
            .to_string()
            .contains("more than 1 handler"));
        let mut zero = http(IntOrString::Int(80));
        zero.period_seconds = Some(0);
        assert!(probe_action("livenessProbe", &zero, &c, true)
            .unwrap_err()
            .to_string()
            .starts_with("livenessProbe.periodSeconds"));
        let grpc = Probe {
            grpc: Some(GRPCAction {
                port: 0,
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(probe_action("livenessProbe", &grpc, &c, true)
            .unwrap_err()
            .to_string()
            .starts_with("livenessProbe.grpc.port"));
    }
}
