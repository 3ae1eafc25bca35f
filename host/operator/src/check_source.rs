//! A check as a ConfigMap carries it: the component in `binaryData` (plain, zstd or gzip), the kind it gates
//! in a label, and optional settings in `data`. Parsing is pure; compiling is the check set's job.
//!
//! The simple case needs one file and one label:
//! `kubectl create configmap my-check --from-file=check.wasm` then
//! `kubectl label configmap my-check preflight.dev/gates=App.apps.example.com`.

use crate::capabilities::{CapabilitySettings, HttpSettings, LookupSettings};
use crate::config_map_format::{
    COMPONENT_KEY, DATA_KEYS, GATES_LABEL, MAX_COMPONENT_BYTES, PARTS_KEY, SIGNATURE_KEY,
    SOURCE_KEY,
};
use crate::kind::GatedKind;
use crate::parts;
use crate::pause::PauseSwitch;
use crate::signing::KeyReference;
use crate::vocabulary::{
    CheckMode, CheckSettings, CheckSource, FailurePolicy, ObjectSelector, OutputsPlacement,
    Rejection, RejectionCause,
};
use k8s_openapi::api::core::v1::ConfigMap;
use preflight_engine::{Digest, Isolation, Limits};
use std::io::Read;

/// Reads a check ConfigMap, whose component may come in `parts`: the part ConfigMaps labelled
/// `preflight.dev/part-of` with its name, as `preflight pack` writes them. Every problem is reported at
/// once, so one edit can fix them all.
pub fn from_config_maps(
    config_map: &ConfigMap,
    parts: &[ConfigMap],
    defaults: &Limits,
) -> Result<CheckSource, Rejection> {
    with_pulled(config_map, parts, None, defaults)
}

/// [`from_config_maps`] for a check that may name a `source` in a registry: `pulled` is its component as
/// the watcher fetched it (or why it could not), `None` when it was not fetched.
pub(crate) fn with_pulled(
    config_map: &ConfigMap,
    parts: &[ConfigMap],
    pulled: Option<Result<Vec<u8>, String>>,
    defaults: &Limits,
) -> Result<CheckSource, Rejection> {
    let namespace = config_map.metadata.namespace.as_deref().unwrap_or_default();
    let name = format!(
        "{namespace}/{}",
        config_map.metadata.name.as_deref().unwrap_or_default()
    );
    let data = config_map.data.clone().unwrap_or_default();
    let text = |key: &str| {
        data.get(key)
            .map(|value| value.trim())
            .filter(|value| !value.is_empty())
    };
    let mut problems = Vec::new();

    let gates_text = text("gates").or_else(|| {
        config_map
            .metadata
            .labels
            .as_ref()
            .and_then(|labels| labels.get(GATES_LABEL))
            .map(String::as_str)
    });
    let gates = match gates_text {
        None => {
            problems.push(format!(
                "it names no kind: set the label {GATES_LABEL}=Kind.group (or data key `gates`)"
            ));
            None
        }
        Some(text) => GatedKind::parse(text).or_else(|| {
            problems.push(format!(
                "`{text}` is not a kind: write Kind.group, e.g. App.apps.example.com, or Kind for the core group"
            ));
            None
        }),
    };
    let failure_policy = match text("failurePolicy") {
        None | Some("Fail") => FailurePolicy::Fail,
        Some("Ignore") => FailurePolicy::Ignore,
        Some(other) => {
            problems.push(format!(
                "failurePolicy `{other}` is neither Fail nor Ignore"
            ));
            FailurePolicy::Fail
        }
    };
    let suspended = match text("suspend") {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => {
            problems.push(format!("suspend `{other}` is neither true nor false"));
            false
        }
    };
    for key in data.keys().filter(|key| !DATA_KEYS.contains(&key.as_str())) {
        problems.push(format!(
            "unknown data key `{key}` (known: {})",
            DATA_KEYS.join(", ")
        ));
    }
    let order = text("order").map_or(0, |value| {
        value.parse().unwrap_or_else(|_| {
            problems.push(format!("order `{value}` is not an integer"));
            0
        })
    });
    let mut limits = *defaults;
    if let Some(value) = text("timeout") {
        match humantime::parse_duration(value) {
            Ok(timeout) if !timeout.is_zero() && timeout <= Limits::MAX_TIMEOUT => {
                limits.timeout = timeout;
            }
            _ => problems.push(format!(
                "timeout `{value}` is not a duration between 1ms and {} such as 500ms or 2s",
                humantime::format_duration(Limits::MAX_TIMEOUT)
            )),
        }
    }
    if let Some(value) = text("memoryLimit") {
        match preflight_engine::parse_size(value) {
            Ok(bytes) if bytes > 0 => limits.memory_bytes = bytes,
            _ => problems.push(format!("memoryLimit `{value}` is not a size such as 64MiB")),
        }
    }
    limits.isolation = isolation(text("isolation"), text("maxUses"), &mut problems);
    let versions = text("versions").map_or_else(Vec::new, |value| {
        value
            .split(',')
            .map(str::trim)
            .filter(|version| !version.is_empty())
            .map(str::to_owned)
            .collect()
    });
    let config = match text("config") {
        None => "{}".to_owned(),
        Some(value) => match serde_norway::from_str::<serde_json::Value>(value) {
            Ok(parsed) => parsed.to_string(),
            Err(error) => {
                problems.push(format!("config is not YAML or JSON: {error}"));
                String::new()
            }
        },
    };
    let pause = text("pause").and_then(|value| {
        PauseSwitch::parse(value)
            .map_err(|problem| problems.push(problem))
            .ok()
    });
    let capabilities = CapabilitySettings {
        http: text("http").and_then(|value| noted(&mut problems, HttpSettings::parse(value))),
        lookups: text("lookups")
            .and_then(|value| noted(&mut problems, LookupSettings::parse(value))),
    };
    let outputs = text("outputs")
        .and_then(|value| noted(&mut problems, OutputsPlacement::parse(value)))
        .unwrap_or_default();
    let mode = text("mode")
        .and_then(|value| noted(&mut problems, CheckMode::parse(value)))
        .unwrap_or_default();
    let selector =
        text("selector").and_then(|value| noted(&mut problems, ObjectSelector::parse(value)));
    let component = match (text(SOURCE_KEY), text(PARTS_KEY)) {
        (Some(_), Some(_)) => Err(format!(
            "`{SOURCE_KEY}` and `{PARTS_KEY}` are exclusive: a check comes from a registry or from ConfigMaps"
        )),
        (Some(_), None)
            if config_map
                .binary_data
                .as_ref()
                .is_some_and(|data| !data.is_empty()) =>
        {
            Err(format!(
                "a check with `{SOURCE_KEY}` carries no binaryData: its component comes from the registry"
            ))
        }
        (Some(_), None) => match oci_reference(config_map) {
            Some(Err(problem)) => Err(problem),
            _ => pulled.unwrap_or_else(|| Err("its source was not pulled".to_owned())),
        },
        (None, Some(count)) => parts::assemble(&name, count, text("sha256"), parts)
            .and_then(|bytes| decompress(&bytes)),
        (None, None) => read_component(config_map),
    };
    for key in ["pullSecret", "followTag"] {
        if text(key).is_some() && text(SOURCE_KEY).is_none() {
            problems.push(format!(
                "`{key}` applies only to a check with `{SOURCE_KEY}`"
            ));
        }
    }
    if text(SIGNATURE_KEY).is_some() && text(SOURCE_KEY).is_some() {
        problems.push(format!(
            "`{SIGNATURE_KEY}` applies only to a check carried in ConfigMaps: a check with `{SOURCE_KEY}` is \
             verified against the cosign signatures stored beside it in its registry"
        ));
    }
    if let Some(Err(problem)) = text("verify").map(KeyReference::parse) {
        problems.push(problem);
    }
    let component = component.map_err(|problem| problems.push(problem)).ok();
    if let (Some(component), Some(pinned)) = (&component, text("sha256")) {
        match (Digest::parse(pinned), Digest::of(component)) {
            (None, _) => problems.push(format!("sha256 `{pinned}` is not 64 hexadecimal digits")),
            (Some(pinned), actual) if pinned != actual => problems.push(format!(
                "the component's sha256 is {actual}, not the pinned {pinned}"
            )),
            _ => {}
        }
    }
    match (gates, component) {
        (Some(gates), Some(component)) if problems.is_empty() => Ok(CheckSource {
            settings: CheckSettings {
                name,
                gates,
                versions,
                order,
                limits,
                failure_policy,
                suspended,
                config,
                pause,
                capabilities,
                outputs,
                mode,
                selector,
            },
            component,
        }),
        (gates, _) => Err(Rejection {
            gates,
            failure_policy,
            mode,
            selector,
            pause: pause.map(Box::new),
            problem: problems.join("; "),
            cause: RejectionCause::ConfigMap,
        }),
    }
}

/// The registry reference of a check ConfigMap that names a `source`: `None` without one. A tag alone is
/// refused unless the ConfigMap pins the component (`sha256`) or opts in with `followTag: "true"` (the
/// operator then runs whatever the tag names when the ConfigMap is loaded, and logs its digest).
pub(crate) fn oci_reference(
    config_map: &ConfigMap,
) -> Option<Result<preflight_oci::CheckReference, String>> {
    let data = config_map.data.as_ref()?;
    let source = data.get(SOURCE_KEY)?.trim();
    let follow_tag = data.get("followTag").map(|value| value.trim());
    Some(
        preflight_oci::CheckReference::parse(source)
            .map_err(|error| error.to_string())
            .and_then(|reference| {
                if !source.starts_with("oci://") {
                    return Err(format!("source `{source}` must start with oci://"));
                }
                match follow_tag {
                    None | Some("false") | Some("true") => {}
                    Some(other) => {
                        return Err(format!("followTag `{other}` is neither true nor false"));
                    }
                }
                let pinned = reference.digest().is_some() || data.contains_key("sha256");
                if pinned || follow_tag == Some("true") {
                    Ok(reference)
                } else {
                    Err(format!(
                        "source `{source}` names a tag without a pin: append @sha256:<manifest digest> \
                         (`preflight push` prints it), pin the component with `sha256`, or set \
                         followTag: \"true\" to run whatever the tag names"
                    ))
                }
            }),
    )
}

/// The value of `result`, or `None` with its problem noted.
fn noted<T>(problems: &mut Vec<String>, result: Result<T, String>) -> Option<T> {
    result.map_err(|problem| problems.push(problem)).ok()
}

/// The component: `binaryData[check.wasm]`, or the only `binaryData` entry; decompressed when it starts
/// with the zstd or gzip magic number.
fn read_component(config_map: &ConfigMap) -> Result<Vec<u8>, String> {
    let entries = config_map
        .binary_data
        .as_ref()
        .filter(|entries| !entries.is_empty())
        .ok_or(
            "it carries no component: put the .wasm in binaryData (kubectl create configmap --from-file=check.wasm), \
             or ship it in parts with `preflight pack`",
        )?;
    let entry = match entries.get(COMPONENT_KEY) {
        Some(entry) => entry,
        None if entries.len() == 1 => entries.values().next().ok_or("no component")?,
        None => {
            return Err(format!(
                "it carries several binaryData entries and none is named {COMPONENT_KEY}"
            ));
        }
    };
    decompress(&entry.0)
}

/// Decompresses zstd or gzip data, refusing more than [`MAX_COMPONENT_BYTES`]; other bytes pass through.
fn decompress(bytes: &[u8]) -> Result<Vec<u8>, String> {
    const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
    const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
    let (format, reader): (&str, Box<dyn Read + '_>) = if bytes.starts_with(&ZSTD_MAGIC) {
        let decoder = zstd::stream::read::Decoder::new(bytes)
            .map_err(|error| format!("cannot read the zstd component: {error}"))?;
        ("zstd", Box::new(decoder))
    } else if bytes.starts_with(&GZIP_MAGIC) {
        ("gzip", Box::new(flate2::read::GzDecoder::new(bytes)))
    } else {
        return Ok(bytes.to_vec());
    };
    let mut component = Vec::new();
    reader
        .take(MAX_COMPONENT_BYTES as u64 + 1)
        .read_to_end(&mut component)
        .map_err(|error| format!("cannot decompress the {format} component: {error}"))?;
    if component.len() > MAX_COMPONENT_BYTES {
        return Err(format!(
            "the {format} component decompresses to more than {} MiB",
            MAX_COMPONENT_BYTES >> 20
        ));
    }
    Ok(component)
}

/// The `isolation` key (`fresh`, the default, or `reuse`) and `maxUses` (evaluations per reused instance,
/// only with `reuse`; default [`Isolation::DEFAULT_MAX_USES`]).
fn isolation(
    isolation: Option<&str>,
    max_uses: Option<&str>,
    problems: &mut Vec<String>,
) -> Isolation {
    let max_uses = max_uses.and_then(|value| match value.parse::<u32>() {
        Ok(uses) if uses > 0 => Some(uses),
        _ => {
            problems.push(format!("maxUses `{value}` is not a positive integer"));
            None
        }
    });
    match isolation.unwrap_or("fresh") {
        "fresh" => {
            if max_uses.is_some() {
                problems.push("maxUses applies only to `isolation: reuse`".to_owned());
            }
            Isolation::Fresh
        }
        "reuse" => Isolation::Reuse {
            max_uses: max_uses.unwrap_or(Isolation::DEFAULT_MAX_USES),
        },
        other => {
            problems.push(format!(
                "isolation `{other}` is neither `fresh` nor `reuse`"
            ));
            Isolation::Fresh
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;
    use std::collections::BTreeMap;
    use std::io::Write;
    use std::time::Duration;

    const WASM: &[u8] = b"\0asm\x0d\0\x01\0 pretend component";

    fn config_map(
        labels: &[(&str, &str)],
        data: &[(&str, &str)],
        binary: &[(&str, &[u8])],
    ) -> ConfigMap {
        let strings = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>()
        };
        let mut config_map = ConfigMap::default();
        config_map.metadata.name = Some("dependency-ready".into());
        config_map.metadata.namespace = Some("preflight-system".into());
        config_map.metadata.labels = Some(strings(labels));
        config_map.data = Some(strings(data));
        config_map.binary_data = Some(
            binary
                .iter()
                .map(|(k, v)| (k.to_string(), ByteString(v.to_vec())))
                .collect(),
        );
        config_map
    }

    fn from_config_maps_alone(
        config_map: &ConfigMap,
        defaults: &Limits,
    ) -> Result<CheckSource, Rejection> {
        from_config_maps(config_map, &[], defaults)
    }

    fn rejection(config_map: &ConfigMap) -> Rejection {
        from_config_maps_alone(config_map, &Limits::default()).unwrap_err()
    }

    #[test]
    fn the_simple_case_is_one_file_and_one_label() {
        let source = from_config_maps_alone(
            &config_map(
                &[(GATES_LABEL, "App.apps.example.com")],
                &[],
                &[("any-name.wasm", WASM)],
            ),
            &Limits::default(),
        )
        .unwrap();
        assert_eq!(source.settings.name, "preflight-system/dependency-ready");
        assert_eq!(source.settings.gates.to_string(), "App.apps.example.com");
        assert_eq!(source.component, WASM);
        assert_eq!(
            (
                source.settings.order,
                source.settings.failure_policy,
                source.settings.config.as_str()
            ),
            (0, FailurePolicy::Fail, "{}")
        );
        assert_eq!(source.settings.limits, Limits::default());
    }

    #[test]
    fn reads_every_setting() {
        let pinned = Digest::of(WASM).to_string();
        let source = from_config_maps_alone(
            &config_map(
                &[(GATES_LABEL, "Ignored.by.data")],
                &[
                    ("gates", "Database.db.example.com"),
                    ("versions", "v1, v2"),
                    ("order", "-3"),
                    ("timeout", "250ms"),
                    ("memoryLimit", "16MiB"),
                    ("isolation", "reuse"),
                    ("maxUses", "20"),
                    ("failurePolicy", "Ignore"),
                    ("suspend", "true"),
                    ("config", "available: [postgres]\nretryAfterSeconds: 5"),
                    ("sha256", &pinned),
                ],
                &[(COMPONENT_KEY, WASM), ("README.bin", b"other")],
            ),
            &Limits::default(),
        )
        .unwrap();
        assert_eq!(source.settings.gates.to_string(), "Database.db.example.com");
        assert_eq!(source.settings.versions, ["v1", "v2"]);
        assert_eq!(source.settings.order, -3);
        assert_eq!(source.settings.limits.timeout, Duration::from_millis(250));
        assert_eq!(source.settings.limits.memory_bytes, 16 << 20);
        assert_eq!(
            source.settings.limits.isolation,
            Isolation::Reuse { max_uses: 20 }
        );
        assert_eq!(source.settings.failure_policy, FailurePolicy::Ignore);
        assert!(source.settings.suspended);
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&source.settings.config).unwrap(),
            serde_json::json!({"available": ["postgres"], "retryAfterSeconds": 5})
        );
    }

    #[test]
    fn decompresses_zstd_and_gzip() {
        let zstd = zstd::encode_all(WASM, 3).unwrap();
        let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gzip.write_all(WASM).unwrap();
        let gzip = gzip.finish().unwrap();
        for compressed in [zstd, gzip] {
            let source = from_config_maps_alone(
                &config_map(
                    &[(GATES_LABEL, "App.example.com")],
                    &[],
                    &[("check.wasm.zst", &compressed)],
                ),
                &Limits::default(),
            )
            .unwrap();
            assert_eq!(source.component, WASM);
        }
    }

    #[test]
    fn refuses_a_decompression_bomb() {
        let bomb = zstd::encode_all(&vec![0u8; MAX_COMPONENT_BYTES + 1][..], 19).unwrap();
        assert!(
            bomb.len() < 64 << 10,
            "the bomb is small: {} bytes",
            bomb.len()
        );
        let rejected = rejection(&config_map(
            &[(GATES_LABEL, "App.example.com")],
            &[],
            &[("c", &bomb)],
        ));
        assert!(
            rejected
                .problem
                .contains("decompresses to more than 64 MiB"),
            "{}",
            rejected.problem
        );
    }

    #[test]
    fn reports_every_problem_and_what_could_be_read() {
        let rejected = rejection(&config_map(
            &[(GATES_LABEL, "App.apps.example.com")],
            &[
                ("failurePolicy", "Ignore"),
                ("timout", "2s"),
                ("order", "first"),
                ("timeout", "soon"),
                ("memoryLimit", "lots"),
                ("isolation", "shared"),
                ("maxUses", "0"),
                ("config", "{unclosed"),
                ("sha256", &"0".repeat(64)),
            ],
            &[("check.wasm", WASM)],
        ));
        assert_eq!(rejected.gates, GatedKind::parse("App.apps.example.com"));
        assert_eq!(rejected.failure_policy, FailurePolicy::Ignore);
        assert_mentions(
            &rejected,
            &[
                "unknown data key `timout`",
                "order `first` is not an integer",
                "timeout `soon`",
                "memoryLimit `lots`",
                "isolation `shared` is neither `fresh` nor `reuse`",
                "maxUses `0` is not a positive integer",
                "config is not YAML or JSON",
                "not the pinned 0000",
            ],
        );
    }

    #[test]
    fn refuses_timeouts_beyond_the_engine_cap() {
        let label = [(GATES_LABEL, "App.example.com")];
        for timeout in ["100000h", "61s", "0s"] {
            let rejected = rejection(&config_map(&label, &[("timeout", timeout)], &[("c", WASM)]));
            assert_mentions(&rejected, &["is not a duration between 1ms and 1m"]);
        }
    }

    #[test]
    fn rejects_a_config_map_without_kind_or_component() {
        let rejected = rejection(&config_map(&[], &[], &[]));
        assert_eq!(rejected.gates, None);
        assert_mentions(&rejected, &["names no kind", "carries no component"]);
        let ambiguous = rejection(&config_map(
            &[(GATES_LABEL, "App.example.com")],
            &[("failurePolicy", "Sometimes"), ("suspend", "yes")],
            &[("a.wasm", WASM), ("b.wasm", WASM)],
        ));
        assert_mentions(
            &ambiguous,
            &[
                "several binaryData entries",
                "neither Fail nor Ignore",
                "suspend `yes` is neither true nor false",
            ],
        );
        let bad_kind = rejection(&config_map(
            &[(GATES_LABEL, "apps/v1")],
            &[],
            &[("c", WASM)],
        ));
        assert_mentions(&bad_kind, &["is not a kind"]);
    }

    #[test]
    fn reads_the_mode_and_the_selector_and_keeps_them_when_the_check_is_rejected() {
        let selector = "matchLabels: {env: staging}\nmatchExpressions:\n- {key: tier, operator: In, values: [web, api]}";
        let source = from_config_maps_alone(
            &config_map(
                &[(GATES_LABEL, "App.example.com")],
                &[("mode", "monitor"), ("selector", selector)],
                &[(COMPONENT_KEY, WASM)],
            ),
            &Limits::default(),
        )
        .unwrap();
        assert_eq!(source.settings.mode, CheckMode::Monitor);
        let chosen = source.settings.selector.clone().unwrap();
        let labels = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
                .collect()
        };
        assert!(chosen.matches(&labels(&[("env", "staging"), ("tier", "web")])));
        assert!(!chosen.matches(&labels(&[("env", "production"), ("tier", "web")])));
        assert!(!chosen.matches(&labels(&[("env", "staging")])));
        // Without a component the check is rejected, but what it gates is still known.
        let broken = rejection(&config_map(
            &[(GATES_LABEL, "App.example.com")],
            &[("mode", "monitor"), ("selector", selector)],
            &[],
        ));
        assert_eq!(broken.mode, CheckMode::Monitor);
        assert_eq!(broken.selector, Some(chosen));
    }

    #[test]
    fn refuses_an_unknown_mode_and_a_selector_it_cannot_read_exactly() {
        for (mode, selector, problem) in [
            (
                "audit",
                "matchLabels: {env: staging}",
                "mode `audit` is neither enforce nor monitor",
            ),
            (
                "enforce",
                "matchLabel: {env: staging}",
                "unknown key `matchLabel`",
            ),
            ("enforce", "env=staging", "selector is not a label selector"),
            (
                "enforce",
                "matchExpressions: [{key: env, operator: Near, values: [a]}]",
                "Invalid expression operator",
            ),
            (
                "enforce",
                "matchExpressions: [{key: env, operator: In}]",
                "Expected values",
            ),
        ] {
            let refused = rejection(&config_map(
                &[(GATES_LABEL, "App.example.com")],
                &[("mode", mode), ("selector", selector)],
                &[(COMPONENT_KEY, WASM)],
            ));
            assert_mentions(&refused, &[problem]);
        }
    }

    fn assert_mentions(rejection: &Rejection, expected: &[&str]) {
        for text in expected {
            assert!(
                rejection.problem.contains(text),
                "{text:?} in {}",
                rejection.problem
            );
        }
    }

    /// Components in parts, as `preflight pack` writes them, read back by the parser.
    mod from_parts {
        use super::*;
        use crate::config_map_format::PART_KEY;
        use crate::parts::{Package, pack};
        use preflight_engine::Limits;

        /// Bytes that compress poorly, so that parts are needed.
        fn component(len: usize) -> Vec<u8> {
            let mut state = 0x2545_f491_4f6c_dd1du64;
            let mut bytes = b"\0asm\x0d\0\x01\0".to_vec();
            bytes.extend((0..len).map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            }));
            bytes
        }

        fn package(component: &[u8], max_part_bytes: usize) -> Vec<ConfigMap> {
            pack(&Package {
                component,
                name: "deps",
                namespace: "preflight-system",
                gates: "App.apps.example.com",
                data: BTreeMap::from([("config".to_owned(), "{}".to_owned())]),
                max_part_bytes,
            })
            .unwrap()
        }

        fn read(config_maps: &[ConfigMap]) -> Result<Vec<u8>, String> {
            let (main, parts) = config_maps.split_last().unwrap();
            from_config_maps(main, parts, &Limits::default())
                .map(|source| source.component)
                .map_err(|rejection| rejection.problem)
        }

        #[test]
        fn a_small_component_is_one_config_map_and_a_large_one_parts_that_reassemble() {
            let small = component(1000);
            let single = package(&small, 900 << 10);
            assert_eq!(single.len(), 1);
            assert_eq!(read(&single).unwrap(), small);

            let large = component(50_000);
            let parts = package(&large, 16_000);
            assert_eq!(parts.len(), 5, "four parts and the check");
            assert!(parts[..4].iter().all(|part| part.immutable == Some(true)));
            assert_eq!(read(&parts).unwrap(), large);
        }

        #[test]
        fn broken_parts_are_rejected_by_number_and_never_mixed() {
            let large = component(50_000);
            let parts = package(&large, 16_000);
            let problem = |parts: &[ConfigMap]| read(parts).unwrap_err();

            let mut missing = parts.clone();
            missing.remove(1);
            assert!(
                problem(&missing).contains("part 2 of 4"),
                "{}",
                problem(&missing)
            );

            let mut corrupted = parts.clone();
            corrupted[2]
                .binary_data
                .as_mut()
                .unwrap()
                .get_mut(PART_KEY)
                .unwrap()
                .0[100] ^= 0xff;
            let corrupt = problem(&corrupted);
            assert!(
                corrupt.contains("cannot decompress") || corrupt.contains("sha256"),
                "{corrupt}"
            );

            let other = package(&component(50_001), 16_000);
            let mut mixed = parts.clone();
            mixed[1] = other[1].clone();
            let mixing = problem(&mixed);
            assert!(
                mixing.contains("part 2 of 4") && mixing.contains("other versions"),
                "{mixing}"
            );

            let mut wrong_pin = parts.clone();
            let main = wrong_pin.last_mut().unwrap();
            main.data
                .as_mut()
                .unwrap()
                .insert("sha256".into(), Digest::of(b"x").to_string());
            assert!(
                problem(&wrong_pin).contains("missing"),
                "{}",
                problem(&wrong_pin)
            );

            let mut duplicate = parts.clone();
            let mut copy = parts[0].clone();
            copy.metadata.name = Some("deps-copy".into());
            duplicate.insert(0, copy);
            assert!(
                problem(&duplicate).contains("appears 2 times"),
                "{}",
                problem(&duplicate)
            );
        }

        #[test]
        fn a_component_too_large_even_in_parts_names_its_size_and_the_limit() {
            let error = pack(&Package {
                component: &component(200_000),
                name: "big",
                namespace: "ns",
                gates: "A.b",
                data: BTreeMap::new(),
                max_part_bytes: 1000,
            })
            .unwrap_err();
            assert!(
                error.contains("more than 64 parts of 1000 bytes"),
                "{error}"
            );
        }
    }
}
