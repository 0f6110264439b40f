//! The built-in sandbox (pause) image, so a node never needs a registry for its sandboxes.
//!
//! `pause/pause.S` is a 60-byte x86_64 program that waits in `pause(2)` and exits 0 on SIGTERM or
//! SIGINT; `pause/pause-x86_64.bin` is it assembled and linked statically
//! (`as pause.S -o pause.o && ld -static -nostdlib -n -s --build-id=none -o pause pause.o`).
//! At start the agent imports it as a one-file image when the engine lacks it.

use std::io::Write;

use super::RuntimeError;

/// Image reference of the built-in pause image. Bump the tag when the binary changes.
pub const IMAGE: &str = "dockerlet.local/pause:3.10-dockerlet1";

const PAUSE_X86_64: &[u8] = include_bytes!("pause/pause-x86_64.bin");

/// The pause binary for this machine's architecture.
pub fn binary() -> Result<&'static [u8], RuntimeError> {
    match std::env::consts::ARCH {
        "x86_64" => Ok(PAUSE_X86_64),
        arch => Err(RuntimeError::UnsupportedArch { arch }),
    }
}

/// A tar archive holding `/pause` (mode 0755), ready for `docker import`.
pub fn rootfs_tar() -> Result<Vec<u8>, RuntimeError> {
    let binary = binary()?;
    let mut builder = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(binary.len() as u64);
    header.set_mode(0o755);
    header.set_mtime(0);
    header.set_cksum();
    let io_error = |source: std::io::Error| RuntimeError::IoFailed {
        operation: "build pause image".to_string(),
        source,
    };
    builder.append_data(&mut header, "pause", binary).map_err(io_error)?;
    let mut out = builder.into_inner().map_err(io_error)?;
    out.flush().map_err(io_error)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The archive holds exactly one executable file named `pause` with the embedded binary.
    #[test]
    fn rootfs_holds_the_pause_binary() {
        let tar_bytes = rootfs_tar().unwrap();
        let mut archive = tar::Archive::new(tar_bytes.as_slice());
        let entries: Vec<_> = archive
            .entries()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (
                    e.path().unwrap().display().to_string(),
                    e.header().mode().unwrap(),
                    e.size(),
                )
            })
            .collect();
        assert_eq!(entries, vec![("pause".to_string(), 0o755, PAUSE_X86_64.len() as u64)]);
        assert_eq!(&PAUSE_X86_64[..4], b"\x7fELF");
    }
}
