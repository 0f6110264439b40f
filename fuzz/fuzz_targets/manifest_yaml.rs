//! The static-pod manifest decoder and validator on a YAML file (`pod.yaml`):
//! `dockerlet_pod::manifest::{parse, validate, default_static_pod, parse_url_body}`.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| dockerlet_fuzz::manifest(Path::new("pod.yaml"), data));
