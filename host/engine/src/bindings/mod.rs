//! Host bindings, one module per contract version (as wasmtime-wasi lays out `p1` and `p2`): the host links
//! and serves every version here, choosing by the name of a component's `evaluate` export.

pub(crate) mod v0_1;
pub(crate) mod v0_2;

/// The contract versions served, oldest first: a check of any patch release of one of them is accepted.
pub(crate) const SERVED_CONTRACTS: [&str; 2] = [v0_1::CONTRACT_VERSION, v0_2::CONTRACT_VERSION];

/// `major.minor` of a version (`0.1` of `0.1.7`).
pub(crate) fn minor(version: &str) -> String {
    version.split('.').take(2).collect::<Vec<_>>().join(".")
}

/// Whether two versions share `major.minor`: the semver rule for `0.x` versions, under which a host of
/// `0.1.0` serves a check of `0.1.7` (patch releases only add interfaces; imports are checked on their own).
pub(crate) fn same_minor(version: &str, other: &str) -> bool {
    version.split('.').count() == 3 && minor(version) == minor(other)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_patch_of_the_served_minor_is_served() {
        assert!(same_minor("0.1.0", "0.1.0"));
        assert!(same_minor("0.1.7", "0.1.0"));
        assert!(!same_minor("0.2.0", "0.1.0"));
        assert!(!same_minor("0.9.0", "0.1.0"));
        assert!(!same_minor("1.1.0", "0.1.0"));
        assert!(!same_minor("0.1", "0.1.0"));
    }
}
