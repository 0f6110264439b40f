//! What kubelet writes on a remote command's error stream when the command ends
//! (`pkg/kubelet/cri/streaming/remotecommand`): with v4+ a `metav1.Status` as JSON, with older
//! versions the failure message as text and nothing on success; and the terminal sizes the
//! client writes on the `resize` stream.

use serde::{Deserialize, Serialize};

/// The `Status` reason of a command that exited non-zero.
pub const NON_ZERO_EXIT_CODE_REASON: &str = "NonZeroExitCode";
/// The cause type (`reason` in JSON) carrying the exit code.
pub const EXIT_CODE_CAUSE_TYPE: &str = "ExitCode";

/// How a command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecOutcome {
    /// Exit code 0.
    Success,
    /// The command exited non-zero.
    NonZeroExit {
        /// The exit code.
        code: i64,
        /// The command as run.
        command: Vec<String>,
    },
    /// The command could not be run (no container, runtime error).
    Internal {
        /// What failed.
        message: String,
    },
    /// An attach failed (kubelet's `error attaching to container: …`).
    AttachFailed {
        /// What failed.
        message: String,
    },
}

/// `metav1.Status`, the fields kubelet sets, in Go's JSON field order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// Always `{}` (Go does not omit an empty ListMeta).
    pub metadata: Metadata,
    /// `Success` or `Failure`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Human-readable description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Machine-readable reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Causes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Details>,
    /// HTTP code (internal errors: 500).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<u16>,
}

/// Empty `ListMeta`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Metadata {}

/// `StatusDetails` with causes only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Details {
    /// The causes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<Cause>,
}

/// `StatusCause`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cause {
    /// The cause type (Go's `Type`, JSON `reason`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Its message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl ExecOutcome {
    /// The `Status` kubelet reports. The non-zero message follows containerd's CRI exec error
    /// (`error executing command [sh -c exit 3], exit code 3`) wrapped by kubelet's
    /// `command terminated with non-zero exit code: …`.
    pub fn status(&self) -> Status {
        match self {
            Self::Success => Status {
                metadata: Metadata {},
                status: Some("Success".into()),
                message: None,
                reason: None,
                details: None,
                code: None,
            },
            Self::NonZeroExit { code, command } => Status {
                metadata: Metadata {},
                status: Some("Failure".into()),
                message: Some(format!(
                    "command terminated with non-zero exit code: error executing command [{}], exit code {code}",
                    command.join(" ")
                )),
                reason: Some(NON_ZERO_EXIT_CODE_REASON.into()),
                details: Some(Details {
                    causes: vec![Cause {
                        reason: Some(EXIT_CODE_CAUSE_TYPE.into()),
                        message: Some(code.to_string()),
                    }],
                }),
                code: None,
            },
            Self::Internal { message } | Self::AttachFailed { message } => {
                let err = if matches!(self, Self::AttachFailed { .. }) {
                    format!("error attaching to container: {message}")
                } else {
                    format!("error executing command in container: {message}")
                };
                Status {
                    metadata: Metadata {},
                    status: Some("Failure".into()),
                    message: Some(format!("Internal error occurred: {err}")),
                    reason: Some("InternalError".into()),
                    details: Some(Details {
                        causes: vec![Cause {
                            reason: None,
                            message: Some(err),
                        }],
                    }),
                    code: Some(500),
                }
            }
        }
    }

    /// The bytes to write on the error stream for a protocol version: `Status` JSON when
    /// `status_is_json` (v4+), else the failure message and nothing on success.
    pub fn error_stream_bytes(&self, status_is_json: bool) -> Vec<u8> {
        let status = self.status();
        if status_is_json {
            serde_json::to_vec(&status).expect("Status serializes")
        } else if matches!(self, Self::Success) {
            Vec::new()
        } else {
            status.message.unwrap_or_default().into_bytes()
        }
    }
}

/// A terminal size on the `resize` stream (`remotecommand.TerminalSize`, Go field names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TerminalSize {
    /// Columns.
    #[serde(rename = "Width")]
    pub width: u16,
    /// Rows.
    #[serde(rename = "Height")]
    pub height: u16,
}

/// Why resize input is refused.
#[derive(Debug, thiserror::Error)]
pub enum ResizeError {
    /// Not a `TerminalSize` JSON object.
    #[error("resize stream: invalid terminal size JSON")]
    Json(#[source] serde_json::Error),
    /// An object that does not end within the cap.
    #[error("resize stream: pending input exceeds {0} bytes")]
    TooLong(usize),
}

/// Splits the resize stream's bytes (a sequence of JSON objects, split anywhere by the
/// transport) into sizes.
#[derive(Debug, Default)]
pub struct ResizeDecoder {
    pending: Vec<u8>,
}

/// The most bytes one pending resize object may take.
pub const MAX_RESIZE_PENDING: usize = 4096;

impl ResizeDecoder {
    /// Feed bytes; returns the sizes completed by them.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<TerminalSize>, ResizeError> {
        self.pending.extend_from_slice(bytes);
        let mut sizes = Vec::new();
        let mut stream = serde_json::Deserializer::from_slice(&self.pending).into_iter::<TerminalSize>();
        let mut used = 0;
        loop {
            match stream.next() {
                Some(Ok(size)) => {
                    sizes.push(size);
                    used = stream.byte_offset();
                }
                Some(Err(e)) if e.is_eof() => break,
                Some(Err(e)) => return Err(ResizeError::Json(e)),
                None => {
                    used = stream.byte_offset();
                    break;
                }
            }
        }
        self.pending.drain(..used);
        if self.pending.len() > MAX_RESIZE_PENDING {
            return Err(ResizeError::TooLong(MAX_RESIZE_PENDING));
        }
        Ok(sizes)
    }
}
