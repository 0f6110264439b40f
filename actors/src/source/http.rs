//! HttpSource: static pods from a URL (`--manifest-url`, kubelet's `pkg/kubelet/config/http.go`).
//!
//! | Trigger                     | Effect                                                   |
//! |-----------------------------|----------------------------------------------------------|
//! | start, every `httpCheckFrequency` | GET the URL (10 s timeout, 10 MiB); a changed body is parsed and sent |
//! | GetActorState               | debug snapshot                                           |
//!
//! The body is one Pod or a PodList, in JSON or YAML; pods are defaulted as file pods are (name
//! `<name>-<node>`, UID from content, node and URL) with `config.source: http`. A failed poll
//! (non-200, timeout, unreadable body) keeps the pods of the last good one.

use std::collections::HashMap;
use std::time::Duration;

use actix::prelude::*;
use dockerlet_messages::source::{DesiredPod, ManifestError, PodSource, SourcePodsChanged};
use dockerlet_messages::PodUid;
use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use crate::inspect::Inspect;

use dockerlet_host::manifest_url::ManifestUrl;
use dockerlet_pod::annotations::CONFIG_SEEN;
use dockerlet_pod::manifest::{self, StaticSource};

/// Settings of the URL source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpSourceConfig {
    /// `--manifest-url`.
    pub url: String,
    /// `--manifest-url-header`.
    pub headers: Vec<(String, String)>,
    /// `httpCheckFrequency` (20 s).
    pub frequency: Duration,
}

/// The URL source actor.
pub struct HttpSource {
    /// Settings.
    config: HttpSourceConfig,
    /// This node's name.
    node_name: String,
    /// Where the pod set goes.
    sink: Recipient<SourcePodsChanged>,
    /// The URL's client.
    url: ManifestUrl,
    /// The last body read; an identical one is not parsed again.
    last_body: Option<Vec<u8>>,
    /// When each pod was first seen.
    seen: HashMap<PodUid, String>,
    /// A poll is in flight.
    polling: bool,
    /// Polls done.
    polls: u64,
    /// The last failure.
    last_error: Option<String>,
    /// Messages handled.
    handled: u64,
}

impl HttpSource {
    /// A source for `config.url`.
    pub fn new(config: HttpSourceConfig, node_name: String, sink: Recipient<SourcePodsChanged>) -> Self {
        HttpSource {
            url: ManifestUrl::new(config.url.clone(), config.headers.clone()),
            config,
            node_name,
            sink,
            last_body: None,
            seen: HashMap::new(),
            polling: false,
            polls: 0,
            last_error: None,
            handled: 0,
        }
    }

    fn poll(&mut self, ctx: &mut Context<Self>) {
        if self.polling {
            return;
        }
        self.polling = true;
        let future = self.url.fetch();
        ctx.spawn(future.into_actor(self).map(|result, act, _| {
            act.polling = false;
            act.polls += 1;
            match result {
                Ok(body) => act.apply(body),
                Err(e) => {
                    let error = crate::error_chain(&e);
                    tracing::warn!(url = %act.config.url, %error, "manifest URL poll failed; keeping its pods");
                    act.last_error = Some(error);
                }
            }
        }));
    }

    fn apply(&mut self, body: Vec<u8>) {
        if self.last_body.as_ref() == Some(&body) {
            return;
        }
        let url = self.config.url.clone();
        let (pods, errors) = match manifest::parse_url_body(&body) {
            Ok(pods) => {
                let mut valid = Vec::new();
                let mut errors = Vec::new();
                for pod in pods {
                    match manifest::validate(&pod) {
                        Ok(()) => valid.push(manifest::default_static_pod_from(
                            pod,
                            &self.node_name,
                            StaticSource::Url(&url),
                        )),
                        Err(e) => errors.push(ManifestError {
                            file: url.clone(),
                            reason: e.to_string(),
                        }),
                    }
                }
                (valid, errors)
            }
            Err(e) => {
                // Unreadable: keep the last good pods, report the error.
                self.last_error = Some(e.to_string());
                tracing::error!(url = %url, error = %e, "invalid manifest URL body");
                return;
            }
        };
        self.last_body = Some(body);
        self.last_error = errors.first().map(|e| e.reason.clone());
        self.seen
            .retain(|uid, _| pods.iter().any(|p| p.metadata.uid.as_deref() == Some(&uid.0)));
        let pods = pods
            .into_iter()
            .map(|mut pod| {
                let uid = PodUid::of(&pod);
                let seen = self
                    .seen
                    .entry(uid.clone())
                    .or_insert_with(|| Timestamp::now().to_string())
                    .clone();
                pod.metadata
                    .annotations
                    .get_or_insert_with(Default::default)
                    .insert(CONFIG_SEEN.to_string(), seen);
                DesiredPod::new(std::sync::Arc::new(pod), PodSource::Http, url.clone())
            })
            .collect();
        self.sink.do_send(SourcePodsChanged {
            source: PodSource::Http,
            pods,
            errors,
        });
    }
}

impl Actor for HttpSource {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        self.poll(ctx);
        ctx.run_interval(self.config.frequency, |act, ctx| act.poll(ctx));
    }
}

impl Inspect for HttpSource {
    const KIND: &'static str = "HttpSource";
    const NAME: &'static str = "http";

    fn handled(&mut self) -> &mut u64 {
        &mut self.handled
    }

    fn instance(&self) -> String {
        self.config.url.clone()
    }

    fn last_error(&self) -> Option<String> {
        self.last_error.clone()
    }

    fn detail(&self) -> serde_json::Value {
        json!({ "polls": self.polls, "pods": self.seen.len() })
    }
}

crate::supervised!(HttpSource);
