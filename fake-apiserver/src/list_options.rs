//! The query of a list or a watch (`metav1.ListOptions`): decoded, defaulted and checked as
//! kube-apiserver does before it reads anything, then turned into where a list reads and where
//! a watch starts.
//!
//! Upstream: `staging/src/k8s.io/apiserver/pkg/endpoints/handlers/get.go` (`ListResource`
//! decodes the query, applies `SetListOptionsDefaults` and rejects what
//! `ValidateListOptions` finds), `staging/src/k8s.io/apimachinery/pkg/apis/meta/internalversion/`
//! `defaults.go` and `validation/validation.go`, `staging/src/k8s.io/apiserver/pkg/storage/`
//! `cacher/cacher.go` (`Watch`, `getStartResourceVersionForWatchLockedFunc`) and
//! `staging/src/k8s.io/apiserver/pkg/storage/etcd3/store.go` (`GetList`). The served version
//! (`/version`) has the WatchList feature on, as kube-apiserver has since 1.34.

use super::error::{ApiError, Cause};
use super::store::{Continue, ReadAt, WatchStart};
use serde_json::json;
use std::collections::HashMap;
use std::time::Duration;

const NOT_OLDER_THAN: &str = "NotOlderThan";
const EXACT: &str = "Exact";

/// The list options of one request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListOptions {
    /// `watch` (or a `/watch/` path).
    pub watch: bool,
    /// `resourceVersion`, as sent.
    pub resource_version: String,
    /// `resourceVersionMatch`, as sent.
    pub resource_version_match: String,
    /// `sendInitialEvents`, if sent.
    pub send_initial_events: Option<bool>,
    /// `allowWatchBookmarks`.
    pub allow_watch_bookmarks: bool,
    /// `continue`.
    pub continue_token: String,
    /// `limit`, when positive.
    pub limit: Option<usize>,
    /// `timeoutSeconds`, when positive.
    pub timeout: Option<Duration>,
}

/// A boolean query parameter as apimachinery's `Convert_Slice_string_To_bool` reads it: absent
/// is false, `0`, `f` and `false` (any case) are false, anything else (even empty) is true.
pub fn query_bool(query: &HashMap<String, String>, key: &str) -> Option<bool> {
    query
        .get(key)
        .map(|v| !(v == "0" || v.eq_ignore_ascii_case("f") || v.eq_ignore_ascii_case("false")))
}

fn query_int(query: &HashMap<String, String>, key: &str) -> Result<Option<i64>, ApiError> {
    query
        .get(key)
        .map(|v| {
            v.parse::<i64>()
                .map_err(|_| ApiError::bad_request(format!("{key}: invalid value \"{v}\", expected an integer")))
        })
        .transpose()
}

/// The resourceVersion a request names, as `APIObjectVersioner.ParseResourceVersion` reads it
/// (`""` and `"0"` are 0).
pub fn parse_resource_version(rv: &str) -> Result<u64, ApiError> {
    if rv.is_empty() {
        return Ok(0);
    }
    rv.parse()
        .map_err(|_| ApiError::bad_request(format!("invalid resource version: \"{rv}\"")))
}

impl ListOptions {
    /// Decodes the query; `watch_path` is a request under `/watch/`. A watch gets the WatchList
    /// defaults (`SetListOptionsDefaults`): without `sendInitialEvents` and
    /// `resourceVersionMatch`, a watch from `""` or `"0"` is one with `sendInitialEvents=true`
    /// and `resourceVersionMatch=NotOlderThan`.
    pub fn parse(query: &HashMap<String, String>, watch_path: bool) -> Result<Self, ApiError> {
        let text = |key: &str| query.get(key).cloned().unwrap_or_default();
        let mut opts = Self {
            watch: watch_path || query_bool(query, "watch").unwrap_or(false),
            resource_version: text("resourceVersion"),
            resource_version_match: text("resourceVersionMatch"),
            send_initial_events: query_bool(query, "sendInitialEvents"),
            allow_watch_bookmarks: query_bool(query, "allowWatchBookmarks").unwrap_or(false),
            continue_token: text("continue"),
            limit: query_int(query, "limit")?.filter(|l| *l > 0).map(|l| l as usize),
            timeout: query_int(query, "timeoutSeconds")?
                .filter(|t| *t > 0)
                .map(|t| Duration::from_secs(t as u64)),
        };
        let legacy = opts.resource_version.is_empty() || opts.resource_version == "0";
        if opts.watch && legacy && opts.send_initial_events.is_none() && opts.resource_version_match.is_empty() {
            opts.send_initial_events = Some(true);
            opts.resource_version_match = NOT_OLDER_THAN.into();
        }
        Ok(opts)
    }

    /// `ValidateListOptions`: 422 `ListOptions.meta.k8s.io "" is invalid: …` with one cause per
    /// problem.
    pub fn validate(&self) -> Result<(), ApiError> {
        let rvm = "resourceVersionMatch";
        let matched = self.resource_version_match.as_str();
        let mut causes = Vec::new();
        if self.watch {
            if self.send_initial_events.is_some() && matched != NOT_OLDER_THAN {
                causes.push(Cause::forbidden(
                    rvm,
                    "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                ));
            }
            if !matched.is_empty() {
                if self.send_initial_events.is_none() {
                    causes.push(Cause::forbidden(
                        rvm,
                        "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                    ));
                }
                if matched != NOT_OLDER_THAN {
                    causes.push(Cause::unsupported(rvm, &json!(matched), &[NOT_OLDER_THAN]));
                }
                if !self.continue_token.is_empty() {
                    causes.push(Cause::forbidden(
                        rvm,
                        "resourceVersionMatch is forbidden when continue is provided",
                    ));
                }
            }
        } else {
            if !matched.is_empty() {
                if self.resource_version.is_empty() {
                    causes.push(Cause::forbidden(
                        rvm,
                        "resourceVersionMatch is forbidden unless resourceVersion is provided",
                    ));
                }
                if !self.continue_token.is_empty() {
                    causes.push(Cause::forbidden(
                        rvm,
                        "resourceVersionMatch is forbidden when continue is provided",
                    ));
                }
                if matched != EXACT && matched != NOT_OLDER_THAN {
                    causes.push(Cause::unsupported(rvm, &json!(matched), &[EXACT, NOT_OLDER_THAN, ""]));
                }
                if matched == EXACT && self.resource_version == "0" {
                    causes.push(Cause::forbidden(
                        rvm,
                        "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                    ));
                }
            }
            if self.send_initial_events.is_some() {
                causes.push(Cause::forbidden(
                    "sendInitialEvents",
                    "sendInitialEvents is forbidden for list",
                ));
            }
        }
        if causes.is_empty() {
            return Ok(());
        }
        let mut err = ApiError::invalid("ListOptions.meta.k8s.io", "", causes).in_group("meta.k8s.io");
        if let Some(details) = err.details.as_mut().and_then(|d| d.as_object_mut()) {
            details.insert("kind".into(), json!("ListOptions"));
            details.remove("name");
        }
        Err(err)
    }

    /// Where a list reads (etcd3 `GetList` and `storage.ValidateListOptions`): a continue token
    /// carries its own resourceVersion (and may not be combined with one); `Exact`, or a
    /// resourceVersion with a `limit` and no match (the legacy case), reads at that version;
    /// otherwise the list is at least as new as the resourceVersion.
    pub fn read_at(&self) -> Result<ReadAt, ApiError> {
        if !self.continue_token.is_empty() {
            if !self.resource_version.is_empty() && self.resource_version != "0" {
                return Err(ApiError::bad_request(
                    "specifying resource version is not allowed when using continue",
                ));
            }
            return Ok(ReadAt::Continue(Continue::decode(&self.continue_token)?));
        }
        if self.resource_version.is_empty() {
            return Ok(ReadAt::Latest);
        }
        let rv = parse_resource_version(&self.resource_version)?;
        let exact = match self.resource_version_match.as_str() {
            EXACT => true,
            NOT_OLDER_THAN => false,
            _ => self.limit.is_some() && rv > 0,
        };
        Ok(if exact {
            ReadAt::Exact(rv)
        } else {
            ReadAt::NotOlderThan(rv)
        })
    }

    /// Where a watch starts (the watch cache's `Watch`): with `sendInitialEvents=true`, the
    /// current objects as `ADDED` first; with `sendInitialEvents=false`, no initial events and,
    /// for `""` or `"0"`, from now; otherwise from the resourceVersion.
    pub fn watch_start(&self) -> Result<WatchStart, ApiError> {
        let rv = parse_resource_version(&self.resource_version)?;
        Ok(match self.send_initial_events {
            Some(true) => WatchStart::InitialEvents { min: rv },
            Some(false) if rv == 0 => WatchStart::Latest,
            _ => WatchStart::From(rv),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(pairs: &[(&str, &str)]) -> ListOptions {
        let query: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        ListOptions::parse(&query, false).expect("parses")
    }

    fn messages(pairs: &[(&str, &str)]) -> Option<String> {
        opts(pairs).validate().err().map(|e| e.message)
    }

    /// Booleans read as apimachinery reads them: only `0`, `f` and `false` are false.
    #[test]
    fn booleans_are_true_unless_zero_f_or_false() {
        for (value, want) in [
            ("true", true),
            ("1", true),
            ("", true),
            ("yes", true),
            ("0", false),
            ("F", false),
        ] {
            let query = HashMap::from([("watch".to_string(), value.to_string())]);
            assert_eq!(query_bool(&query, "watch"), Some(want), "{value:?}");
        }
    }

    /// `ValidateListOptions` (validation.go) for lists: each refused combination with upstream's
    /// message, all of them in one 422.
    #[test]
    fn invalid_list_combinations_get_upstreams_messages() {
        assert_eq!(
            messages(&[("resourceVersionMatch", "NotOlderThan")]).as_deref(),
            Some("ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided")
        );
        assert_eq!(
            messages(&[("resourceVersion", "0"), ("resourceVersionMatch", "Exact")]).as_deref(),
            Some("ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"")
        );
        assert_eq!(
            messages(&[("resourceVersion", "5"), ("resourceVersionMatch", "Newest")]).as_deref(),
            Some("ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Unsupported value: \"Newest\": supported values: \"Exact\", \"NotOlderThan\", \"\"")
        );
        assert_eq!(
            messages(&[("sendInitialEvents", "true")]).as_deref(),
            Some("ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list")
        );
        let err = opts(&[("resourceVersionMatch", "Exact"), ("continue", "x")])
            .validate()
            .unwrap_err();
        assert_eq!(err.code, 422);
        assert_eq!(
            err.message,
            "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided, resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided]"
        );
        let details = err.details.unwrap();
        assert_eq!(details["group"], "meta.k8s.io");
        assert_eq!(details["kind"], "ListOptions");
        assert!(details.get("name").is_none());
        assert_eq!(
            messages(&[("resourceVersion", "5"), ("resourceVersionMatch", "Exact")]),
            None
        );
    }

    /// `validateWatchOptions`: sendInitialEvents needs NotOlderThan (allowWatchBookmarks is not
    /// required), and resourceVersionMatch needs sendInitialEvents.
    #[test]
    fn invalid_watch_combinations_get_upstreams_messages() {
        let watch = |pairs: &[(&str, &str)]| {
            let mut all = vec![("watch", "true")];
            all.extend_from_slice(pairs);
            messages(&all)
        };
        assert_eq!(
            watch(&[("sendInitialEvents", "true")]).as_deref(),
            Some("ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan")
        );
        assert_eq!(
            watch(&[("resourceVersion", "7"), ("resourceVersionMatch", "NotOlderThan")]).as_deref(),
            Some("ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided")
        );
        assert_eq!(
            watch(&[("sendInitialEvents", "true"), ("resourceVersionMatch", "NotOlderThan")]),
            None
        );
        assert_eq!(watch(&[("resourceVersion", "7")]), None);
    }

    /// `SetListOptionsDefaults`: a watch from "" or "0" without sendInitialEvents becomes a
    /// streaming one; a watch from a resourceVersion does not.
    #[test]
    fn a_legacy_watch_is_defaulted_to_initial_events() {
        for rv in ["", "0"] {
            let o = opts(&[("watch", "1"), ("resourceVersion", rv)]);
            assert_eq!(o.send_initial_events, Some(true));
            assert_eq!(o.resource_version_match, "NotOlderThan");
            assert_eq!(o.watch_start().unwrap(), WatchStart::InitialEvents { min: 0 });
        }
        assert_eq!(
            opts(&[("watch", "1"), ("resourceVersion", "9")]).watch_start().unwrap(),
            WatchStart::From(9)
        );
        let no_initial = opts(&[
            ("watch", "1"),
            ("sendInitialEvents", "false"),
            ("resourceVersionMatch", "NotOlderThan"),
        ]);
        assert_eq!(no_initial.watch_start().unwrap(), WatchStart::Latest);
    }

    /// Where lists read: Exact, the legacy limit case, NotOlderThan, and a continue token that
    /// cannot be combined with a resourceVersion.
    #[test]
    fn lists_read_where_etcd3_get_list_reads() {
        assert_eq!(opts(&[]).read_at().unwrap(), ReadAt::Latest);
        assert_eq!(
            opts(&[("resourceVersion", "4")]).read_at().unwrap(),
            ReadAt::NotOlderThan(4)
        );
        assert_eq!(
            opts(&[("resourceVersion", "4"), ("limit", "2")]).read_at().unwrap(),
            ReadAt::Exact(4)
        );
        assert_eq!(
            opts(&[("resourceVersion", "0"), ("limit", "2")]).read_at().unwrap(),
            ReadAt::NotOlderThan(0)
        );
        assert_eq!(
            opts(&[("resourceVersion", "4"), ("resourceVersionMatch", "Exact")])
                .read_at()
                .unwrap(),
            ReadAt::Exact(4)
        );
        let token = Continue {
            rv: 3,
            after: ("default".into(), "a".into()),
        }
        .encode();
        let err = opts(&[("continue", &token), ("resourceVersion", "3")])
            .read_at()
            .unwrap_err();
        assert_eq!(
            (err.code, err.message.as_str()),
            (400, "specifying resource version is not allowed when using continue")
        );
        assert!(matches!(
            opts(&[("continue", &token), ("resourceVersion", "0")])
                .read_at()
                .unwrap(),
            ReadAt::Continue(_)
        ));
    }
}
