//! `/stats/summary` (kubelet's `pkg/kubelet/server/stats`): the StatsActor's last summary as
//! `k8s.io/kubelet/pkg/apis/stats/v1alpha1` JSON, on the kubelet API and the read-only port;
//! and `/metrics/resource` and `/metrics/cadvisor`, rendered from the same snapshot by
//! [`crate::stats_metrics`].
//!
//! `only_cpu_and_memory=true` (in the query, or a POST body as a form or as the JSON
//! `{"only_cpu_and_memory":true}` older clients send) serves CPU and memory alone, as
//! metrics-server asks. Before the first housekeeping pass the answer is 503.

use actix_web::http::header::CONTENT_TYPE;
use actix_web::{web, HttpRequest, HttpResponse};
use std::sync::Arc;

use dockerlet_messages::stats::{GetStatsView, StatsView};
use serde::Deserialize;

use crate::error::ApiError;
use crate::Handles;

/// The request's options.
#[derive(Debug, Default, Deserialize)]
struct SummaryRequest {
    #[serde(default)]
    only_cpu_and_memory: Option<String>,
}

/// The JSON body of a POST.
#[derive(Debug, Default, Deserialize)]
struct SummaryBody {
    #[serde(default)]
    only_cpu_and_memory: bool,
}

/// Whether the request asks for CPU and memory only.
fn only_cpu_and_memory(req: &HttpRequest, body: &[u8]) -> Result<bool, ApiError> {
    let query = web::Query::<SummaryRequest>::from_query(req.query_string())
        .map_err(|e| ApiError::BadRequest(format!("query: {e}")))?;
    if query.only_cpu_and_memory.as_deref() == Some("true") {
        return Ok(true);
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(false);
    }
    let is_json = req
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
        || body.trim_ascii_start().starts_with(b"{");
    if is_json {
        let body: SummaryBody = serde_json::from_slice(body)
            .map_err(|e| ApiError::BadRequest(format!("body: only_cpu_and_memory: {e}")))?;
        return Ok(body.only_cpu_and_memory);
    }
    let text = std::str::from_utf8(body).map_err(|e| ApiError::BadRequest(format!("body: {e}")))?;
    let form = web::Query::<SummaryRequest>::from_query(text.trim())
        .map_err(|e| ApiError::BadRequest(format!("body: {e}")))?;
    Ok(form.only_cpu_and_memory.as_deref() == Some("true"))
}

/// `GET` or `POST /stats/summary`.
pub async fn summary(
    handles: web::Data<Handles>,
    req: HttpRequest,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let only = only_cpu_and_memory(&req, &body)?;
    let summary = view(&handles)
        .await?
        .ok_or_else(|| {
            ApiError::NotReady("no statistics yet: the first housekeeping pass has not finished; retry shortly".into())
        })?
        .summary
        .clone();
    Ok(if only {
        HttpResponse::Ok().json(summary.cpu_and_memory())
    } else {
        HttpResponse::Ok().json(&*summary)
    })
}

/// The StatsActor's last snapshot; `None` before its first pass.
async fn view(handles: &Handles) -> Result<Option<Arc<StatsView>>, ApiError> {
    handles
        .stats
        .send(GetStatsView)
        .await
        .map_err(|e| ApiError::ActorUnavailable {
            actor: "stats",
            reason: e.to_string(),
        })
}

fn exposition(body: String) -> HttpResponse {
    HttpResponse::Ok()
        .content_type(crate::stats_metrics::CONTENT_TYPE)
        .body(body)
}

/// `GET /metrics/resource`: before the first pass only `resource_scrape_error 1`, as kubelet
/// answers when its summary provider fails.
pub async fn resource_metrics(handles: web::Data<Handles>) -> Result<HttpResponse, ApiError> {
    let view = view(&handles).await?;
    Ok(exposition(crate::stats_metrics::resource(
        view.as_deref().map(|v| &*v.summary),
    )))
}

/// `GET /metrics/cadvisor`: before the first pass only `container_scrape_error 1`.
pub async fn cadvisor_metrics(handles: web::Data<Handles>) -> Result<HttpResponse, ApiError> {
    let view = view(&handles).await?;
    Ok(exposition(crate::stats_metrics::cadvisor(view.as_deref())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::fake_handles;
    use actix_web::{test, App};

    fn app_routes(cfg: &mut web::ServiceConfig) {
        cfg.route("/stats/summary", web::get().to(summary))
            .route("/stats/summary", web::post().to(summary));
    }

    /// The stub's summary is served whole; `only_cpu_and_memory` in the query, a form body or
    /// a JSON body leaves the filesystems out; a malformed body is 400.
    #[actix_web::test]
    async fn summary_and_cpu_and_memory_only() {
        let app = test::init_service(
            App::new()
                .app_data(web::Data::new(fake_handles(true)))
                .configure(app_routes),
        )
        .await;
        let get = |uri: &str| test::TestRequest::get().uri(uri).to_request();
        let body: serde_json::Value = test::call_and_read_body_json(&app, get("/stats/summary")).await;
        assert_eq!(body["node"]["nodeName"], "n1");
        assert!(body["node"]["fs"].is_object());
        let body: serde_json::Value =
            test::call_and_read_body_json(&app, get("/stats/summary?only_cpu_and_memory=true")).await;
        assert!(body["node"].get("fs").is_none() && body["node"]["cpu"].is_object());
        let post = |payload: &'static str, ct: &'static str| {
            test::TestRequest::post()
                .uri("/stats/summary")
                .insert_header((CONTENT_TYPE, ct))
                .set_payload(payload)
                .to_request()
        };
        let body: serde_json::Value =
            test::call_and_read_body_json(&app, post(r#"{"only_cpu_and_memory":true}"#, "application/json")).await;
        assert!(body["node"].get("fs").is_none());
        let body: serde_json::Value = test::call_and_read_body_json(
            &app,
            post("only_cpu_and_memory=true", "application/x-www-form-urlencoded"),
        )
        .await;
        assert!(body["node"].get("fs").is_none());
        let resp = test::call_service(&app, post(r#"{"only_cpu_and_memory":"yes"}"#, "application/json")).await;
        assert_eq!(resp.status(), 400);
        let body = test::read_body(resp).await;
        assert!(String::from_utf8_lossy(&body).contains("only_cpu_and_memory"));
    }

    /// Before the first pass: 503 with a message saying so.
    #[actix_web::test]
    async fn no_summary_yet_is_503() {
        let mut handles = fake_handles(true);
        handles.stats = crate::tests::NoStats.start().recipient();
        let app = test::init_service(App::new().app_data(web::Data::new(handles)).configure(app_routes)).await;
        let resp = test::call_service(&app, test::TestRequest::get().uri("/stats/summary").to_request()).await;
        assert_eq!(resp.status(), 503);
        let body = test::read_body(resp).await;
        assert!(String::from_utf8_lossy(&body).contains("no statistics yet"));
    }

    use actix::Actor;
}
