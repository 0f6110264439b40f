//! The debug endpoint (`--debug-address`): every actor's state as JSON, a page explaining each
//! pod ([`explain`]), and the test-only fault hook.

pub mod explain;

use actix_web::{web, HttpRequest, HttpResponse};
use dockerlet_messages::debug::{
    ContainerDebug, ContainerStateDebug, DebugEvent, DebugSnapshot, DebugView, FaultTarget, GetDebugSnapshot,
    InjectFault, PlegDebug, PodDebug, ProbeDebug,
};
use dockerlet_messages::PodUid;
use k8s_openapi::jiff::Timestamp;
use serde::Deserialize;

use explain::explain;

use crate::error::ApiError;
use crate::Handles;

/// Routes of the debug server.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/debug/actors", web::get().to(actors))
        .route("/debug", web::get().to(page))
        .route("/debug/", web::get().to(page))
        .route("/debug/fault", web::post().to(fault));
}

async fn snapshot(handles: &Handles) -> Result<DebugSnapshot, ApiError> {
    handles
        .debug
        .send(GetDebugSnapshot)
        .await
        .map_err(|e| ApiError::ActorUnavailable {
            actor: "supervisor",
            reason: e.to_string(),
        })
}

/// `GET /debug/actors`: the snapshot as JSON.
pub async fn actors(handles: web::Data<Handles>) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(snapshot(&handles).await?))
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The page refreshes itself this often (seconds).
const REFRESH_SECONDS: u32 = 2;

/// Events shown per pod, newest first.
const POD_EVENTS: usize = 10;

/// `GET /debug`: per pod what its worker is doing and why it is stuck, its containers, probes
/// and recent events, with links to its logs; then PLEG health, every actor and every event.
/// Built from one snapshot per request; refreshes itself every 2 s.
pub async fn page(handles: web::Data<Handles>, req: HttpRequest) -> Result<HttpResponse, ApiError> {
    let s = snapshot(&handles).await?;
    let logs = handles.logs_port.map(|port| {
        let info = req.connection_info();
        format!("https://{}:{port}", host_without_port(info.host()))
    });
    let html = render(&s, logs.as_deref(), Timestamp::now());
    Ok(HttpResponse::Ok().content_type("text/html; charset=utf-8").body(html))
}

/// The host part of a `Host` header (`node:10248`, `[::1]:10248`, `node`).
fn host_without_port(host: &str) -> &str {
    match host.rsplit_once(':') {
        Some((h, port)) if port.parse::<u16>().is_ok() && (h.ends_with(']') || !h.contains(':')) => h,
        _ => host,
    }
}

/// The page for snapshot `s`; `logs` is the kubelet API's base URL, if it serves.
fn render(s: &DebugSnapshot, logs: Option<&str>, now: Timestamp) -> String {
    let mut pods: Vec<&PodDebug> = Vec::new();
    let mut probes: &[ProbeDebug] = &[];
    let mut pleg = None;
    for a in &s.actors {
        match &a.view {
            Some(DebugView::Pod(p)) => pods.push(p),
            Some(DebugView::Probes(p)) => probes = p,
            Some(DebugView::Pleg(p)) => pleg = Some(p),
            None => {}
        }
    }
    pods.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    let mut html = format!(
        "<!doctype html><html><head><meta charset=utf-8><meta http-equiv=refresh content={REFRESH_SECONDS}>\
         <title>dockerlet {node}</title><style>body{{font-family:sans-serif}}td,th{{border:1px solid #ccc;padding:2px 6px;vertical-align:top}}\
         table{{border-collapse:collapse;margin:4px 0}}pre{{margin:0}}.pod{{border-left:6px solid #999;padding:2px 10px;margin:12px 0}}\
         .pod.fine{{border-color:#2a2}}.pod.progressing{{border-color:#c90}}.pod.stuck{{border-color:#c22}}\
         .explanation{{font-weight:bold;font-size:1.1em}}.muted{{color:#666}}</style></head><body>\
         <h1>dockerlet on {node}</h1><p class=muted>refreshes every {REFRESH_SECONDS} s; as of {now}</p>",
        node = escape(&s.node_name)
    );
    html.push_str(&pleg_line(pleg));
    html.push_str(&format!("<h2>Pods ({})</h2>", pods.len()));
    if pods.is_empty() {
        html.push_str("<p class=muted>no pods</p>");
    }
    for pod in pods {
        html.push_str(&pod_section(pod, probes, &s.events, logs, now));
    }
    html.push_str(
        "<h2>Actors</h2><table><tr><th>kind</th><th>name</th><th>messages</th><th>restarts</th><th>last error</th><th>detail</th></tr>",
    );
    for a in &s.actors {
        html.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><details><summary>detail</summary><pre>{}</pre></details></td></tr>",
            escape(&a.kind),
            escape(&a.name),
            a.messages_handled,
            a.restarts,
            escape(a.last_error.as_deref().unwrap_or("")),
            escape(&serde_json::to_string_pretty(&a.detail).unwrap_or_default())
        ));
    }
    html.push_str("</table><h2>Manifest errors</h2><table><tr><th>file</th><th>reason</th></tr>");
    for e in &s.manifest_errors {
        html.push_str(&format!(
            "<tr><td>{}</td><td>{}</td></tr>",
            escape(&e.file),
            escape(&e.reason)
        ));
    }
    html.push_str("</table><h2>Events</h2>");
    html.push_str(&events_table(s.events.iter().rev()));
    html.push_str("</body></html>");
    html
}

/// PLEG health in one line.
fn pleg_line(pleg: Option<&PlegDebug>) -> String {
    let Some(p) = pleg else {
        return "<p id=pleg class=stuck>PLEG: not reporting</p>".to_string();
    };
    let relist = match (&p.last_relist, p.last_relist_duration_ms) {
        (Some(at), Some(ms)) => format!("last relist at {} took {ms:.1} ms; {} relists", escape(at), p.relists),
        _ => "no complete relist yet".to_string(),
    };
    match &p.health.reason {
        None => format!("<p id=pleg>PLEG healthy: {relist}</p>"),
        Some(reason) => format!("<p id=pleg><b>PLEG unhealthy: {}</b>; {relist}</p>", escape(reason)),
    }
}

/// A pod's section of the debug page: why it is where it is, its containers, probes and events.
fn pod_section(
    pod: &PodDebug,
    probes: &[ProbeDebug],
    events: &[DebugEvent],
    logs: Option<&str>,
    now: Timestamp,
) -> String {
    let why = explain(pod, probes, events, now);
    let id = format!("{}/{}", pod.namespace, pod.name);
    let mut html = format!(
        "<section class=\"pod {}\" data-pod=\"{id}\"><h3>{id}</h3>\
         <p class=muted>uid {} · worker {} · phase {} · next: {}</p>\
         <p class=explanation data-pod=\"{id}\">{}</p>",
        why.verdict.class(),
        escape(&pod.pod_uid.0),
        escape(&pod.phase),
        escape(pod.pod_phase.as_deref().unwrap_or("-")),
        escape(&pod.next_action),
        escape(&why.summary),
        id = escape(&id),
    );
    if !why.details.is_empty() {
        html.push_str("<ul class=details>");
        for d in &why.details {
            html.push_str(&format!("<li>{}</li>", escape(d)));
        }
        html.push_str("</ul>");
    }
    html.push_str(
        "<table><tr><th>container</th><th>image</th><th>state</th><th>ready</th><th>restarts</th><th>last exit</th><th>logs</th></tr>",
    );
    for c in &pod.containers {
        html.push_str(&container_row(pod, c, logs));
    }
    html.push_str("</table>");
    html.push_str(&probes_table(pod, probes));
    let recent = events.iter().rev().filter(|e| e.object == id).take(POD_EVENTS);
    html.push_str(&events_table(recent));
    html.push_str("</section>");
    html
}

/// A container's row of a pod's table: its state, last exit and log links.
fn container_row(pod: &PodDebug, c: &ContainerDebug, logs: Option<&str>) -> String {
    let state = match &c.state {
        ContainerStateDebug::Unknown => "-".to_string(),
        ContainerStateDebug::Waiting { reason, message } if message.is_empty() => format!("waiting: {reason}"),
        ContainerStateDebug::Waiting { reason, message } => format!("waiting: {reason}: {message}"),
        ContainerStateDebug::Running { started_at } => {
            format!("running since {}", started_at.as_deref().unwrap_or("?"))
        }
        ContainerStateDebug::Terminated(e) => {
            format!("terminated: exit {} {}", e.exit_code, e.reason)
        }
    };
    let last = c
        .last_exit
        .as_ref()
        .map(|e| {
            format!(
                "{} {} {}",
                e.exit_code,
                e.reason,
                e.finished_at.as_deref().unwrap_or("")
            )
        })
        .unwrap_or_default();
    let link = match logs {
        Some(base) => {
            let url = format!("{base}/containerLogs/{}/{}/{}", pod.namespace, pod.name, c.name);
            format!(
                "<a href=\"{url}\">logs</a> <a href=\"{url}?previous=true\">previous</a>",
                url = escape(&url)
            )
        }
        None => "<span class=muted>kubelet API off</span>".to_string(),
    };
    format!(
        "<tr><td>{}{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{link}</td></tr>",
        escape(&c.name),
        if c.init { " (init)" } else { "" },
        escape(&c.image),
        escape(&state),
        c.ready,
        c.restart_count,
        escape(&last),
    )
}

/// The table of the pod's probes; empty when it has none.
fn probes_table(pod: &PodDebug, probes: &[ProbeDebug]) -> String {
    let mut html = String::new();
    let mine: Vec<&ProbeDebug> = probes.iter().filter(|p| p.pod_uid == pod.pod_uid).collect();
    if !mine.is_empty() {
        html.push_str(
            "<table><tr><th>probe</th><th>result</th><th>last run</th><th>last outcome</th><th>output</th><th>in a row</th><th>runs</th></tr>",
        );
        for p in mine {
            html.push_str(&format!(
                "<tr><td>{} {:?} ({})</td><td>{:?}{}</td><td>{}</td><td>{}</td><td><pre>{}</pre></td><td>{} ok / {} failed</td><td>{}</td></tr>",
                escape(&p.container),
                p.probe,
                escape(&p.handler),
                p.result,
                if p.on_hold { " (on hold)" } else { "" },
                escape(p.last_run.as_deref().unwrap_or("never")),
                escape(p.last_outcome.as_deref().unwrap_or("-")),
                escape(p.last_output.trim()),
                p.successes,
                p.failures,
                p.runs,
            ));
        }
        html.push_str("</table>");
    }
    html
}

fn events_table<'a>(events: impl Iterator<Item = &'a DebugEvent>) -> String {
    let mut html =
        "<table><tr><th>time</th><th>type</th><th>reason</th><th>object</th><th>container</th><th>message</th></tr>"
            .to_string();
    for e in events {
        html.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            e.time,
            e.type_.as_str(),
            escape(&e.reason),
            escape(&e.object),
            escape(e.container.as_deref().unwrap_or("")),
            escape(&e.message)
        ));
    }
    html.push_str("</table>");
    html
}

/// Query of `POST /debug/fault`.
#[derive(Debug, Deserialize)]
pub struct FaultQuery {
    /// `pleg`, `status`, `source` or `pod`.
    pub target: String,
    /// The pod UID when `target=pod`.
    pub uid: Option<String>,
}

/// `POST /debug/fault?target=…`: make an actor panic (fault injection must be enabled).
pub async fn fault(handles: web::Data<Handles>, query: web::Query<FaultQuery>) -> Result<HttpResponse, ApiError> {
    let Some(faults) = &handles.faults else {
        return Err(ApiError::Forbidden(
            "fault injection is disabled (start with --enable-fault-injection)".to_string(),
        ));
    };
    let target = match (query.target.as_str(), &query.uid) {
        ("pod", Some(uid)) => FaultTarget::PodWorker(PodUid(uid.clone())),
        ("pod", None) => return Err(ApiError::BadRequest("target=pod needs uid=".to_string())),
        // The names the actors report on /debug/actors; `source` and `probe` kept for old callers.
        ("source", _) => FaultTarget::Actor("file".to_string()),
        ("probe", _) => FaultTarget::Actor("probes".to_string()),
        (name, _) => FaultTarget::Actor(name.to_string()),
    };
    let result = faults
        .send(InjectFault { target })
        .await
        .map_err(|e| ApiError::ActorUnavailable {
            actor: "supervisor",
            reason: e.to_string(),
        })?;
    result.map_err(|e| ApiError::BadRequest(e.to_string()))?;
    Ok(HttpResponse::Ok().body("ok"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::fake_handles;
    use actix_web::{test, App};

    /// The host of a `Host` header, with or without port, IPv6 too.
    #[::core::prelude::v1::test]
    fn host_without_port_strips_only_a_port() {
        assert_eq!(host_without_port("node:10248"), "node");
        assert_eq!(host_without_port("node"), "node");
        assert_eq!(host_without_port("[::1]:10248"), "[::1]");
        assert_eq!(host_without_port("::1"), "::1");
    }

    /// `/debug/actors` serves the snapshot; the page renders it with each pod explained and
    /// linked to its logs; faults are refused when off.
    #[actix_web::test]
    async fn debug_endpoint_serves_json_and_a_page() {
        let app = test::init_service(
            App::new()
                .app_data(web::Data::new(fake_handles(true)))
                .configure(configure),
        )
        .await;
        let resp = test::call_service(&app, test::TestRequest::get().uri("/debug/actors").to_request()).await;
        let body: serde_json::Value = test::read_body_json(resp).await;
        assert_eq!(body["node_name"], "n1");
        assert_eq!(body["actors"][0]["kind"], "PlegActor");
        let resp = test::call_service(&app, test::TestRequest::get().uri("/debug").to_request()).await;
        let html = String::from_utf8(test::read_body(resp).await.to_vec()).unwrap();
        assert!(html.contains("PlegActor") && html.contains("bad.yaml"), "{html}");
        assert!(html.contains("PLEG healthy"), "{html}");
        assert!(
            html.contains("cannot start c: ErrImageNeverPull: Container image &quot;x&quot; is not present"),
            "{html}"
        );
        assert!(
            html.contains("href=\"https://localhost:10250/containerLogs/default/web-n1/c\""),
            "{html}"
        );
        let resp = test::call_service(
            &app,
            test::TestRequest::post().uri("/debug/fault?target=pleg").to_request(),
        )
        .await;
        assert_eq!(resp.status().as_u16(), 403);
    }
}
