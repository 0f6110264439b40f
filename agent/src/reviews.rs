//! The kubelet API's TokenReviews and SubjectAccessReviews, sent with the agent's API client
//! (the http crate holds only the [`Reviewer`] trait; the kube crate only the calls).

use std::sync::Arc;

use dockerlet_http::kubelet_api::webhook::{ReviewError, Reviewer};
use dockerlet_kube::KubeClient;
use futures::future::BoxFuture;
use k8s_openapi::api::authentication::v1::TokenReview;
use k8s_openapi::api::authorization::v1::SubjectAccessReview;

/// [`Reviewer`] on the agent's [`KubeClient`].
pub struct ApiReviewer(pub Arc<dyn KubeClient>);

impl Reviewer for ApiReviewer {
    fn review_token(&self, review: TokenReview) -> BoxFuture<'static, Result<TokenReview, ReviewError>> {
        let api = self.0.clone();
        Box::pin(async move {
            api.review_token(&review).await.map_err(|e| ReviewError {
                operation: "create tokenreview",
                transient: e.is_transient(),
                source: Box::new(e),
            })
        })
    }

    fn review_access(
        &self,
        review: SubjectAccessReview,
    ) -> BoxFuture<'static, Result<SubjectAccessReview, ReviewError>> {
        let api = self.0.clone();
        Box::pin(async move {
            api.review_access(&review).await.map_err(|e| ReviewError {
                operation: "create subjectaccessreview",
                transient: e.is_transient(),
                source: Box::new(e),
            })
        })
    }
}
