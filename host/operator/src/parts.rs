//! Components too large for one ConfigMap (a ConfigMap holds at most 1 MiB; Python and JavaScript checks
//! are several MB): `preflight pack` splits the zstd-compressed component into immutable part ConfigMaps,
//! and the operator reassembles and verifies them.
//!
//! - A part is a ConfigMap labelled `preflight.dev/part-of: <check ConfigMap name>` and
//!   `preflight.dev/part: <i>` (1-based), with `data.parts` (how many there are), `data.sha256` (the whole
//!   component's digest, after decompression) and `binaryData.part` (its slice of the compressed bytes).
//! - The check ConfigMap carries the settings, `data.parts` and `data.sha256`, and no `binaryData`.
//! - Only parts whose `sha256` is the check's are used, so parts of two versions never mix; a missing,
//!   duplicate or inconsistent part is reported by number, and the reassembled bytes must decompress
//!   (within the cap) to a component with the pinned digest.

use crate::config_map_format::{
    COMPONENT_KEY, GATES_LABEL, MAX_COMPONENT_BYTES, MAX_PARTS, PART_KEY, PART_LABEL,
    PART_OF_LABEL, PARTS_KEY, VERSION_LABEL,
};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use preflight_engine::Digest;
use std::collections::BTreeMap;

/// Whether `config_map` is a check shipped in parts (it says how many: `data.parts`).
pub(crate) fn ships_in_parts(config_map: &ConfigMap) -> bool {
    config_map
        .data
        .as_ref()
        .is_some_and(|data| data.contains_key(PARTS_KEY))
}

/// Reassembles the compressed component of check `check` from `parts`: the `count` parts whose `sha256`
/// is `pinned`, in order. The caller decompresses and verifies the digest.
pub(crate) fn assemble(
    check: &str,
    count: &str,
    pinned: Option<&str>,
    parts: &[ConfigMap],
) -> Result<Vec<u8>, String> {
    let count: usize = count
        .parse()
        .ok()
        .filter(|count| (1..=MAX_PARTS).contains(count))
        .ok_or_else(|| format!("parts `{count}` is not a number from 1 to {MAX_PARTS}"))?;
    let pinned = pinned.ok_or(
        "a check in parts needs data `sha256` (the whole component's digest), so that parts of two \
         versions are never mixed",
    )?;
    let data = |part: &ConfigMap, key: &str| -> Option<String> {
        part.data
            .as_ref()?
            .get(key)
            .map(|value| value.trim().to_owned())
    };
    let (ours, others): (Vec<&ConfigMap>, Vec<&ConfigMap>) = parts
        .iter()
        .partition(|part| data(part, "sha256").as_deref() == Some(pinned));
    let mut bytes = Vec::new();
    for index in 1..=count {
        let found: Vec<&&ConfigMap> = ours
            .iter()
            .filter(|part| {
                part.metadata
                    .labels
                    .as_ref()
                    .and_then(|labels| labels.get(PART_LABEL))
                    .is_some_and(|label| label == &index.to_string())
            })
            .collect();
        let part = match found.as_slice() {
            [part] => part,
            [] => {
                let versions: std::collections::BTreeSet<String> = others
                    .iter()
                    .filter_map(|part| data(part, "sha256"))
                    .collect();
                let mixed = if versions.is_empty() {
                    String::new()
                } else {
                    format!(
                        " (parts of other versions are present: {}; they are not mixed in)",
                        versions.into_iter().collect::<Vec<_>>().join(", ")
                    )
                };
                return Err(format!(
                    "part {index} of {count} of {check} (sha256 {pinned}) is missing{mixed}"
                ));
            }
            several => {
                return Err(format!(
                    "part {index} of {count} of {check} appears {} times",
                    several.len()
                ));
            }
        };
        let name = part.metadata.name.as_deref().unwrap_or_default();
        if data(part, PARTS_KEY).as_deref() != Some(&count.to_string()) {
            return Err(format!(
                "part {index} ({name}) does not say it is one of {count} parts"
            ));
        }
        let slice = part
            .binary_data
            .as_ref()
            .and_then(|binary| binary.get(PART_KEY))
            .ok_or_else(|| format!("part {index} ({name}) has no binaryData `{PART_KEY}`"))?;
        bytes.extend_from_slice(&slice.0);
        if bytes.len() > MAX_COMPONENT_BYTES {
            return Err(format!(
                "the parts hold more than {} MiB",
                MAX_COMPONENT_BYTES >> 20
            ));
        }
    }
    Ok(bytes)
}

/// What `preflight pack` is given.
#[derive(Debug, Clone)]
pub struct Package<'a> {
    /// The component (uncompressed).
    pub component: &'a [u8],
    /// The check ConfigMap's name.
    pub name: &'a str,
    /// Its namespace (the operator's).
    pub namespace: &'a str,
    /// The kind it gates, `Kind.group`.
    pub gates: &'a str,
    /// Other data keys (`config`, `timeout`, `http`, ...).
    pub data: BTreeMap<String, String>,
    /// Largest part, in bytes.
    pub max_part_bytes: usize,
}

/// zstd's level for a packed component. 9, not the densest 19: an 18.5 MB Python check packs in half a second
/// instead of ten, for 15 % more bytes (5.2 MB against 4.5; docs/performance.md).
const PACK_LEVEL: i32 = 9;

/// The ConfigMaps that ship `package`: one ConfigMap with the zstd-compressed component when it fits in
/// `max_part_bytes`, else the parts followed by the check ConfigMap (apply them in this order). The
/// check ConfigMap pins the component's sha256 either way.
pub fn pack(package: &Package<'_>) -> Result<Vec<ConfigMap>, String> {
    refuse_invalid_names(package.name, package.namespace)?;
    if package.component.len() > MAX_COMPONENT_BYTES {
        return Err(format!(
            "the component is {} bytes; the operator accepts at most {MAX_COMPONENT_BYTES}",
            package.component.len()
        ));
    }
    let compressed = zstd::encode_all(package.component, PACK_LEVEL)
        .map_err(|error| format!("compressing the component: {error}"))?;
    let digest = Digest::of(package.component).to_string();
    let part_bytes = package.max_part_bytes.max(1);
    let count = compressed.len().div_ceil(part_bytes);
    if count > MAX_PARTS {
        return Err(format!(
            "the component is {} bytes, {} compressed: more than {MAX_PARTS} parts of {part_bytes} bytes \
             ({} bytes at most)",
            package.component.len(),
            compressed.len(),
            MAX_PARTS * part_bytes
        ));
    }
    let config_map =
        |name: String, labels: BTreeMap<String, String>, data: BTreeMap<String, String>| {
            let mut config_map = ConfigMap::default();
            config_map.metadata.name = Some(name);
            config_map.metadata.namespace = Some(package.namespace.to_owned());
            config_map.metadata.labels = Some(labels);
            config_map.data = Some(data);
            config_map
        };
    let mut main_data = package.data.clone();
    main_data.insert("sha256".to_owned(), digest.clone());
    let gates = BTreeMap::from([(GATES_LABEL.to_owned(), package.gates.to_owned())]);
    if count == 1 {
        let mut main = config_map(package.name.to_owned(), gates, main_data);
        main.binary_data = Some(BTreeMap::from([(
            COMPONENT_KEY.to_owned(),
            ByteString(compressed),
        )]));
        return Ok(vec![main]);
    }
    if package.name.len() > MAX_LABEL_VALUE {
        return Err(format!(
            "the check ships in {count} parts, which name it in a label, and label values are at most \
             {MAX_LABEL_VALUE} characters: --name `{}` has {}",
            package.name,
            package.name.len()
        ));
    }
    let version = digest[..16].to_owned();
    let mut config_maps: Vec<ConfigMap> = compressed
        .chunks(part_bytes)
        .enumerate()
        .map(|(i, slice)| {
            let index = (i + 1).to_string();
            let labels = BTreeMap::from([
                (PART_OF_LABEL.to_owned(), package.name.to_owned()),
                (PART_LABEL.to_owned(), index.clone()),
                (VERSION_LABEL.to_owned(), version.clone()),
            ]);
            let data = BTreeMap::from([
                (PARTS_KEY.to_owned(), count.to_string()),
                ("sha256".to_owned(), digest.clone()),
            ]);
            let mut part = config_map(format!("{}-{version}-{index}", package.name), labels, data);
            part.immutable = Some(true);
            part.binary_data = Some(BTreeMap::from([(
                PART_KEY.to_owned(),
                ByteString(slice.to_vec()),
            )]));
            part
        })
        .collect();
    main_data.insert(PARTS_KEY.to_owned(), count.to_string());
    config_maps.push(config_map(package.name.to_owned(), gates, main_data));
    Ok(config_maps)
}

/// The longest name of an object the API server accepts (a DNS subdomain).
const MAX_NAME: usize = 253;
/// The longest namespace name, and label value, the API server accepts.
const MAX_LABEL_VALUE: usize = 63;

/// Refuses, naming the rule, a ConfigMap name that is no DNS subdomain name (lowercase letters, digits,
/// `-` and `.`, starting and ending with a letter or digit, at most 253 characters) or a namespace that
/// is no DNS label (the same without `.`, at most 63), which `kubectl apply` would refuse.
fn refuse_invalid_names(name: &str, namespace: &str) -> Result<(), String> {
    let rule = |what: &str, value: &str, dots: bool, max: usize| {
        let allowed = |c: char| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || (dots && c == '.')
        };
        let ends =
            |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
        let valid = value.len() <= max
            && value.chars().all(allowed)
            && ends(value.chars().next())
            && ends(value.chars().last());
        match valid {
            true => Ok(()),
            false => Err(format!(
                "{what} `{value}` is not a valid Kubernetes name: lowercase letters, digits{}, starting and \
                 ending with a letter or digit, at most {max} characters",
                if dots { ", `-` and `.`" } else { " and `-`" }
            )),
        }
    };
    rule("--name", name, true, MAX_NAME)?;
    rule("--namespace", namespace, false, MAX_LABEL_VALUE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_api_server_would_refuse_are_refused() {
        let table = [
            ("deps", "preflight-system", true),
            ("deps.v2", "team-a", true),
            ("a", "b", true),
            (&"d".repeat(253)[..], "ns", true),
            (&"d".repeat(254)[..], "ns", false),
            ("Deps", "ns", false),
            ("deps_v2", "ns", false),
            ("-deps", "ns", false),
            ("deps.", "ns", false),
            ("", "ns", false),
            ("deps", "team.a", false),
            ("deps", &"n".repeat(64)[..], false),
            ("deps", "", false),
        ];
        for (name, namespace, valid) in table {
            assert_eq!(
                refuse_invalid_names(name, namespace).is_ok(),
                valid,
                "{name} in {namespace}: {:?}",
                refuse_invalid_names(name, namespace)
            );
        }
    }

    #[test]
    fn a_check_in_parts_needs_a_name_that_fits_a_label_value() {
        // Bytes that do not compress: 4 KiB make a few parts of 1 KiB.
        let mut state = 0x9E37_79B9_7F4A_7C15_u64;
        let component: Vec<u8> = (0..4096)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        let pack_as = |name: &str, max_part_bytes| {
            pack(&Package {
                component: &component,
                name,
                namespace: "preflight-system",
                gates: "App.apps.example.com",
                data: BTreeMap::new(),
                max_part_bytes,
            })
        };
        let (long, fits) = ("d".repeat(64), "d".repeat(63));
        assert_eq!(pack_as(&long, 1 << 20).unwrap().len(), 1);
        let refused = pack_as(&long, 1024).unwrap_err();
        assert!(
            refused.contains("label values are at most 63 characters"),
            "{refused}"
        );
        assert!(pack_as(&fits, 1024).unwrap().len() > 2);
    }
}
