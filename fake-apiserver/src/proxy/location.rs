//! Where kube-apiserver sends a pod subresource request, and with which query: the options a
//! client sends the API server (`PodExecOptions`, `PodAttachOptions`, `PodPortForwardOptions`,
//! `PodLogOptions`) decoded from the query as apimachinery's parameter codec decodes them, and
//! the kubelet URL built as `pkg/registry/core/pod/strategy.go` builds it (`ExecLocation`,
//! `AttachLocation`, `PortForwardLocation`, `LogLocation`, `streamParams`,
//! `validateContainer`). Pure: no I/O, so the table test below pins the URLs.
//!
//! The kubelet's names differ from the client's: `stdin=true` from kubectl reaches the kubelet
//! as `input=1`, `stdout` as `output=1`, `stderr` as `error=1`, a port-forward's `ports=80` as
//! `port=80`; `container` moves into the path; a log's `insecureSkipTLSVerifyBackend` only
//! picks the transport. Queries are written as Go's `url.Values.Encode`: keys sorted, each
//! value escaped with `url.QueryEscape`.

use serde_json::Value;

use crate::error::{ApiError, Cause};

/// A query string's pairs in order, as Go's `url.ParseQuery` reads them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query(Vec<(String, String)>);

impl Query {
    /// Parse `a=1&b=2` (`+` is a space, `%XX` escapes; pairs that do not decode are skipped).
    pub fn parse(raw: &str) -> Self {
        Self(
            actix_web::web::Query::<Vec<(String, String)>>::from_query(raw)
                .map(actix_web::web::Query::into_inner)
                .unwrap_or_default(),
        )
    }

    /// Every value of `key`, in order.
    pub fn values<'q>(&'q self, key: &'q str) -> impl Iterator<Item = &'q str> + 'q {
        self.0.iter().filter(move |(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// The first value of `key` (`url.Values.Get`), which the parameter codec converts.
    pub fn first(&self, key: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// apimachinery's `Convert_Slice_string_To_bool`: absent, `0` and `false` (any case) are
    /// false; anything else, the empty string too, is true.
    fn flag(&self, key: &str) -> bool {
        self.first(key)
            .is_some_and(|v| v != "0" && !v.eq_ignore_ascii_case("false"))
    }

    /// `Convert_Slice_string_To_Pointer_int64`: `strconv.ParseInt` of the first value; its
    /// error text is what the API server's 400 says.
    fn int64(&self, key: &str) -> Result<Option<i64>, ApiError> {
        self.first(key)
            .map(|v| {
                v.parse::<i64>().map_err(|e| {
                    let why = if matches!(
                        e.kind(),
                        std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow
                    ) {
                        "value out of range"
                    } else {
                        "invalid syntax"
                    };
                    ApiError::bad_request(format!("strconv.ParseInt: parsing {v:?}: {why}"))
                })
            })
            .transpose()
    }
}

/// Go's `url.QueryEscape`: letters, digits and `-_.~` stay, a space is `+`, the rest `%XX`.
pub fn query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// Go's `url.Values.Encode`: keys sorted, each key's values in the order added.
pub fn encode(pairs: &[(&str, String)]) -> String {
    let mut keys: Vec<&str> = pairs.iter().map(|(k, _)| *k).collect();
    keys.sort_unstable();
    keys.dedup();
    let mut out = Vec::new();
    for key in keys {
        for (_, value) in pairs.iter().filter(|(k, _)| *k == key) {
            out.push(format!("{}={}", query_escape(key), query_escape(value)));
        }
    }
    out.join("&")
}

/// `PodExecOptions` / `PodAttachOptions` (attach has no `command`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamOptions {
    /// `container`.
    pub container: String,
    /// `command`, every value in order.
    pub command: Vec<String>,
    /// `stdin`.
    pub stdin: bool,
    /// `stdout`.
    pub stdout: bool,
    /// `stderr`.
    pub stderr: bool,
    /// `tty`.
    pub tty: bool,
}

impl StreamOptions {
    /// Decode the API request's query.
    pub fn decode(query: &Query) -> Self {
        Self {
            container: query.first("container").unwrap_or_default().to_string(),
            command: query.values("command").map(str::to_string).collect(),
            stdin: query.flag("stdin"),
            stdout: query.flag("stdout"),
            stderr: query.flag("stderr"),
            tty: query.flag("tty"),
        }
    }

    /// `streamParams`: `input`, `output`, `error`, `tty` as `1` when set (kubelet's
    /// `ExecStdinParam` …), then each `command` (exec only).
    fn params(&self, with_command: bool) -> Vec<(&'static str, String)> {
        let mut params = Vec::new();
        for (name, on) in [
            ("input", self.stdin),
            ("output", self.stdout),
            ("error", self.stderr),
            ("tty", self.tty),
        ] {
            if on {
                params.push((name, "1".to_string()));
            }
        }
        if with_command {
            params.extend(self.command.iter().map(|c| ("command", c.clone())));
        }
        params
    }
}

/// `PodPortForwardOptions`: `ports`, each value a comma-separated list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PortForwardOptions {
    /// The ports asked for.
    pub ports: Vec<u16>,
}

impl PortForwardOptions {
    /// `Convert_Slice_string_To_Slice_int32`: every value split on commas, each a 16-bit
    /// unsigned number (`strconv.ParseUint(v, 10, 16)`), or a 400.
    pub fn decode(query: &Query) -> Result<Self, ApiError> {
        let mut ports = Vec::new();
        for value in query.values("ports") {
            for part in value.split(',') {
                let port = part.parse::<u16>().map_err(|e| {
                    let why = if matches!(e.kind(), std::num::IntErrorKind::PosOverflow) {
                        "value out of range"
                    } else {
                        "invalid syntax"
                    };
                    ApiError::bad_request(format!(
                        "cannot convert to []int32: strconv.ParseUint: parsing {part:?}: {why}"
                    ))
                })?;
                ports.push(port);
            }
        }
        Ok(Self { ports })
    }
}

/// `PodLogOptions`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogOptions {
    /// `container`.
    pub container: String,
    /// `follow`.
    pub follow: bool,
    /// `previous`.
    pub previous: bool,
    /// `sinceSeconds`.
    pub since_seconds: Option<i64>,
    /// `sinceTime`, as Go formats the decoded time again (RFC 3339 to the second, UTC;
    /// `0001-01-01T00:00:00Z` for the zero time an empty value decodes to).
    pub since_time: Option<String>,
    /// `timestamps`.
    pub timestamps: bool,
    /// `tailLines`.
    pub tail_lines: Option<i64>,
    /// `limitBytes`.
    pub limit_bytes: Option<i64>,
    /// `insecureSkipTLSVerifyBackend`: picks the transport, never sent on.
    pub insecure_skip_tls_verify_backend: bool,
    /// `stream` (the `PodLogsQuerySplitStreams` field).
    pub stream: Option<String>,
}

impl LogOptions {
    /// Decode the query as the parameter codec does; a value that does not convert is a 400
    /// with Go's conversion error (`handlers/get.go` `GetResourceWithOptions`).
    pub fn decode(query: &Query) -> Result<Self, ApiError> {
        let since_time = query
            .first("sinceTime")
            .map(|v| match v {
                // `metav1.Time.UnmarshalQueryParameter`: the zero time.
                "" | "null" => Ok("0001-01-01T00:00:00Z".to_string()),
                v => v
                    .parse::<jiff::Timestamp>()
                    .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
                    .map_err(|_| {
                        ApiError::bad_request(format!(
                            "parsing time {v:?} as \"2006-01-02T15:04:05Z07:00\": cannot parse {v:?} as \"2006\""
                        ))
                    }),
            })
            .transpose()?;
        Ok(Self {
            container: query.first("container").unwrap_or_default().to_string(),
            follow: query.flag("follow"),
            previous: query.flag("previous"),
            since_seconds: query.int64("sinceSeconds")?,
            since_time,
            timestamps: query.flag("timestamps"),
            tail_lines: query.int64("tailLines")?,
            limit_bytes: query.int64("limitBytes")?,
            insecure_skip_tls_verify_backend: query.flag("insecureSkipTLSVerifyBackend"),
            stream: query.first("stream").map(str::to_string),
        })
    }

    /// `ValidatePodLogOptions` (`pkg/apis/core/validation/validation.go`), with
    /// `PodLogsQuerySplitStreams` off as kube-apiserver has it by default (alpha since 1.32):
    /// a 422 `PodLogOptions "<pod>" is invalid: …`.
    pub fn validate(&self, pod: &str) -> Result<(), ApiError> {
        let mut causes = Vec::new();
        if let Some(n) = self.tail_lines.filter(|n| *n < 0) {
            causes.push(Cause::invalid(
                "tailLines",
                &Value::from(n),
                "must be greater than or equal to 0",
            ));
        }
        if let Some(n) = self.limit_bytes.filter(|n| *n < 1) {
            causes.push(Cause::invalid("limitBytes", &Value::from(n), "must be greater than 0"));
        }
        match (self.since_seconds, &self.since_time) {
            (Some(_), Some(_)) => causes.push(Cause::forbidden(
                "",
                "at most one of `sinceTime` or `sinceSeconds` may be specified",
            )),
            (Some(n), None) if n < 1 => causes.push(Cause::invalid(
                "sinceSeconds",
                &Value::from(n),
                "must be greater than 0",
            )),
            _ => {}
        }
        if self.stream.is_some() {
            causes.push(Cause::forbidden("stream", "may not be specified"));
        }
        if causes.is_empty() {
            Ok(())
        } else {
            Err(ApiError::invalid("PodLogOptions", pod, causes))
        }
    }

    /// `LogLocation`'s query: the options set, under the kubelet's names (the same as the
    /// client's here), without `container` and `insecureSkipTLSVerifyBackend`.
    fn params(&self) -> Vec<(&'static str, String)> {
        let mut params = Vec::new();
        if self.follow {
            params.push(("follow", "true".to_string()));
        }
        if self.previous {
            params.push(("previous", "true".to_string()));
        }
        if self.timestamps {
            params.push(("timestamps", "true".to_string()));
        }
        if let Some(n) = self.since_seconds {
            params.push(("sinceSeconds", n.to_string()));
        }
        if let Some(t) = &self.since_time {
            params.push(("sinceTime", t.clone()));
        }
        if let Some(n) = self.tail_lines {
            params.push(("tailLines", n.to_string()));
        }
        if let Some(n) = self.limit_bytes {
            params.push(("limitBytes", n.to_string()));
        }
        params
    }
}

/// Where a request goes: the node's kubelet, and the path with its query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// `spec.nodeName`.
    pub node: String,
    /// `/exec/ns/pod/container?…`.
    pub path_and_query: String,
}

fn with_query(path: String, query: String) -> String {
    if query.is_empty() {
        path
    } else {
        format!("{path}?{query}")
    }
}

fn names(containers: &Value) -> impl Iterator<Item = &str> {
    containers
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str())
}

fn meta(pod: &Value) -> (&str, &str, &str) {
    (
        pod["metadata"]["namespace"].as_str().unwrap_or_default(),
        pod["metadata"]["name"].as_str().unwrap_or_default(),
        pod["spec"]["nodeName"].as_str().unwrap_or_default(),
    )
}

/// `validateContainer`: the container asked for must be one of the pod's (init, regular and
/// ephemeral); none asked for is the only regular container, or a 400 listing every container
/// in `VisitContainers` order (init, regular, ephemeral).
pub fn validate_container(pod: &Value, container: &str) -> Result<String, ApiError> {
    let name = pod["metadata"]["name"].as_str().unwrap_or_default();
    let spec = &pod["spec"];
    let all = || {
        names(&spec["initContainers"])
            .chain(names(&spec["containers"]))
            .chain(names(&spec["ephemeralContainers"]))
    };
    if !container.is_empty() {
        return if all().any(|c| c == container) {
            Ok(container.to_string())
        } else {
            Err(ApiError::bad_request(format!(
                "container {container} is not valid for pod {name}"
            )))
        };
    }
    let regular: Vec<&str> = names(&spec["containers"]).collect();
    match regular.as_slice() {
        [only] => Ok((*only).to_string()),
        [] => Err(ApiError::bad_request(format!(
            "a container name must be specified for pod {name}"
        ))),
        _ => Err(ApiError::bad_request(format!(
            "a container name must be specified for pod {name}, choose one of: [{}]",
            all().collect::<Vec<_>>().join(" ")
        ))),
    }
}

fn bound(pod: &Value) -> Result<&str, ApiError> {
    let (_, name, node) = meta(pod);
    if node.is_empty() {
        return Err(ApiError::bad_request(format!(
            "pod {name} does not have a host assigned"
        )));
    }
    Ok(node)
}

/// `ExecLocation` (`exec`) and `AttachLocation` (`attach`): `/<sub>/<ns>/<pod>/<container>`
/// with `streamParams`.
pub fn stream_location(pod: &Value, sub: &str, opts: &StreamOptions) -> Result<Location, ApiError> {
    let container = validate_container(pod, &opts.container)?;
    let node = bound(pod)?;
    let (ns, name, _) = meta(pod);
    let query = encode(&opts.params(sub == "exec"));
    Ok(Location {
        node: node.to_string(),
        path_and_query: with_query(format!("/{sub}/{ns}/{name}/{container}"), query),
    })
}

/// `PortForwardLocation`: `/portForward/<ns>/<pod>`, the ports (if any) as one `port` value.
pub fn port_forward_location(pod: &Value, opts: &PortForwardOptions) -> Result<Location, ApiError> {
    let node = bound(pod)?;
    let (ns, name, _) = meta(pod);
    let query = if opts.ports.is_empty() {
        String::new()
    } else {
        let ports: Vec<String> = opts.ports.iter().map(u16::to_string).collect();
        encode(&[("port", ports.join(","))])
    };
    Ok(Location {
        node: node.to_string(),
        path_and_query: with_query(format!("/portForward/{ns}/{name}"), query),
    })
}

/// `LogLocation`: `/containerLogs/<ns>/<pod>/<container>` with the options set; `None` for a
/// pod on no node yet (the API server then streams nothing).
pub fn log_location(pod: &Value, opts: &LogOptions) -> Result<Option<Location>, ApiError> {
    let container = validate_container(pod, &opts.container)?;
    let (ns, name, node) = meta(pod);
    if node.is_empty() {
        return Ok(None);
    }
    Ok(Some(Location {
        node: node.to_string(),
        path_and_query: with_query(
            format!("/containerLogs/{ns}/{name}/{container}"),
            encode(&opts.params()),
        ),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(node: &str, init: &[&str], containers: &[&str], ephemeral: &[&str]) -> Value {
        let c = |names: &[&str]| names.iter().map(|n| json!({"name": n})).collect::<Vec<_>>();
        json!({
            "metadata": {"namespace": "ns", "name": "test"},
            "spec": {"nodeName": node, "initContainers": c(init), "containers": c(containers),
                     "ephemeralContainers": c(ephemeral)},
        })
    }

    fn err(r: Result<impl std::fmt::Debug, ApiError>) -> (u16, String) {
        let e = r.expect_err("an error");
        (e.code, e.message)
    }

    /// `TestCheckLogLocation` of upstream's `pkg/registry/core/pod/strategy_test.go`: the
    /// container defaulting and its messages, the init and ephemeral containers listed (in
    /// `VisitContainers` order) when a name is needed.
    #[test]
    fn log_locations_as_upstreams_strategy_test() {
        let none = LogOptions::default();
        let named = |c: &str| LogOptions {
            container: c.to_string(),
            ..LogOptions::default()
        };
        let url = |p: &Value, o: &LogOptions| log_location(p, o).unwrap().unwrap().path_and_query;
        // "simple"
        assert_eq!(
            url(&pod("foo", &[], &["mycontainer"], &[]), &none),
            "/containerLogs/ns/test/mycontainer"
        );
        // "insecure": the option picks a transport and is not sent on.
        let insecure = LogOptions {
            insecure_skip_tls_verify_backend: true,
            ..LogOptions::default()
        };
        assert_eq!(
            url(&pod("foo", &[], &["mycontainer"], &[]), &insecure),
            "/containerLogs/ns/test/mycontainer"
        );
        // "missing container"
        assert_eq!(
            err(log_location(&pod("", &[], &[], &[]), &none)),
            (400, "a container name must be specified for pod test".into())
        );
        // "choice of two containers"
        assert_eq!(
            err(log_location(&pod("", &[], &["container1", "container2"], &[]), &none)),
            (
                400,
                "a container name must be specified for pod test, choose one of: [container1 container2]".into()
            )
        );
        // "initcontainers"
        assert_eq!(
            err(log_location(&pod("", &["initcontainer1"], &["container1", "container2"], &[]), &none)),
            (
                400,
                "a container name must be specified for pod test, choose one of: [initcontainer1 container1 container2]".into()
            )
        );
        // with an ephemeral container
        assert_eq!(
            err(log_location(
                &pod("", &["initcontainer1"], &["container1", "container2"], &["debugger"]),
                &none
            )),
            (
                400,
                "a container name must be specified for pod test, choose one of: [initcontainer1 container1 container2 debugger]".into()
            )
        );
        // "bad container"
        assert_eq!(
            err(log_location(
                &pod("", &[], &["container1", "container2"], &[]),
                &named("unknown")
            )),
            (400, "container unknown is not valid for pod test".into())
        );
        // "good with two containers"
        assert_eq!(
            url(
                &pod("foo", &[], &["container1", "container2"], &[]),
                &named("container2")
            ),
            "/containerLogs/ns/test/container2"
        );
        // No node yet: no location, no error.
        assert_eq!(log_location(&pod("", &[], &["c"], &[]), &none).unwrap(), None);
    }

    /// `TestPortForwardLocation`: no host is a 400; no ports, no query; ports as one `port`.
    #[test]
    fn port_forward_locations_as_upstreams_strategy_test() {
        let none = PortForwardOptions::default();
        assert_eq!(
            err(port_forward_location(&pod("", &[], &[], &[]), &none)),
            (400, "pod test does not have a host assigned".into())
        );
        let p = pod("node1", &[], &[], &[]);
        assert_eq!(
            port_forward_location(&p, &none).unwrap().path_and_query,
            "/portForward/ns/test"
        );
        let ports = PortForwardOptions { ports: vec![80] };
        assert_eq!(
            port_forward_location(&p, &ports).unwrap().path_and_query,
            "/portForward/ns/test?port=80"
        );
        let ports = PortForwardOptions::decode(&Query::parse("ports=80&ports=443,8080")).unwrap();
        assert_eq!(
            port_forward_location(&p, &ports).unwrap().path_and_query,
            "/portForward/ns/test?port=80%2C443%2C8080"
        );
        assert_eq!(
            err(PortForwardOptions::decode(&Query::parse("ports=http"))),
            (
                400,
                "cannot convert to []int32: strconv.ParseUint: parsing \"http\": invalid syntax".into()
            )
        );
    }

    /// API request → kubelet URL, for the requests kubectl, client-go and the Python client
    /// send: `streamParams` renames the streams and sorts the keys as `url.Values.Encode`.
    #[test]
    fn api_requests_map_onto_kubelet_urls() {
        let p = pod("n1", &["init"], &["app", "side"], &["debugger"]);
        let single = pod("n1", &[], &["app"], &[]);
        for (sub, pod, query, url) in [
            // kubectl exec -i -t web -c app -- sh -c 'echo hi'
            (
                "exec",
                &p,
                "command=sh&command=-c&command=echo+hi&container=app&stdin=true&stdout=true&tty=true",
                "/exec/ns/test/app?command=sh&command=-c&command=echo+hi&input=1&output=1&tty=1",
            ),
            // kubectl exec web -- ls (one container: defaulted)
            (
                "exec",
                &single,
                "command=ls&stdout=true&stderr=true",
                "/exec/ns/test/app?command=ls&error=1&output=1",
            ),
            // the Python client's booleans, and `0`/`false` that mean no
            (
                "exec",
                &single,
                "command=date&stderr=True&stdin=False&stdout=True&tty=0",
                "/exec/ns/test/app?command=date&error=1&output=1",
            ),
            // tty with stderr: both passed on (the kubelet drops stderr)
            (
                "exec",
                &single,
                "command=sh&stdin=1&stdout=1&stderr=1&tty=1",
                "/exec/ns/test/app?command=sh&error=1&input=1&output=1&tty=1",
            ),
            // odd bytes in a command are escaped as url.QueryEscape
            (
                "exec",
                &single,
                "command=printf&command=a%2Fb%26c%3D%25+%7E",
                "/exec/ns/test/app?command=printf&command=a%2Fb%26c%3D%25+~",
            ),
            // kubectl attach -i -t (no command is sent on, even if given)
            (
                "attach",
                &p,
                "container=debugger&stdin=true&stdout=true&tty=true&command=x",
                "/attach/ns/test/debugger?input=1&output=1&tty=1",
            ),
            // an attach asking for nothing: no query at all
            ("attach", &single, "", "/attach/ns/test/app"),
        ] {
            let query = Query::parse(query);
            let location = stream_location(pod, sub, &StreamOptions::decode(&query)).unwrap();
            assert_eq!(
                (location.node.as_str(), location.path_and_query.as_str()),
                ("n1", url),
                "{query:?}"
            );
        }
        assert_eq!(
            err(stream_location(
                &pod("", &[], &["app"], &[]),
                "exec",
                &StreamOptions::default()
            )),
            (400, "pod test does not have a host assigned".into())
        );
        assert_eq!(
            err(stream_location(&p, "exec", &StreamOptions::default())),
            (
                400,
                "a container name must be specified for pod test, choose one of: [init app side debugger]".into()
            )
        );
    }

    /// `PodLogOptions` from the query (first values, Go's conversions) to `LogLocation`'s
    /// query, and `ValidatePodLogOptions`' 422s.
    #[test]
    fn log_options_decode_validate_and_encode_as_upstream() {
        let p = pod("n1", &[], &["app"], &[]);
        for (query, url) in [
            (
                "follow=true&tailLines=10&timestamps=1&container=app&insecureSkipTLSVerifyBackend=true",
                "/containerLogs/ns/test/app?follow=true&tailLines=10&timestamps=true",
            ),
            (
                "previous=yes&limitBytes=5&sinceSeconds=60&follow=false",
                "/containerLogs/ns/test/app?limitBytes=5&previous=true&sinceSeconds=60",
            ),
            (
                "sinceTime=2026-01-02T03:04:05.678%2B01:00",
                "/containerLogs/ns/test/app?sinceTime=2026-01-02T02%3A04%3A05Z",
            ),
            (
                "sinceTime=",
                "/containerLogs/ns/test/app?sinceTime=0001-01-01T00%3A00%3A00Z",
            ),
            ("tailLines=3&tailLines=9", "/containerLogs/ns/test/app?tailLines=3"),
        ] {
            let opts = LogOptions::decode(&Query::parse(query)).unwrap();
            opts.validate("test").unwrap();
            assert_eq!(log_location(&p, &opts).unwrap().unwrap().path_and_query, url, "{query}");
        }
        assert_eq!(
            err(LogOptions::decode(&Query::parse("tailLines=ten"))),
            (400, "strconv.ParseInt: parsing \"ten\": invalid syntax".into())
        );
        for (query, message) in [
            ("tailLines=-1", "PodLogOptions \"test\" is invalid: tailLines: Invalid value: -1: must be greater than or equal to 0"),
            ("limitBytes=0", "PodLogOptions \"test\" is invalid: limitBytes: Invalid value: 0: must be greater than 0"),
            ("sinceSeconds=0", "PodLogOptions \"test\" is invalid: sinceSeconds: Invalid value: 0: must be greater than 0"),
            (
                "sinceSeconds=5&sinceTime=2026-01-01T00:00:00Z",
                "PodLogOptions \"test\" is invalid: : Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified",
            ),
            ("stream=Stdout", "PodLogOptions \"test\" is invalid: stream: Forbidden: may not be specified"),
        ] {
            let opts = LogOptions::decode(&Query::parse(query)).unwrap();
            assert_eq!(err(opts.validate("test")), (422, message.to_string()), "{query}");
        }
    }

    /// `url.QueryEscape` and `url.Values.Encode`.
    #[test]
    fn queries_are_encoded_as_go_encodes_them() {
        assert_eq!(query_escape("a b/c?d=e&f~g.h-i_j%"), "a+b%2Fc%3Fd%3De%26f~g.h-i_j%25");
        assert_eq!(query_escape("é"), "%C3%A9");
        assert_eq!(
            encode(&[
                ("tty", "1".into()),
                ("command", "b".into()),
                ("command", "a".into()),
                ("error", "1".into())
            ]),
            "command=b&command=a&error=1&tty=1"
        );
        assert_eq!(encode(&[]), "");
    }
}
