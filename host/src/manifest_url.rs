//! Reading a static pod manifest from a URL (`--manifest-url`, kubelet's
//! `pkg/kubelet/config/http.go`): one GET with the configured headers, a 10 s timeout and the
//! same 10 MiB limit as a manifest file. The HttpSource actor polls through it.

use std::time::Duration;

use crate::manifest_dir::MAX_MANIFEST_BYTES;

/// kubelet's HTTP source timeout.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a poll of the manifest URL brought no body to parse.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The request failed (connection, timeout, reading the body).
    #[error("{0}")]
    Request(#[from] reqwest::Error),
    /// The server answered with another status than 2xx.
    #[error("GET returned {0}")]
    Status(reqwest::StatusCode),
    /// The body is larger than a manifest may be.
    #[error("body is {0} bytes, larger than the {MAX_MANIFEST_BYTES} byte limit")]
    TooLarge(usize),
}

/// A client for one manifest URL.
#[derive(Debug, Clone)]
pub struct ManifestUrl {
    client: reqwest::Client,
    url: String,
    headers: Vec<(String, String)>,
}

impl ManifestUrl {
    /// A client for `url`, sending `headers` (`--manifest-url-header`) with every GET.
    pub fn new(url: String, headers: Vec<(String, String)>) -> Self {
        let client = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .build()
            .expect("the HTTP client builds");
        ManifestUrl { client, url, headers }
    }

    /// GET the URL: the body, or why there is none.
    pub fn fetch(&self) -> impl std::future::Future<Output = Result<Vec<u8>, FetchError>> + 'static {
        let mut request = self.client.get(&self.url);
        for (name, value) in &self.headers {
            request = request.header(name.as_str(), value.as_str());
        }
        async move {
            let response = request.send().await?;
            let status = response.status();
            if !status.is_success() {
                return Err(FetchError::Status(status));
            }
            let body = response.bytes().await?;
            if body.len() as u64 > MAX_MANIFEST_BYTES {
                return Err(FetchError::TooLarge(body.len()));
            }
            Ok(body.to_vec())
        }
    }
}
