//! The kubelet API slice: `--address:--port`, TLS, authentication and authorization, the
//! streaming idle timeout and the debugging routes, flags over the file (`tlsCertFile`,
//! `authentication`, `authorization`, `enableServer`, …).

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use dockerlet_http::kubelet_api::auth::AuthorizationMode;
use dockerlet_http::kubelet_api::tls::{TlsError, TlsSettings};
use dockerlet_http::kubelet_api::DebugRoutes;

use super::file::{FileAuthentication, FileSettings};
use super::{invalid, values, ConfigError};
use crate::cli::Cli;

/// The kubelet API's address, TLS and auth settings.
#[derive(Debug, Clone, PartialEq)]
pub struct KubeletApiConfig {
    /// `--address:--port`.
    pub address: SocketAddr,
    /// Certificates, versions, cipher suites, client CA.
    pub tls: TlsSettings,
    /// `--anonymous-auth`.
    pub anonymous: bool,
    /// `--authentication-token-webhook`: bearer tokens through TokenReview, verdicts kept for
    /// this long (`--authentication-token-webhook-cache-ttl`); none when off.
    pub token_webhook: Option<Duration>,
    /// `--authorization-mode`.
    pub authorization: AuthorizationMode,
    /// `--streaming-connection-idle-timeout`; none for no limit (0).
    pub stream_idle_timeout: Option<Duration>,
    /// `enableDebuggingHandlers`, `enableSystemLogHandler`, `enableProfilingHandler`,
    /// `enableDebugFlagsHandler`: which debugging routes are served or answered 405.
    pub debug_routes: DebugRoutes,
}

/// kubelet's `--streaming-connection-idle-timeout` default.
pub const STREAMING_CONNECTION_IDLE_TIMEOUT: Duration = Duration::from_secs(4 * 3600);

/// The kubelet API's settings, flags over the file; none with port 0 or `enableServer: false`.
/// The TokenReview and SubjectAccessReview webhooks are on by default with an API server
/// (KubeletConfiguration v1beta1's defaults) and refused, naming the setting, without one;
/// without an API server and no mode asked for, every request is forbidden.
pub(super) fn resolve(
    cli: &Cli,
    file: &FileSettings,
    address: SocketAddr,
    node_name: &str,
    root_dir: &Path,
) -> Result<Option<KubeletApiConfig>, ConfigError> {
    // `enableServer: false` turns the kubelet API server off, as `--port 0` does here.
    if address.port() == 0 || cli.enable_server.or(file.enable_server) == Some(false) {
        return Ok(None);
    }
    let has_api_server = cli.kubeconfig.is_some() || cli.in_cluster;
    let authn = file.authentication.as_ref();
    let token_webhook = token_webhook(cli, authn, has_api_server)?;
    let authorization = authorization(cli, file, has_api_server)?;
    let tls = tls(cli, file, authn, node_name, root_dir)?;
    Ok(Some(KubeletApiConfig {
        address,
        tls,
        anonymous: cli
            .anonymous_auth
            .or_else(|| authn.and_then(|a| a.anonymous.as_ref()).and_then(|a| a.enabled))
            .unwrap_or(false),
        token_webhook,
        authorization,
        stream_idle_timeout: Some(
            cli.streaming_connection_idle_timeout
                .or(file.streaming_connection_idle_timeout)
                .unwrap_or(STREAMING_CONNECTION_IDLE_TIMEOUT),
        )
        .filter(|t| !t.is_zero()),
        debug_routes: DebugRoutes {
            debugging: cli
                .enable_debugging_handlers
                .or(file.enable_debugging_handlers)
                .unwrap_or(true),
            system_log: file.enable_system_log_handler.unwrap_or(true),
            profiling: file.enable_profiling_handler.unwrap_or(true),
            debug_flags: file.enable_debug_flags_handler.unwrap_or(true),
        },
    }))
}

/// A webhook cache TTL from the file; a zero TTL means kubelet's default (its defaulting
/// replaces zero durations), as does none.
fn file_ttl(setting: &str, text: Option<&String>) -> Result<Option<Duration>, ConfigError> {
    let ttl = text.map(|t| values::parse_duration(setting, t).map_err(|e| invalid(setting, e.to_string())));
    Ok(ttl.transpose()?.filter(|t| !t.is_zero()))
}

/// A TTL flag over its file key over kubelet's default.
fn ttl(flag: Option<Duration>, key: &str, text: Option<&String>, default: Duration) -> Result<Duration, ConfigError> {
    match flag {
        Some(ttl) => Ok(ttl),
        None => Ok(file_ttl(key, text)?.unwrap_or(default)),
    }
}

/// `--authentication-token-webhook` (`authentication.webhook`): on by default with an API
/// server, refused without one; with its cache TTL (2 m by default). None when off.
fn token_webhook(
    cli: &Cli,
    authn: Option<&FileAuthentication>,
    has_api_server: bool,
) -> Result<Option<Duration>, ConfigError> {
    let file_webhook = authn.and_then(|a| a.webhook.as_ref());
    let enabled = match cli
        .authentication_token_webhook
        .or_else(|| file_webhook.and_then(|w| w.enabled))
    {
        Some(true) if !has_api_server => {
            return Err(invalid(
                "--authentication-token-webhook",
                "bearer token authentication (TokenReview) needs an API server (--kubeconfig); use client certificates (--client-ca-file)".into(),
            ))
        }
        Some(enabled) => enabled,
        None => has_api_server,
    };
    let ttl = ttl(
        cli.authentication_token_webhook_cache_ttl,
        "authentication.webhook.cacheTTL",
        file_webhook.and_then(|w| w.cache_ttl.as_ref()),
        Duration::from_secs(120),
    )?;
    Ok(enabled.then_some(ttl))
}

/// `--authorization-mode` (`authorization.mode`): Webhook by default with an API server
/// (its TTLs 5 m and 30 s), refused without one; AlwaysDeny with neither (said once).
fn authorization(cli: &Cli, file: &FileSettings, has_api_server: bool) -> Result<AuthorizationMode, ConfigError> {
    let authz = file.authorization.as_ref();
    let file_webhook = authz.and_then(|a| a.webhook.as_ref());
    let authorized_ttl = ttl(
        cli.authorization_webhook_cache_authorized_ttl,
        "authorization.webhook.cacheAuthorizedTTL",
        file_webhook.and_then(|w| w.cache_authorized_ttl.as_ref()),
        Duration::from_secs(300),
    )?;
    let unauthorized_ttl = ttl(
        cli.authorization_webhook_cache_unauthorized_ttl,
        "authorization.webhook.cacheUnauthorizedTTL",
        file_webhook.and_then(|w| w.cache_unauthorized_ttl.as_ref()),
        Duration::from_secs(30),
    )?;
    let webhook = AuthorizationMode::Webhook {
        authorized_ttl,
        unauthorized_ttl,
    };
    let mode = cli
        .authorization_mode
        .clone()
        .or_else(|| authz.and_then(|a| a.mode.clone()));
    match mode.as_deref() {
        None | Some("") if has_api_server => Ok(webhook),
        None | Some("") => {
            tracing::warn!("no --authorization-mode and no API server: every kubelet API request is forbidden (403); set --authorization-mode=AlwaysAllow to allow authenticated callers");
            Ok(AuthorizationMode::AlwaysDeny)
        }
        Some("AlwaysAllow") => Ok(AuthorizationMode::AlwaysAllow),
        Some("Webhook") if has_api_server => Ok(webhook),
        Some("Webhook") => Err(invalid(
            "--authorization-mode",
            "Webhook (SubjectAccessReview) needs an API server (--kubeconfig); use AlwaysAllow".into(),
        )),
        Some(other) => Err(invalid(
            "--authorization-mode",
            format!("{other:?}: expected Webhook or AlwaysAllow"),
        )),
    }
}

/// The serving certificate (both files or neither; else self-signed under `--cert-dir`), the
/// client CA, versions and cipher suites; bad names refused now, naming the flag, rather than
/// when the server starts.
fn tls(
    cli: &Cli,
    file: &FileSettings,
    authn: Option<&FileAuthentication>,
    node_name: &str,
    root_dir: &Path,
) -> Result<TlsSettings, ConfigError> {
    let cert_and_key = match (
        cli.tls_cert_file.clone().or_else(|| file.tls_cert_file.clone()),
        cli.tls_private_key_file
            .clone()
            .or_else(|| file.tls_private_key_file.clone()),
    ) {
        (Some(cert), Some(key)) => Some((cert, key)),
        (None, None) => None,
        (Some(_), None) => {
            return Err(invalid(
                "--tls-private-key-file",
                "required with --tls-cert-file".into(),
            ))
        }
        (None, Some(_)) => {
            return Err(invalid(
                "--tls-cert-file",
                "required with --tls-private-key-file".into(),
            ))
        }
    };
    let cipher_suites = if cli.tls_cipher_suites.iter().any(|s| !s.is_empty()) {
        cli.tls_cipher_suites.clone()
    } else {
        file.tls_cipher_suites.clone().unwrap_or_default()
    };
    let tls = TlsSettings {
        cert_and_key,
        cert_dir: cli.cert_dir.clone().unwrap_or_else(|| root_dir.join("pki")),
        node_name: node_name.to_string(),
        node_ips: cli.node_ip.into_iter().collect(),
        client_ca_file: cli.client_ca_file.clone().or_else(|| {
            authn
                .and_then(|a| a.x509.as_ref())
                .and_then(|x| x.client_ca_file.clone())
                .filter(|p| !p.as_os_str().is_empty())
        }),
        min_version: cli.tls_min_version.clone().or_else(|| file.tls_min_version.clone()),
        cipher_suites: cipher_suites.into_iter().map(|s| s.trim().to_string()).collect(),
    };
    let reason = |e: TlsError| match e {
        TlsError::Invalid { reason, .. } => reason,
        other => other.to_string(),
    };
    dockerlet_http::kubelet_api::tls::provider(&tls.cipher_suites)
        .map_err(|e| invalid("--tls-cipher-suites", reason(e)))?;
    dockerlet_http::kubelet_api::tls::versions(tls.min_version.as_deref())
        .map_err(|e| invalid("--tls-min-version", reason(e)))?;
    Ok(tls)
}
