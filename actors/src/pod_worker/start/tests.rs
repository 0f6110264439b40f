//! The start pipeline against the recording fake runtime.

use super::*;
