//! `GET /metrics` and `GET /metrics/probes` (Prometheus text format 0.0.4), the HTTP request
//! metrics middleware, and the process metrics collector read from `/proc/self` at each scrape.
//!
//! Any server installs the routes with [`configure`] and counts its requests with [`track`]
//! (`server_type` `readonly` or `readwrite`); the [`Metrics`] handle comes from [`Handles`].

use std::sync::Arc;
use std::time::Instant;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::{web, HttpResponse};
use dockerlet_metrics::{HttpLabels, Metrics};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::prometheus_text::{encode, CONTENT_TYPE};
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use crate::error::ApiError;
use crate::Handles;

/// The metrics routes.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/metrics", web::get().to(metrics))
        .route("/metrics/probes", web::get().to(probes));
}

fn exposition(registry: &Registry) -> Result<HttpResponse, ApiError> {
    let mut body = String::with_capacity(16 * 1024);
    encode(&mut body, registry).map_err(|_| ApiError::Internal {
        reason: "cannot encode the metrics".into(),
    })?;
    dockerlet_metrics::kubelet_names(&mut body);
    Ok(HttpResponse::Ok().content_type(CONTENT_TYPE).body(body))
}

/// The agent's metrics.
pub async fn metrics(handles: web::Data<Handles>) -> Result<HttpResponse, ApiError> {
    exposition(handles.metrics.registry())
}

/// The prober's metrics.
pub async fn probes(handles: web::Data<Handles>) -> Result<HttpResponse, ApiError> {
    exposition(handles.metrics.probe_registry())
}

/// kubelet's request path label: the route, never the URL (bounded cardinality).
fn path_label(path: &str) -> &'static str {
    if path == "/metrics/probes" {
        return "metrics/probes";
    }
    let first = path.trim_start_matches('/').split('/').next().unwrap_or("");
    const KNOWN: [&str; 16] = [
        "pods",
        "runningpods",
        "healthz",
        "metrics",
        "stats",
        "spec",
        "logs",
        "containerLogs",
        "exec",
        "attach",
        "portForward",
        "run",
        "configz",
        "debug",
        "checkpoint",
        "cri",
    ];
    KNOWN.into_iter().find(|k| *k == first).unwrap_or("other")
}

fn method_label(method: &actix_web::http::Method) -> &'static str {
    use actix_web::http::Method;
    const KNOWN: [(Method, &str); 7] = [
        (Method::GET, "GET"),
        (Method::POST, "POST"),
        (Method::PUT, "PUT"),
        (Method::DELETE, "DELETE"),
        (Method::HEAD, "HEAD"),
        (Method::PATCH, "PATCH"),
        (Method::OPTIONS, "OPTIONS"),
    ];
    KNOWN.iter().find(|(m, _)| m == method).map_or("other", |(_, s)| s)
}

/// The labels of one request to a server of `server_type`.
pub fn request_labels(req: &ServiceRequest, server_type: &'static str) -> HttpLabels {
    let path = path_label(req.path());
    let follow = req
        .query_string()
        .split('&')
        .any(|kv| kv == "follow=true" || kv == "follow=1");
    let long_running = matches!(path, "exec" | "attach" | "portForward") || (path == "containerLogs" && follow);
    HttpLabels {
        method: method_label(req.method()),
        path,
        server_type,
        long_running: if long_running { "true" } else { "false" },
    }
}

/// Middleware body: count the request, its duration and the requests in flight. Install with
/// `actix_web::middleware::from_fn(|r, n| track(r, n, "readonly"))`.
pub async fn track(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
    server_type: &'static str,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let metrics: Option<Arc<Metrics>> = req.app_data::<web::Data<Handles>>().map(|h| h.metrics.clone());
    let Some(metrics) = metrics else {
        return next.call(req).await;
    };
    let labels = request_labels(&req, server_type);
    metrics.http_requests.get_or_create(&labels).inc();
    let inflight = metrics.http_inflight_requests.get_or_create_owned(&labels);
    inflight.inc();
    let began = Instant::now();
    let result = next.call(req).await;
    inflight.dec();
    metrics
        .http_requests_duration
        .get_or_create(&labels)
        .observe(began.elapsed().as_secs_f64());
    result
}

/// The process metrics of component-base (`process_*`), read from `/proc/self` at each scrape.
#[derive(Debug, Default)]
pub struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Ok(me) = procfs::process::Process::myself() else {
            return Ok(()); // no /proc: nothing to report
        };
        let ticks = procfs::ticks_per_second() as f64;
        let page = procfs::page_size() as f64;
        if let Ok(stat) = me.stat() {
            let cpu = ConstCounter::new((stat.utime + stat.stime) as f64 / ticks);
            cpu.encode(encoder.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds",
                None,
                cpu.metric_type(),
            )?)?;
            let rss = ConstGauge::new(stat.rss as f64 * page);
            rss.encode(encoder.encode_descriptor(
                "process_resident_memory_bytes",
                "Resident memory size in bytes",
                None,
                rss.metric_type(),
            )?)?;
            let vsize = ConstGauge::new(stat.vsize as f64);
            vsize.encode(encoder.encode_descriptor(
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes",
                None,
                vsize.metric_type(),
            )?)?;
            if let Ok(boot) = procfs::boot_time_secs() {
                let start = ConstGauge::new(boot as f64 + stat.starttime as f64 / ticks);
                start.encode(encoder.encode_descriptor(
                    "process_start_time_seconds",
                    "Start time of the process since unix epoch in seconds",
                    None,
                    start.metric_type(),
                )?)?;
            }
        }
        if let Ok(fds) = me.fd_count() {
            let open = ConstGauge::new(fds as f64);
            open.encode(encoder.encode_descriptor(
                "process_open_fds",
                "Number of open file descriptors",
                None,
                open.metric_type(),
            )?)?;
        }
        if let Ok(limits) = me.limits() {
            if let procfs::process::LimitValue::Value(max) = limits.max_open_files.soft_limit {
                let max = ConstGauge::new(max as f64);
                max.encode(encoder.encode_descriptor(
                    "process_max_fds",
                    "Maximum number of open file descriptors",
                    None,
                    max.metric_type(),
                )?)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::fake_handles;
    use actix_web::{test, App};

    async fn get(uri: &str) -> (String, String) {
        let app = test::init_service(
            App::new()
                .app_data(web::Data::new(fake_handles(true)))
                .wrap(actix_web::middleware::from_fn(|r, n| track(r, n, "readonly")))
                .configure(configure)
                .configure(crate::read_only::configure),
        )
        .await;
        // One request first, so the middleware has counted something by the scrape.
        let _ = test::call_service(&app, test::TestRequest::get().uri("/pods?x=1").to_request()).await;
        let resp = test::call_service(&app, test::TestRequest::get().uri(uri).to_request()).await;
        assert!(resp.status().is_success());
        let ct = resp
            .headers()
            .get("content-type")
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        let body = String::from_utf8(test::read_body(resp).await.to_vec()).unwrap();
        (ct, body)
    }

    /// `/metrics` serves the text format with the node, HTTP and process families.
    #[actix_web::test]
    async fn metrics_serves_kubelet_and_process_families() {
        let (ct, body) = get("/metrics").await;
        assert_eq!(ct, CONTENT_TYPE);
        for line in [
            "kubelet_node_name{node=\"n1\"} 1",
            "kubelet_http_requests_total{method=\"GET\",path=\"pods\",server_type=\"readonly\",long_running=\"false\"} 1",
            "kubelet_http_requests_duration_seconds_count{method=\"GET\",path=\"pods\",server_type=\"readonly\",long_running=\"false\"} 1",
            "kubelet_http_inflight_requests{method=\"GET\",path=\"metrics\",server_type=\"readonly\",long_running=\"false\"} 1",
            "# TYPE process_cpu_seconds_total counter",
            "# TYPE process_resident_memory_bytes gauge",
            "# TYPE process_start_time_seconds gauge",
            "# TYPE process_open_fds gauge",
        ] {
            assert!(body.contains(line), "{line:?} not in\n{body}");
        }
        assert!(!body.contains("prober_probe_total"));
    }

    /// `/metrics/probes` serves the prober's families only.
    #[actix_web::test]
    async fn probes_serves_the_prober_registry() {
        let (_, body) = get("/metrics/probes").await;
        assert!(body.contains("prober_probe_total{probe_type=\"Readiness\""), "{body}");
        assert!(!body.contains("kubelet_node_name"), "{body}");
    }

    /// The path label is the route, long-running for streams.
    #[actix_web::test]
    async fn labels_are_bounded() {
        let req = test::TestRequest::get()
            .uri("/containerLogs/ns/p/c?follow=true")
            .to_srv_request();
        let l = request_labels(&req, "readwrite");
        assert_eq!((l.path, l.long_running), ("containerLogs", "true"));
        let req = test::TestRequest::get().uri("/no/such/thing").to_srv_request();
        assert_eq!(request_labels(&req, "readonly").path, "other");
    }
}
