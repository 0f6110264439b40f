//! Errors of the HTTP handlers, mapped to statuses.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};

/// What went wrong serving a request.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// An actor did not answer (it is being re-created); the client may retry.
    #[error("{actor} is not answering: {reason}")]
    ActorUnavailable {
        /// Which actor.
        actor: &'static str,
        /// The mailbox error.
        reason: String,
    },
    /// What is asked for is not there yet (statistics before the first pass); retry.
    #[error("{0}")]
    NotReady(String),
    /// The request is malformed.
    #[error("{0}")]
    BadRequest(String),
    /// The request is well-formed but refused by validation (422).
    #[error("{0}")]
    Unprocessable(String),
    /// What the request names does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The feature is switched off.
    #[error("{0}")]
    Forbidden(String),
    /// The agent failed to produce the answer.
    #[error("internal error: {reason}")]
    Internal {
        /// What failed.
        reason: String,
    },
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self {
            ApiError::ActorUnavailable { .. } | ApiError::NotReady(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unprocessable(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::Internal { .. } => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
        }
    }

    fn error_response(&self) -> HttpResponse {
        HttpResponse::build(self.status_code())
            .content_type("text/plain; charset=utf-8")
            .body(self.to_string())
    }
}
