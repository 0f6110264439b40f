//! The debug endpoint (`--debug-address`): every actor's state as JSON and as a page, and the
//! test-only fault hook.

use actix_web::{web, HttpResponse};
use dockerlet_messages::debug::{DebugSnapshot, FaultTarget, GetDebugSnapshot, InjectFault};
use dockerlet_messages::PodUid;
use serde::Deserialize;

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

/// `GET /debug`: the same snapshot as a small HTML page (refreshes every 2 s).
pub async fn page(handles: web::Data<Handles>) -> Result<HttpResponse, ApiError> {
    let s = snapshot(&handles).await?;
    let mut html = format!(
        "<!doctype html><html><head><meta charset=utf-8><meta http-equiv=refresh content=2>\
         <title>dockerlet {node}</title><style>body{{font-family:sans-serif}}td,th{{border:1px solid #ccc;padding:2px 6px;vertical-align:top}}\
         table{{border-collapse:collapse}}pre{{margin:0}}</style></head><body><h1>dockerlet on {node}</h1>\
         <h2>Actors</h2><table><tr><th>kind</th><th>name</th><th>messages</th><th>restarts</th><th>last error</th><th>detail</th></tr>",
        node = escape(&s.node_name)
    );
    for a in &s.actors {
        html.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><pre>{}</pre></td></tr>",
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
    html.push_str("</table><h2>Events</h2><table><tr><th>time</th><th>reason</th><th>object</th><th>message</th></tr>");
    for e in s.events.iter().rev() {
        html.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&e.time),
            escape(&e.reason),
            escape(&e.object),
            escape(&e.message)
        ));
    }
    html.push_str("</table></body></html>");
    Ok(HttpResponse::Ok().content_type("text/html; charset=utf-8").body(html))
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

    /// `/debug/actors` serves the snapshot; the page renders it; faults are refused when off.
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
        assert!(html.contains("PlegActor") && html.contains("bad.yaml"));
        let resp = test::call_service(
            &app,
            test::TestRequest::post().uri("/debug/fault?target=pleg").to_request(),
        )
        .await;
        assert_eq!(resp.status().as_u16(), 403);
    }
}
