//! `GET /containerLogs/{namespace}/{pod}/{container}`: kubelet's `PodLogOptions` from the query
//! (validated as `ValidatePodLogOptions` does), the container found in the pod's status, and
//! Docker's log streamed through without being read ahead.

use std::collections::HashMap;

use actix_web::{web, HttpResponse};
use bytes::Bytes;
use dockerlet_messages::ContainerId;
use dockerlet_runtime::{LogRequest, LogStream};
use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;

use super::KubeletApi;
use crate::error::ApiError;

/// The validated query of a log request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LogOptions {
    /// What to ask the runtime for.
    pub request: LogRequest,
    /// Read the instance before the current one.
    pub previous: bool,
    /// Stop after this many bytes.
    pub limit_bytes: Option<u64>,
}

/// A query parameter kubelet would reject, with why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{parameter}: {reason}")]
pub struct InvalidLogOption {
    /// The parameter (`tailLines`).
    pub parameter: &'static str,
    /// Why.
    pub reason: String,
}

fn invalid(parameter: &'static str, reason: impl Into<String>) -> InvalidLogOption {
    InvalidLogOption {
        parameter,
        reason: reason.into(),
    }
}

fn boolean(query: &HashMap<String, String>, parameter: &'static str) -> Result<bool, InvalidLogOption> {
    match query.get(parameter).map(String::as_str) {
        None | Some("") => Ok(false),
        // Go's strconv.ParseBool, which the query decoding uses.
        Some("1" | "t" | "T" | "true" | "TRUE" | "True") => Ok(true),
        Some("0" | "f" | "F" | "false" | "FALSE" | "False") => Ok(false),
        Some(other) => Err(invalid(parameter, format!("{other:?} is not a boolean"))),
    }
}

fn integer(query: &HashMap<String, String>, parameter: &'static str) -> Result<Option<i64>, InvalidLogOption> {
    query
        .get(parameter)
        .map(|v| {
            v.parse::<i64>()
                .map_err(|_| invalid(parameter, format!("{v:?} is not an integer")))
        })
        .transpose()
}

/// Parse and validate the query as kubelet does: `tailLines` ≥ 0, `limitBytes` ≥ 1,
/// `sinceSeconds` ≥ 1, `sinceTime` RFC 3339, at most one of the two, `stream` one of
/// `All`/`Stdout`/`Stderr` and not with `tailLines`.
pub fn parse_options(query: &HashMap<String, String>, now: Timestamp) -> Result<LogOptions, InvalidLogOption> {
    let tail_lines = integer(query, "tailLines")?;
    if tail_lines.is_some_and(|n| n < 0) {
        return Err(invalid("tailLines", "must be greater than or equal to 0"));
    }
    let limit_bytes = integer(query, "limitBytes")?;
    if limit_bytes.is_some_and(|n| n < 1) {
        return Err(invalid("limitBytes", "must be greater than 0"));
    }
    let since_seconds = integer(query, "sinceSeconds")?;
    if since_seconds.is_some_and(|n| n < 1) {
        return Err(invalid("sinceSeconds", "must be greater than 0"));
    }
    let since_time = query
        .get("sinceTime")
        .map(|v| {
            v.parse::<Timestamp>()
                .map_err(|e| invalid("sinceTime", format!("{v:?} is not an RFC 3339 time: {e}")))
        })
        .transpose()?;
    if since_seconds.is_some() && since_time.is_some() {
        return Err(invalid(
            "sinceSeconds",
            "at most one of `sinceTime` or `sinceSeconds` may be specified",
        ));
    }
    let stream = match query.get("stream").map(String::as_str) {
        None | Some("All") => LogStream::All,
        Some("Stdout") => LogStream::Stdout,
        Some("Stderr") => LogStream::Stderr,
        Some(other) => {
            return Err(invalid(
                "stream",
                format!("{other:?}: supported values: \"All\", \"Stderr\", \"Stdout\""),
            ))
        }
    };
    if stream != LogStream::All && tail_lines.is_some() {
        return Err(invalid(
            "stream",
            "tailLines and specific stream are mutually exclusive for now",
        ));
    }
    let since_unix = since_time
        .map(|t| t.as_second())
        .or_else(|| since_seconds.map(|s| now.as_second().saturating_sub(s)));
    Ok(LogOptions {
        request: LogRequest {
            follow: boolean(query, "follow")?,
            timestamps: boolean(query, "timestamps")?,
            tail_lines: tail_lines.map(|n| n as u64),
            since_unix,
            stream,
        },
        previous: boolean(query, "previous")?,
        limit_bytes: limit_bytes.map(|n| n as u64),
    })
}

/// The handler.
pub async fn container_logs(
    api: web::Data<KubeletApi>,
    path: web::Path<(String, String, String)>,
    query: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, ApiError> {
    let (namespace, pod_name, container) = path.into_inner();
    let options = parse_options(&query, Timestamp::now()).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let pod = super::find_pod(&api, &namespace, &pod_name)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("pod {pod_name:?} does not exist")))?;
    let spec = pod.spec.as_ref();
    let in_spec = spec.is_some_and(|s| {
        s.containers.iter().any(|c| c.name == container)
            || s.init_containers.iter().flatten().any(|c| c.name == container)
            || s.ephemeral_containers.iter().flatten().any(|c| c.name == container)
    });
    if !in_spec {
        return Err(ApiError::NotFound(format!(
            "container {container:?} not found in pod {pod_name:?}"
        )));
    }
    let status = pod.status.as_ref().and_then(|s| {
        s.container_statuses
            .iter()
            .flatten()
            .chain(s.init_container_statuses.iter().flatten())
            .chain(s.ephemeral_container_statuses.iter().flatten())
            .find(|c| c.name == container)
    });
    let id = if options.previous {
        status
            .and_then(|s| s.last_state.as_ref())
            .and_then(|s| s.terminated.as_ref())
            .and_then(|t| t.container_id.clone())
            .ok_or_else(|| {
                ApiError::BadRequest(format!(
                    "previous terminated container {container:?} in pod {pod_name:?} not found"
                ))
            })?
    } else {
        status.and_then(|s| s.container_id.clone()).ok_or_else(|| {
            let why = status
                .and_then(|s| s.state.as_ref())
                .and_then(|s| s.waiting.as_ref())
                .and_then(|w| w.reason.clone())
                .unwrap_or_else(|| "ContainerCreating".into());
            ApiError::BadRequest(format!(
                "container {container:?} in pod {pod_name:?} is waiting to start: {why}"
            ))
        })?
    };
    let id = ContainerId(id.strip_prefix("docker://").unwrap_or(&id).to_string());
    tracing::debug!(pod = %pod_name, namespace = %namespace, container = %container, container_id = %id, "serving logs");
    let chunks = api.logs.logs(&id, &options.request);
    let body = match options.limit_bytes {
        None => chunks.boxed(),
        Some(limit) => limited(chunks, limit).boxed(),
    };
    Ok(HttpResponse::Ok()
        .content_type("text/plain")
        .streaming(body.map(|chunk| chunk.map_err(|e| std::io::Error::other(e.to_string())))))
}

/// At most `limit` bytes of `chunks` (the last chunk cut), then the end.
fn limited<E: Send + 'static>(
    chunks: futures::stream::BoxStream<'static, Result<Bytes, E>>,
    limit: u64,
) -> impl futures::Stream<Item = Result<Bytes, E>> {
    futures::stream::unfold((chunks, limit), |(mut chunks, left)| async move {
        if left == 0 {
            return None;
        }
        match chunks.next().await? {
            Ok(mut chunk) => {
                if chunk.len() as u64 > left {
                    chunk.truncate(left as usize);
                }
                let left = left - chunk.len() as u64;
                Some((Ok(chunk), (chunks, left)))
            }
            Err(e) => Some((Err(e), (chunks, 0))),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn err(pairs: &[(&str, &str)]) -> InvalidLogOption {
        parse_options(&query(pairs), Timestamp::UNIX_EPOCH).unwrap_err()
    }

    /// Valid options map onto the runtime's request; `sinceSeconds` counts back from now.
    #[test]
    fn options_map_onto_the_request() {
        let now: Timestamp = "2026-01-01T00:01:40Z".parse().unwrap();
        let o = parse_options(
            &query(&[
                ("follow", "true"),
                ("timestamps", "1"),
                ("tailLines", "2"),
                ("sinceSeconds", "100"),
            ]),
            now,
        )
        .unwrap();
        assert!(o.request.follow && o.request.timestamps && !o.previous);
        assert_eq!(o.request.tail_lines, Some(2));
        assert_eq!(o.request.since_unix, Some(now.as_second() - 100));
        let o = parse_options(
            &query(&[
                ("previous", "true"),
                ("sinceTime", "2026-01-01T00:00:00Z"),
                ("limitBytes", "5"),
                ("stream", "Stderr"),
            ]),
            now,
        )
        .unwrap();
        assert!(o.previous);
        assert_eq!(o.limit_bytes, Some(5));
        assert_eq!(o.request.stream, LogStream::Stderr);
        assert_eq!(o.request.since_unix, Some(now.as_second() - 100));
        assert_eq!(parse_options(&query(&[]), now).unwrap(), LogOptions::default());
    }

    /// Each bad value is refused naming its parameter, as ValidatePodLogOptions does.
    #[test]
    fn bad_values_name_the_parameter() {
        assert_eq!(err(&[("tailLines", "-1")]).parameter, "tailLines");
        assert_eq!(err(&[("tailLines", "x")]).parameter, "tailLines");
        assert_eq!(err(&[("limitBytes", "0")]).parameter, "limitBytes");
        assert_eq!(err(&[("sinceSeconds", "0")]).parameter, "sinceSeconds");
        assert_eq!(err(&[("sinceTime", "yesterday")]).parameter, "sinceTime");
        assert_eq!(
            err(&[("sinceTime", "2026-01-01T00:00:00Z"), ("sinceSeconds", "5")]).parameter,
            "sinceSeconds"
        );
        assert_eq!(err(&[("follow", "maybe")]).parameter, "follow");
        assert_eq!(err(&[("stream", "Both")]).parameter, "stream");
        let e = err(&[("stream", "Stdout"), ("tailLines", "1")]);
        assert_eq!(
            e.to_string(),
            "stream: tailLines and specific stream are mutually exclusive for now"
        );
    }

    /// `limitBytes` cuts the stream at the limit, inside a chunk.
    #[tokio::test]
    async fn limit_cuts_inside_a_chunk() {
        let chunks = futures::stream::iter(["abc", "def", "ghi"].map(|s| Ok::<_, ()>(Bytes::from(s)))).boxed();
        let got: Vec<Bytes> = limited(chunks, 5).map(Result::unwrap).collect().await;
        assert_eq!(got, [Bytes::from("abc"), Bytes::from("de")]);
    }
}
