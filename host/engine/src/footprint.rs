//! How much of the pooling allocator one instance of a check takes, counted in evaluation slots, so that the
//! engine admits at once only the evaluations the pool can hold: a check with many core instances (a
//! componentize-py component has 38; the pool holds 8 per slot) waits for room instead of failing to
//! instantiate.

use wasmtime::component::Component;

/// What the pool holds per evaluation slot.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SlotShare {
    /// Core module instances per slot.
    pub core_instances: u32,
    /// Linear memories per slot.
    pub memories: u32,
    /// Tables per slot.
    pub tables: u32,
}

/// What one instance of a check needs from the pool.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Footprint {
    core_instances: u32,
    memories: u32,
    tables: u32,
}

impl Footprint {
    /// The footprint of `component` (compiled from `bytes`): its core instantiations counted in the binary
    /// (nested components included), its memories and tables as wasmtime sizes them.
    pub(crate) fn of(bytes: &[u8], component: &Component) -> Self {
        let core_instances = wasmparser::Parser::new(0)
            .parse_all(bytes)
            .filter_map(|payload| match payload {
                Ok(wasmparser::Payload::InstanceSection(section)) => Some(
                    section
                        .into_iter()
                        .filter(|instance| {
                            matches!(instance, Ok(wasmparser::Instance::Instantiate { .. }))
                        })
                        .count(),
                ),
                _ => None,
            })
            .sum::<usize>();
        let resources = component.resources_required();
        Self {
            core_instances: u32::try_from(core_instances).unwrap_or(u32::MAX),
            memories: resources.as_ref().map_or(0, |needed| needed.num_memories),
            tables: resources.as_ref().map_or(0, |needed| needed.num_tables),
        }
    }

    /// Evaluation slots one instance takes: at least one, as many as its largest need over the share of a
    /// slot, and never more than the whole pool (such a check runs alone).
    pub(crate) fn slots(&self, share: SlotShare, pool_slots: u32) -> u32 {
        let over = |needed: u32, per_slot: u32| needed.div_ceil(per_slot.max(1));
        over(self.core_instances, share.core_instances)
            .max(over(self.memories, share.memories))
            .max(over(self.tables, share.tables))
            .clamp(1, pool_slots.max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHARE: SlotShare = SlotShare {
        core_instances: 8,
        memories: 2,
        tables: 4,
    };

    #[test]
    fn a_check_takes_the_slots_its_largest_need_fills() {
        let footprint = |core_instances, memories, tables| Footprint {
            core_instances,
            memories,
            tables,
        };
        for (needs, pool_slots, slots) in [
            (footprint(0, 0, 0), 128, 1),
            (footprint(3, 1, 1), 128, 1),
            (footprint(8, 2, 4), 128, 1),
            (footprint(9, 1, 1), 128, 2),
            (footprint(38, 3, 5), 128, 5),
            (footprint(3, 5, 1), 128, 3),
            (footprint(3, 1, 9), 128, 3),
            (footprint(38, 1, 1), 2, 2),
        ] {
            assert_eq!(
                needs.slots(SHARE, pool_slots),
                slots,
                "{needs:?} in {pool_slots} slots"
            );
        }
    }
}
