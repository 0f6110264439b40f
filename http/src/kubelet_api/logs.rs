//! `GET /containerLogs/{namespace}/{pod}/{container}`: kubelet's `getContainerLogs`
//! (`pkg/kubelet/server/server.go`): the query decoded into `PodLogOptions` as
//! `legacyscheme.ParameterCodec` decodes it (the first value of each parameter; booleans true
//! unless `0` or `false`; the legacy `tail`), refused with kubelet's answers (400
//! `{"message": "Unable to decode query."}`, 422 `{"message": "Invalid request."}` when
//! `ValidatePodLogOptions` of `pkg/apis/core/v1/validation` fails; the detail goes to the log),
//! the container found in the pod's status, and Docker's log streamed through without being
//! read ahead. `stream` is served as kubelet serves it with `PodLogsQuerySplitStreams` on.

use actix_web::{web, HttpRequest, HttpResponse};
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

/// Why kubelet refuses a log query. Only the status and a fixed body reach the client, as
/// kubelet answers; the parameter and reason are for the agent's log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogQueryError {
    /// The query does not decode into `PodLogOptions` (400).
    #[error("cannot decode {parameter}: {reason}")]
    Undecodable {
        /// The parameter (`tailLines`).
        parameter: &'static str,
        /// Why.
        reason: String,
    },
    /// `ValidatePodLogOptions` refuses the options (422).
    #[error("{parameter}: {reason}")]
    Invalid {
        /// The parameter, or `""` for a rule over two of them (as kubelet's field path).
        parameter: &'static str,
        /// Why.
        reason: String,
    },
}

impl LogQueryError {
    /// The parameter named.
    pub fn parameter(&self) -> &'static str {
        match self {
            Self::Undecodable { parameter, .. } | Self::Invalid { parameter, .. } => parameter,
        }
    }

    /// kubelet's answer.
    pub fn to_api_error(&self) -> ApiError {
        match self {
            Self::Undecodable { .. } => ApiError::BadRequest(r#"{"message": "Unable to decode query."}"#.into()),
            Self::Invalid { .. } => ApiError::Unprocessable(r#"{"message": "Invalid request."}"#.into()),
        }
    }
}

fn invalid(parameter: &'static str, reason: impl Into<String>) -> LogQueryError {
    LogQueryError::Invalid {
        parameter,
        reason: reason.into(),
    }
}

/// The first value of `name` (url.Values.Get).
fn first<'q>(query: &'q [(String, String)], name: &str) -> Option<&'q str> {
    query.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// apimachinery's `Convert_Slice_string_To_bool`: absent, `0` and `false` (any case) are false,
/// anything else (the empty string too) is true.
fn boolean(value: Option<&str>) -> bool {
    value.is_some_and(|v| v != "0" && !v.eq_ignore_ascii_case("false"))
}

/// `Convert_Slice_string_To_Pointer_int64`: Go's `strconv.ParseInt(v, 10, 64)`.
fn integer(value: Option<&str>, parameter: &'static str) -> Result<Option<i64>, LogQueryError> {
    value
        .map(|v| {
            v.parse::<i64>().map_err(|_| LogQueryError::Undecodable {
                parameter,
                reason: format!("strconv.ParseInt: parsing {v:?}: invalid syntax"),
            })
        })
        .transpose()
}

/// `metav1.Time.UnmarshalQueryParameter`: empty or `null` is the zero time (all of the log),
/// otherwise RFC 3339. `Some(None)` is the zero time.
fn time(value: Option<&str>) -> Result<Option<Option<Timestamp>>, LogQueryError> {
    value
        .map(|v| match v {
            "" | "null" => Ok(None),
            v => v
                .parse::<Timestamp>()
                .map(Some)
                .map_err(|e| LogQueryError::Undecodable {
                    parameter: "sinceTime",
                    reason: format!("{v:?} is not an RFC 3339 time: {e}"),
                }),
        })
        .transpose()
}

/// Decode and validate the query as kubelet does: the legacy `tail` (`all`: no limit) becomes
/// `tailLines`; then `tailLines` ≥ 0, `limitBytes` ≥ 1, `sinceSeconds` ≥ 1, at most one of
/// `sinceSeconds` and `sinceTime`, `stream` one of `All`/`Stdout`/`Stderr` and not with
/// `tailLines`.
pub fn parse_options(query: &[(String, String)], now: Timestamp) -> Result<LogOptions, LogQueryError> {
    let tail = first(query, "tail").filter(|t| !t.is_empty());
    let tail_lines = match tail {
        Some("all") => None,
        Some(tail) => Some(tail),
        None => first(query, "tailLines"),
    };
    let since_seconds = integer(first(query, "sinceSeconds"), "sinceSeconds")?;
    let since_time = time(first(query, "sinceTime"))?;
    let tail_lines = integer(tail_lines, "tailLines")?;
    let limit_bytes = integer(first(query, "limitBytes"), "limitBytes")?;
    if tail_lines.is_some_and(|n| n < 0) {
        return Err(invalid("tailLines", "must be greater than or equal to 0"));
    }
    if limit_bytes.is_some_and(|n| n < 1) {
        return Err(invalid("limitBytes", "must be greater than 0"));
    }
    match (since_seconds, since_time) {
        (Some(_), Some(_)) => {
            return Err(invalid(
                "",
                "at most one of `sinceTime` or `sinceSeconds` may be specified",
            ))
        }
        (Some(n), None) if n < 1 => return Err(invalid("sinceSeconds", "must be greater than 0")),
        _ => {}
    }
    let stream = match first(query, "stream") {
        None | Some("All") => LogStream::All,
        Some("Stdout") => LogStream::Stdout,
        Some("Stderr") => LogStream::Stderr,
        Some(other) => {
            return Err(invalid(
                "stream",
                format!("Unsupported value: {other:?}: supported values: \"All\", \"Stderr\", \"Stdout\""),
            ))
        }
    };
    if stream != LogStream::All && tail_lines.is_some() {
        return Err(invalid(
            "",
            "`tailLines` and specific `stream` are mutually exclusive for now",
        ));
    }
    let since_unix = match since_time {
        Some(t) => t.map(|t| t.as_second()),
        None => since_seconds.map(|s| now.as_second().saturating_sub(s)),
    };
    Ok(LogOptions {
        request: LogRequest {
            follow: boolean(first(query, "follow")),
            timestamps: boolean(first(query, "timestamps")),
            tail_lines: tail_lines.map(|n| n as u64),
            since_unix,
            stream,
        },
        previous: boolean(first(query, "previous")),
        limit_bytes: limit_bytes.map(|n| n as u64),
    })
}

/// The handler.
pub async fn container_logs(
    api: web::Data<KubeletApi>,
    path: web::Path<(String, String, String)>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let (namespace, pod_name, container) = path.into_inner();
    let query = web::Query::<Vec<(String, String)>>::from_query(req.query_string())
        .map(web::Query::into_inner)
        .unwrap_or_default();
    let options = parse_options(&query, Timestamp::now()).map_err(|e| {
        tracing::info!(pod = %pod_name, namespace = %namespace, container = %container, error = %e,
            "container log request refused");
        e.to_api_error()
    })?;
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

    fn query(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn err(pairs: &[(&str, &str)]) -> LogQueryError {
        parse_options(&query(pairs), Timestamp::UNIX_EPOCH).unwrap_err()
    }

    /// Valid options map onto the runtime's request; `sinceSeconds` counts back from now;
    /// booleans decode as apimachinery's query conversion does (anything but `0`/`false` is
    /// true); the first of repeated values counts.
    #[test]
    fn options_map_onto_the_request() {
        let now: Timestamp = "2026-01-01T00:01:40Z".parse().unwrap();
        let o = parse_options(
            &query(&[
                ("follow", "true"),
                ("timestamps", "1"),
                ("tailLines", "2"),
                ("tailLines", "7"),
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
                ("previous", "yes"),
                ("follow", "FALSE"),
                ("timestamps", ""),
                ("sinceTime", "2026-01-01T00:00:00Z"),
                ("limitBytes", "5"),
                ("stream", "Stderr"),
            ]),
            now,
        )
        .unwrap();
        assert!(o.previous && !o.request.follow && o.request.timestamps);
        assert_eq!(o.limit_bytes, Some(5));
        assert_eq!(o.request.stream, LogStream::Stderr);
        assert_eq!(o.request.since_unix, Some(now.as_second() - 100));
        assert_eq!(parse_options(&query(&[]), now).unwrap(), LogOptions::default());
        let zero_time = parse_options(&query(&[("sinceTime", "")]), now).unwrap();
        assert_eq!(zero_time.request.since_unix, None, "the zero time: all of the log");
    }

    /// The legacy `tail` parameter wins over `tailLines`; `all` means no limit.
    #[test]
    fn the_legacy_tail_parameter_is_read() {
        let now = Timestamp::UNIX_EPOCH;
        let tail = |pairs| parse_options(&query(pairs), now).unwrap().request.tail_lines;
        assert_eq!(tail(&[("tail", "3"), ("tailLines", "9")]), Some(3));
        assert_eq!(tail(&[("tail", "all"), ("tailLines", "9")]), None);
        assert_eq!(tail(&[("tail", ""), ("tailLines", "9")]), Some(9));
    }

    /// What does not decode is 400, what ValidatePodLogOptions refuses is 422, each with
    /// kubelet's fixed body; the parameter is named for the log.
    #[test]
    fn bad_values_are_refused_as_kubelet_refuses_them() {
        for (pairs, parameter) in [
            (&[("tailLines", "x")][..], "tailLines"),
            (&[("tailLines", "")], "tailLines"),
            (&[("sinceSeconds", "1.5")], "sinceSeconds"),
            (&[("sinceTime", "yesterday")], "sinceTime"),
        ] {
            let e = err(pairs);
            assert!(matches!(e, LogQueryError::Undecodable { .. }), "{pairs:?}: {e}");
            assert_eq!(e.parameter(), parameter);
            let api = e.to_api_error();
            assert_eq!(
                (actix_web::ResponseError::status_code(&api).as_u16(), api.to_string()),
                (400, r#"{"message": "Unable to decode query."}"#.to_string())
            );
        }
        for (pairs, parameter) in [
            (&[("tailLines", "-1")][..], "tailLines"),
            (&[("limitBytes", "0")], "limitBytes"),
            (&[("sinceSeconds", "0")], "sinceSeconds"),
            (&[("sinceTime", "2026-01-01T00:00:00Z"), ("sinceSeconds", "5")], ""),
            (&[("stream", "Both")], "stream"),
            (&[("stream", "Stdout"), ("tailLines", "1")], ""),
        ] {
            let e = err(pairs);
            assert!(matches!(e, LogQueryError::Invalid { .. }), "{pairs:?}: {e}");
            assert_eq!(e.parameter(), parameter, "{pairs:?}");
            let api = e.to_api_error();
            assert_eq!(
                (actix_web::ResponseError::status_code(&api).as_u16(), api.to_string()),
                (422, r#"{"message": "Invalid request."}"#.to_string())
            );
        }
    }

    /// `limitBytes` cuts the stream at the limit, inside a chunk.
    #[tokio::test]
    async fn limit_cuts_inside_a_chunk() {
        let chunks = futures::stream::iter(["abc", "def", "ghi"].map(|s| Ok::<_, ()>(Bytes::from(s)))).boxed();
        let got: Vec<Bytes> = limited(chunks, 5).map(Result::unwrap).collect().await;
        assert_eq!(got, [Bytes::from("abc"), Bytes::from("de")]);
    }
}
