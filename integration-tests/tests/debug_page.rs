//! The debug page as a browser shows it: each pod's explanation in words.

use std::time::Duration;

use dockerlet_integration_tests::browser::{dump_dom, texts_of};
use dockerlet_integration_tests::{wait_until, Agent, ManifestDir};

/// A pod whose image is not on the node and may not be pulled.
const NOPE: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: nope
spec:
  containers:
    - name: main
      image: dockerlet.local/nope:1
      imagePullPolicy: Never
"#;

/// Each pod's explanation, by `namespace/name`, as Chromium rendered the page.
fn explanations(dom: &str) -> Vec<(String, String)> {
    texts_of(dom, "class=\"explanation\"")
        .into_iter()
        .map(|(tag, text)| {
            let pod = tag
                .split("data-pod=\"")
                .nth(1)
                .and_then(|s| s.split('"').next())
                .unwrap_or_default()
                .to_string();
            (pod, text)
        })
        .collect()
}

/// `/debug` in headless Chromium says why a crash-looping pod and a pod without its image are
/// stuck and that a healthy pod is fine, links each container to its logs, and shows PLEG health.
#[test]
fn the_debug_page_explains_each_pod_in_a_browser() {
    dockerlet_integration_tests::browser::chromium();
    let manifests = ManifestDir::new();
    manifests.add_fixture("always-exit1.yaml");
    manifests.add_fixture("sleeper.yaml");
    manifests.write("nope.yaml", NOPE);
    let agent = Agent::start("debug-page", manifests.path(), &[]);
    let url = format!("http://127.0.0.1:{}/debug", agent.ports().debug);
    let crash = format!("default/{}", agent.pod_name("always-exit1"));
    let nope = format!("default/{}", agent.pod_name("nope"));
    let healthy = format!("default/{}", agent.pod_name("sleeper"));

    let (dom, said) = wait_until("the page to explain every pod", Duration::from_secs(90), || {
        let dom = dump_dom(&url).map_err(|e| format!("{e:#}"))?;
        let said = explanations(&dom);
        let of = |pod: &str| {
            said.iter()
                .find(|(p, _)| p == pod)
                .map(|(_, t)| t.clone())
                .unwrap_or_default()
        };
        let crash_text = of(&crash);
        let ok = crash_text.starts_with("restarting main ")
            && crash_text.contains(": CrashLoopBackOff after ")
            && crash_text.ends_with(", last exit 1")
            && of(&nope).starts_with("cannot start main: ErrImageNeverPull: ")
            && of(&healthy) == "running: 1/1 containers ready";
        if ok {
            Ok((dom, said))
        } else {
            Err(format!("{said:#?}"))
        }
    });
    let text = |pod: &str| said.iter().find(|(p, _)| p == pod).unwrap().1.clone();
    assert_eq!(
        text(&nope),
        "cannot start main: ErrImageNeverPull: Container image \"dockerlet.local/nope:1\" is not \
         present with pull policy of Never"
    );
    // "restarting main in 3 s: CrashLoopBackOff after 2 restarts, last exit 1", or "now" when
    // the back-off just ended.
    let crash_text = text(&crash);
    let when = crash_text["restarting main ".len()..].split(':').next().unwrap();
    assert!(
        when == "now" || (when.starts_with("in ") && when.ends_with(" s")),
        "{crash_text}"
    );
    let logs = format!(
        "href=\"https://127.0.0.1:{}/containerLogs/default/{}/main\"",
        agent.ports().kubelet,
        agent.pod_name("sleeper")
    );
    assert!(dom.contains(&logs), "a link to the logs ({logs}) in {dom}");
    let pleg = texts_of(&dom, "id=\"pleg\"");
    assert!(
        pleg.first()
            .is_some_and(|(_, t)| t.starts_with("PLEG healthy: last relist at ")),
        "{pleg:?}"
    );
    assert!(dom.contains("http-equiv=\"refresh\""), "the page refreshes itself");
}
