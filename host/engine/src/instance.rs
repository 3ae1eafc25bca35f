//! A check's instance through the bindings of its contract version (the per-version adapter, as wasmtime-wasi
//! keeps `p2/bindings.rs` beside its host code): instantiate it, call `evaluate.check`.

use crate::bindings::{v0_1, v0_2};
use crate::check::Contract;
use crate::guest_state::GuestState;
use crate::request::Request;
use crate::result::RawResult;
use std::time::SystemTime;
use wasmtime::Store;

/// A request in the bindings of contract module `$version` (the records are the same in every version so
/// far; each version's bindings have their own types), borrowing the request's strings: they are lowered
/// into the guest's memory from where they are, with no copy on the host.
macro_rules! wit_request {
    ($version:ident, $request:expr) => {{
        let request: &Request = $request;
        let since_epoch = request
            .now
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        $version::CheckRequest {
            object: &request.object,
            config: &request.config,
            target: $version::Target {
                group: &request.target.group,
                version: &request.target.version,
                kind: &request.target.kind,
                namespace: request.target.namespace.as_deref(),
                name: &request.target.name,
            },
            now: $version::Datetime {
                seconds: since_epoch.as_secs(),
                nanoseconds: since_epoch.subsec_nanos(),
            },
        }
    }};
}

/// A check's instance, through the bindings of its contract version.
pub(crate) enum Bound {
    V0_1(v0_1::PreflightCheck),
    V0_2(v0_2::PreflightCheck),
}

impl Bound {
    /// Instantiates the check in `store`.
    pub(crate) async fn instantiate(
        contract: &Contract,
        store: &mut Store<GuestState>,
    ) -> wasmtime::Result<Self> {
        Ok(match contract {
            Contract::V0_1(pre) => Self::V0_1(pre.instantiate_async(store).await?),
            Contract::V0_2 { pre, .. } => Self::V0_2(pre.instantiate_async(store).await?),
        })
    }

    /// Calls the check's `evaluate.check` on `request`.
    pub(crate) async fn call(
        &self,
        store: &mut Store<GuestState>,
        request: &Request,
    ) -> wasmtime::Result<RawResult> {
        Ok(match self {
            Self::V0_1(instance) => instance
                .preflight_check_evaluate()
                .call_check(store, wit_request!(v0_1, request))
                .await?
                .into(),
            Self::V0_2(instance) => instance
                .preflight_check_evaluate()
                .call_check(store, wit_request!(v0_2, request))
                .await?
                .into(),
        })
    }
}
