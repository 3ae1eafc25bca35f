//! The check ConfigMap format's names and limits: the label that selects check ConfigMaps, the keys a check
//! and its parts carry, and the caps. The parser ([`crate::check_source`]), the parts
//! ([`crate::parts`]), the watcher and the kept copies all read them here.

/// The label that selects check ConfigMaps and names the kind they gate (`Kind.group`).
pub const GATES_LABEL: &str = "preflight.dev/gates";
/// The `binaryData` key of the component when a ConfigMap carries several binary entries.
pub const COMPONENT_KEY: &str = "check.wasm";
/// The largest component accepted after decompression: a bound on decompression bombs.
pub const MAX_COMPONENT_BYTES: usize = 64 << 20;

/// The `data` keys a check ConfigMap may carry; any other key is rejected as a likely typo.
pub(crate) const DATA_KEYS: [&str; 23] = [
    "gates",
    "versions",
    "order",
    "timeout",
    "memoryLimit",
    "isolation",
    "maxUses",
    "failurePolicy",
    "suspend",
    "config",
    "sha256",
    "pause",
    "http",
    "lookups",
    "outputs",
    "parts",
    "mode",
    "selector",
    SOURCE_KEY,
    "pullSecret",
    "followTag",
    "verify",
    SIGNATURE_KEY,
];

/// The data key holding the `cosign sign-blob` signatures of a check carried in ConfigMaps, one per line.
pub const SIGNATURE_KEY: &str = "signature";

/// The data key naming a check in an OCI registry (`oci://REGISTRY/REPOSITORY@sha256:…`) instead of
/// carrying its component.
pub const SOURCE_KEY: &str = "source";

/// The label naming the check ConfigMap a part belongs to.
pub const PART_OF_LABEL: &str = "preflight.dev/part-of";
/// The label holding a part's number, from 1.
pub const PART_LABEL: &str = "preflight.dev/part";
/// The label holding the first 16 hexadecimal digits of the component's digest: `kubectl delete configmap
/// -l 'preflight.dev/part-of=NAME,preflight.dev/version!=NEW'` removes the parts of older versions.
pub const VERSION_LABEL: &str = "preflight.dev/version";
/// The data key, on the check and on each part, saying how many parts there are.
pub const PARTS_KEY: &str = "parts";
/// The binaryData key of a part's bytes.
pub const PART_KEY: &str = "part";
/// Most parts a check may have.
pub const MAX_PARTS: usize = 64;
/// Default size of one part's bytes: small enough that `kubectl apply -f -` (client-side apply) takes the
/// ConfigMap, whose copy in the `last-applied-configuration` annotation must fit the 256 KiB limit on
/// annotations (180 KiB is 240 KiB in base64); server-side apply and `kubectl create` take any size up to
/// the 1 MiB ConfigMap limit (`--max-part-size 900KiB`).
pub const DEFAULT_PART_BYTES: usize = 180 << 10;
