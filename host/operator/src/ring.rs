//! Which replica of a shard ring gates which object: rendezvous (highest-random-weight) hashing of the
//! object's UID over the ring's live members. Every replica computes the same owner from the same member
//! list, with no coordination beyond the list; when a member joins, only the objects it now wins move to it
//! (about 1/N), and when one leaves, only its objects move, spread over the others.
//!
//! Rendezvous hashing rather than a ring of virtual nodes: with the few members a ring has (a handful of
//! replicas), it balances as well as a ring of hundreds of virtual nodes, needs no tuning, and its cost (one
//! hash per member per object) is small next to an evaluation.

use sha2::{Digest, Sha256};

/// The live members of a ring, as every replica sees them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ring {
    members: Vec<String>,
}

impl Ring {
    /// A ring of `members` (order and duplicates do not matter).
    pub fn new(members: impl IntoIterator<Item = String>) -> Self {
        let mut members: Vec<String> = members.into_iter().collect();
        members.sort();
        members.dedup();
        Self { members }
    }

    /// The members, sorted.
    pub fn members(&self) -> &[String] {
        &self.members
    }

    /// The member that gates the object with `uid`; `None` for an empty ring.
    pub fn owner(&self, uid: &str) -> Option<&str> {
        self.members
            .iter()
            .max_by_key(|member| weight(member, uid))
            .map(String::as_str)
    }
}

/// The weight of `member` for `uid`: the first 8 bytes of sha256(member NUL uid). A cryptographic hash so
/// that no choice of names or UIDs skews the shares.
fn weight(member: &str, uid: &str) -> u64 {
    let digest = Sha256::new()
        .chain_update(member.as_bytes())
        .chain_update([0])
        .chain_update(uid.as_bytes())
        .finalize();
    let mut first = [0; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn uids(count: usize) -> Vec<String> {
        (0..count)
            .map(|i| format!("6f0c{i:04x}-1c2d-4e5f-8a9b-{i:012x}"))
            .collect()
    }

    fn shares(ring: &Ring, uids: &[String]) -> HashMap<String, usize> {
        let mut shares = HashMap::new();
        for uid in uids {
            *shares
                .entry(ring.owner(uid).unwrap().to_owned())
                .or_default() += 1;
        }
        shares
    }

    #[test]
    fn every_replica_computes_the_same_owner_whatever_order_it_lists_the_members_in() {
        let one = Ring::new(["b".into(), "a".into(), "c".into(), "a".into()]);
        let other = Ring::new(["c".into(), "b".into(), "a".into()]);
        assert_eq!(one, other);
        assert_eq!(one.members(), ["a", "b", "c"]);
        for uid in uids(100) {
            assert_eq!(one.owner(&uid), other.owner(&uid));
        }
        assert_eq!(Ring::default().owner("x"), None);
    }

    #[test]
    fn shares_are_within_fifteen_percent_and_a_join_or_a_loss_moves_only_what_it_must() {
        let objects = uids(3000);
        let three = Ring::new(["preflight-0", "preflight-1", "preflight-2"].map(String::from));
        for (member, share) in shares(&three, &objects) {
            assert!(
                (850..=1150).contains(&share),
                "{member} owns {share} of 3000"
            );
        }
        let four = Ring::new(
            three
                .members()
                .iter()
                .cloned()
                .chain(["preflight-3".into()]),
        );
        let moved: Vec<&String> = objects
            .iter()
            .filter(|uid| three.owner(uid) != four.owner(uid))
            .collect();
        assert!(
            moved
                .iter()
                .all(|uid| four.owner(uid) == Some("preflight-3")),
            "a join moves objects only to the new member"
        );
        let fraction = moved.len() as f64 / objects.len() as f64;
        assert!((0.20..=0.30).contains(&fraction), "{fraction} moved");
        let two = Ring::new(["preflight-0", "preflight-2"].map(String::from));
        for uid in &objects {
            if three.owner(uid) != Some("preflight-1") {
                assert_eq!(
                    two.owner(uid),
                    three.owner(uid),
                    "only the lost member's objects move"
                );
            }
        }
    }
}
