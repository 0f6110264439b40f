//! Links the release agent with its hot-code layout: the linker script `hot-code/hot.ld` puts
//! the functions a node runs every day (made by `make hot-code` from callgrind profiles) next to
//! each other at the start of the code, so the pages the kernel maps for them hold little else
//! (`hot-code/README.md`: at 110 pods the agent's file-backed RSS went from 14.9 to 11.1 MiB).
//!
//! Only release builds on Linux; `DOCKERLET_CODE_LAYOUT=off` leaves the linker's own order. A
//! list that no longer matches a function costs nothing but that function's place.

use std::path::PathBuf;

fn main() {
    // The directory, not the file: cargo runs a build script again on every build while a file
    // it names is missing.
    println!("cargo:rerun-if-changed=hot-code");
    println!("cargo:rerun-if-env-changed=DOCKERLET_CODE_LAYOUT");
    let Some(dir) = std::env::var_os("CARGO_MANIFEST_DIR") else {
        return;
    };
    let script = PathBuf::from(dir).join("hot-code").join("hot.ld");
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    let off = std::env::var("DOCKERLET_CODE_LAYOUT").is_ok_and(|v| v == "off");
    if release && linux && !off && script.exists() {
        println!("cargo:rustc-link-arg-bins=-Wl,-T,{}", script.display());
    }
}
