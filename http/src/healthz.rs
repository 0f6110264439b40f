//! `GET /healthz`: 200 `ok`, or 500 with the reason (PLEG unhealthy, Docker unreachable).

use crate::Handles;
use actix_web::{web, HttpResponse};

/// Routes of the healthz server.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/healthz", web::get().to(healthz));
}

/// Healthy → 200 `ok`; otherwise 500 and the reason, as kubelet's healthz does. The PLEG's
/// health is read from its cell, with no message to the actors.
pub async fn healthz(handles: web::Data<Handles>) -> HttpResponse {
    let h = handles.health.health();
    if h.healthy {
        HttpResponse::Ok().content_type("text/plain; charset=utf-8").body("ok")
    } else {
        HttpResponse::InternalServerError()
            .content_type("text/plain; charset=utf-8")
            .body(format!("healthz check failed: {}", h.reason.unwrap_or_default()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::fake_handles;
    use actix_web::{test, App};

    /// An unhealthy PLEG makes `/healthz` answer 500 with the reason.
    #[actix_web::test]
    async fn healthz_reports_the_reason_when_unhealthy() {
        for (healthy, status) in [(true, 200), (false, 500)] {
            let app = test::init_service(
                App::new()
                    .app_data(web::Data::new(fake_handles(healthy)))
                    .configure(configure),
            )
            .await;
            let resp = test::call_service(&app, test::TestRequest::get().uri("/healthz").to_request()).await;
            assert_eq!(resp.status().as_u16(), status);
            let body = test::read_body(resp).await;
            if healthy {
                assert_eq!(body, "ok");
            } else {
                assert_eq!(
                    String::from_utf8_lossy(&body),
                    "healthz check failed: container runtime is down: Cannot connect to the Docker daemon"
                );
            }
        }
    }
}
