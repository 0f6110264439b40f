//! What the fuzz targets share: the static-pod manifest path, run on YAML and JSON alike.

use std::path::Path;

use dockerlet_pod::manifest::{default_static_pod, parse, parse_url_body, validate};

/// A manifest file's bytes through what the agent does with a file in `--pod-manifest-path`
/// (`dockerlet_host::manifest_dir::read_one` less the file read): parse (by the extension of
/// `file`), validate, default; and through the `--manifest-url` body parser.
///
/// Invariants: a parsed Pod, written as JSON, parses back to the same Pod; errors render.
pub fn manifest(file: &Path, data: &[u8]) {
    match parse(file, data) {
        Ok(pod) => {
            let json = serde_json::to_vec(&pod).expect("a decoded Pod serializes");
            let again = parse(Path::new("again.json"), &json).expect("a decoded Pod, as JSON, decodes");
            assert_eq!(again, pod, "JSON round trip of {}", String::from_utf8_lossy(&json));
            match validate(&pod) {
                Ok(()) => {
                    let pod = default_static_pod(pod, "fuzz-node", &file.display().to_string());
                    assert!(pod.metadata.uid.is_some_and(|u| u.len() == 32));
                }
                Err(e) => drop(e.to_string()),
            }
        }
        Err(e) => drop(e.to_string()),
    }
    match parse_url_body(data) {
        Ok(pods) => pods.iter().for_each(|pod| drop(validate(pod))),
        Err(e) => drop(e.to_string()),
    }
}
