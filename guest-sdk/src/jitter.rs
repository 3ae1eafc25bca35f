//! Spreading retries: objects waiting on the same thing should not all come back at the same instant.

use crate::Target;
use std::time::Duration;

/// `base` plus up to `percent`% of it (capped at 100 %), chosen by a hash of the object's namespace and
/// name: objects waiting on the same dependency spread their retries, while each object keeps a stable
/// schedule (and so a stable condition message).
pub fn with_jitter(base: Duration, percent: u32, target: &Target) -> Duration {
    let spread_ms = base.as_millis() as u64 * u64::from(percent.min(100)) / 100;
    if spread_ms == 0 {
        return base;
    }
    let namespace = target.namespace.as_deref().unwrap_or_default();
    base + Duration::from_millis(
        fnv1a(&[namespace.as_bytes(), b"/", target.name.as_bytes()]) % spread_ms,
    )
}

fn fnv1a(parts: &[&[u8]]) -> u64 {
    parts
        .iter()
        .flat_map(|part| part.iter())
        .fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
            (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(name: &str) -> Target {
        Target {
            namespace: Some("default".into()),
            name: name.into(),
            ..Target::default()
        }
    }

    #[test]
    fn jitter_is_bounded_stable_and_spread() {
        let base = Duration::from_secs(60);
        let first = with_jitter(base, 50, &target("a"));
        assert!(
            first >= base && first < Duration::from_secs(90),
            "{first:?}"
        );
        assert_eq!(with_jitter(base, 50, &target("a")), first);
        assert_eq!(with_jitter(base, 0, &target("a")), base);
        let spread: std::collections::BTreeSet<_> = (0..20)
            .map(|i| with_jitter(base, 50, &target(&format!("app-{i}"))))
            .collect();
        assert!(spread.len() > 10, "{spread:?}");
    }
}
