//! Who the operator writes as. Every write names a field manager, so that an administrator reading
//! `managedFields` (or an audit log) tells preflight's writes from everyone else's: `preflight` for
//! conditions, outputs, Events, its Lease and its admission policies, `preflight-pause` for pause switches
//! (a manager of their own, so that withdrawing one releases exactly what the switch owns).

use kube::api::{PatchParams, PostParams};

/// The field manager of conditions, outputs, Events, the leader Lease and admission policies.
pub const FIELD_MANAGER: &str = "preflight";

/// The field manager the operator applies pause switches as.
pub const PAUSE_FIELD_MANAGER: &str = "preflight-pause";

/// Patch parameters naming [`FIELD_MANAGER`] (merge patches; for server-side apply use
/// [`PatchParams::apply`]).
pub(crate) fn patch_params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    }
}

/// Create parameters naming [`FIELD_MANAGER`].
pub(crate) fn post_params() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    }
}
