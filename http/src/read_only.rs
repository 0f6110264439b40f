//! The read-only kubelet API (`--read-only-port`, 10255): `GET /pods`, `GET /healthz`,
//! `GET /metrics`, `GET /metrics/probes` and `GET|POST /stats/summary`; the debugging paths
//! answer 405 "Debug endpoints are disabled.", as kubelet's read-only server is made without a
//! configuration and so with `InstallDebuggingDisabledHandlers` (`pkg/kubelet/server/server.go`).

use actix_web::{web, HttpResponse};
use dockerlet_messages::status::GetPods;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use k8s_openapi::List;

use crate::error::ApiError;
use crate::Handles;

/// Routes of the read-only server.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/pods", web::get().to(pods))
        .route("/pods/", web::get().to(pods))
        .route("/healthz", web::get().to(crate::healthz::healthz))
        .route("/stats/summary", web::get().to(crate::stats::summary))
        .route("/stats/summary", web::post().to(crate::stats::summary))
        .route("/metrics/resource", web::get().to(crate::stats::resource_metrics))
        .route("/metrics/cadvisor", web::get().to(crate::stats::cadvisor_metrics))
        .configure(crate::metrics::configure);
    let off = crate::debug_routes::DebugRoutes {
        debugging: false,
        ..Default::default()
    };
    for resource in crate::debug_routes::disabled_routes(off) {
        cfg.service(resource);
    }
}

/// Every pod this node runs, with status, as a v1 PodList.
pub async fn pods(handles: web::Data<Handles>) -> Result<HttpResponse, ApiError> {
    let items = handles
        .pods
        .send(GetPods)
        .await
        .map_err(|e| ApiError::ActorUnavailable {
            actor: "status",
            reason: e.to_string(),
        })?;
    Ok(HttpResponse::Ok().json(List {
        items,
        metadata: ListMeta::default(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::fake_handles;
    use actix_web::{test, App};

    /// `/pods` serves a PodList (kind and apiVersion set) with the pods the status actor holds.
    #[actix_web::test]
    async fn pods_returns_a_pod_list() {
        let app = test::init_service(
            App::new()
                .app_data(web::Data::new(fake_handles(true)))
                .configure(configure),
        )
        .await;
        let resp = test::call_service(&app, test::TestRequest::get().uri("/pods").to_request()).await;
        assert!(resp.status().is_success());
        let body: serde_json::Value = test::read_body_json(resp).await;
        assert_eq!(body["kind"], "PodList");
        assert_eq!(body["apiVersion"], "v1");
        assert_eq!(body["items"][0]["metadata"]["name"], "web-n1");
        // The debugging paths are kubelet's 405s, as on its read-only server.
        let resp = test::call_service(&app, test::TestRequest::get().uri("/containerLogs/a/b/c").to_request()).await;
        assert_eq!(resp.status().as_u16(), 405);
        assert_eq!(test::read_body(resp).await, "Debug endpoints are disabled.\n");
    }
}
