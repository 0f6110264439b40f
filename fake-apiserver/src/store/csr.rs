//! kube-controller-manager's csrapproving and csrsigning over the store
//! ([`crate::csr::controllers`]): after a CSR changes, each pending kubelet client CSR the
//! controllers approve gets its Approved condition (through `/approval`), then each approved one
//! its certificate or Failed condition (through `/status`), each write one watch event, as the
//! controllers' `UpdateApproval` and `UpdateStatus` calls produce them.

use super::{Store, Subresource, WriteOptions};
use crate::csr::controllers::{self, Signed};
use crate::resources;
use serde_json::{json, Value};

impl Store {
    /// Runs both controllers over every CSR, oldest first.
    pub(super) fn control_csrs(&mut self) {
        let csrs = resources::by_name("certificatesigningrequests").expect("CSRs are served");
        self.controlling_csrs = true;
        let mut all = self.all_objects(csrs);
        all.sort_by(|a, b| {
            let rv = |o: &Value| {
                o["metadata"]["resourceVersion"]
                    .as_str()
                    .and_then(|r| r.parse::<u64>().ok())
            };
            rv(a).cmp(&rv(b))
        });
        for csr in all {
            let name = csr["metadata"]["name"].as_str().unwrap_or_default().to_string();
            let mut csr = csr;
            if self.cluster.csr.auto_approve {
                if let Some(condition) = controllers::approval(&csr) {
                    let mut new = csr.clone();
                    push_condition(&mut new, condition);
                    csr = self.write_csr(csrs, &name, new, Subresource::Approval).unwrap_or(csr);
                }
            }
            let serial = {
                let (a, b) = (self.random_u64(), self.random_u64());
                let mut s = [0u8; 16];
                s[..8].copy_from_slice(&a.to_be_bytes());
                s[8..].copy_from_slice(&b.to_be_bytes());
                s[0] &= 0x7f;
                s
            };
            let mut new = csr.clone();
            match controllers::sign(&self.cluster.csr, &csr, serial) {
                None => continue,
                Some(Signed::Failed(condition)) => push_condition(&mut new, condition),
                Some(Signed::Certificate(pem)) => {
                    use base64::Engine as _;
                    new["status"]["certificate"] = json!(base64::engine::general_purpose::STANDARD.encode(pem));
                }
            }
            let _ = self.write_csr(csrs, &name, new, Subresource::Status);
        }
        self.controlling_csrs = false;
    }

    fn write_csr(
        &mut self,
        csrs: &'static resources::ResourceInfo,
        name: &str,
        new: Value,
        sub: Subresource,
    ) -> Result<Value, crate::ApiError> {
        let key = Self::key(csrs, "", name);
        let old = self
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| crate::ApiError::not_found(csrs.plural, name))?;
        let result = self.replace(csrs, key, old, new, sub, &WriteOptions::default());
        if let Err(e) = &result {
            eprintln!("test-apiserver: CSR controllers: cannot update {name}: {}", e.message);
        }
        result
    }

    fn all_objects(&self, resource: &'static resources::ResourceInfo) -> Vec<Value> {
        self.objects
            .iter()
            .filter(|((plural, _, _), _)| *plural == resource.plural)
            .map(|(_, v)| v.clone())
            .collect()
    }
}

fn push_condition(csr: &mut Value, condition: Value) {
    match csr["status"]["conditions"].as_array_mut() {
        Some(list) => list.push(condition),
        None => csr["status"]["conditions"] = json!([condition]),
    }
}
