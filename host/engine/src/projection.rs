//! Projected input: a check may declare the parts of the object it reads (a `preflight-reads` custom
//! section, one path per line; the Rust SDK's `reads!` writes it), and the host then sends only those parts
//! instead of the whole object. Less to copy into a fresh instance and, above all, less for the check to
//! parse: a 4 KiB custom resource with its annotations, status and component list becomes the few fields
//! the check looks at. A check that declares nothing gets the whole object.
//!
//! A path names a field by its keys from the root, separated by dots (`spec.dependsOn`); a key holding a
//! dot goes in brackets (`metadata.annotations[example.com/tier]`). A path that meets a list applies to each
//! item and keeps the list's length; one that meets a scalar keeps the scalar, so the check sees what is
//! there rather than a field that is absent. The object's identity is always sent.

use crate::error::{ComponentProblem, Error};
use serde_json::{Map, Value};

/// The name of the custom section holding a check's declared paths.
pub const READS_SECTION: &str = "preflight-reads";

/// The most paths a check may declare: every evaluation walks each of them.
pub const MAX_PATHS: usize = 256;

/// The longest path accepted, in bytes.
pub const MAX_PATH_BYTES: usize = 1024;

/// Paths sent to every check that declares its reads: the object's identity, which checks name in their
/// messages and SDKs decode into their object types.
const IDENTITY: [&str; 5] = [
    "apiVersion",
    "kind",
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
];

/// The parts of an object a check declared it reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Projection {
    declared: Vec<String>,
    paths: Vec<Vec<String>>,
}

impl Projection {
    /// Parses declared paths (the identity is added). Errors name the path and what is wrong with it.
    pub fn new<S: AsRef<str>>(declared: &[S]) -> Result<Self, String> {
        let declared: Vec<String> = declared.iter().map(|p| p.as_ref().to_owned()).collect();
        if declared.len() > MAX_PATHS {
            return Err(format!(
                "{} paths declared, at most {MAX_PATHS} are accepted (declare a parent instead of its fields)",
                declared.len()
            ));
        }
        let mut paths = IDENTITY
            .iter()
            .map(|path| keys(path))
            .collect::<Result<Vec<_>, _>>()?;
        for path in &declared {
            if path.len() > MAX_PATH_BYTES {
                return Err(format!(
                    "a path of {} bytes, at most {MAX_PATH_BYTES} are accepted",
                    path.len()
                ));
            }
            paths.push(keys(path).map_err(|problem| format!("path `{path}`: {problem}"))?);
        }
        Ok(Self { declared, paths })
    }

    /// The declaration in `component` (every `preflight-reads` section, nested modules included), or `None`
    /// when it declares nothing. An unreadable declaration makes the component invalid: sending the whole
    /// object instead would hide the author's mistake.
    pub fn declared_in(component: &[u8]) -> Result<Option<Self>, Error> {
        let invalid = |problem: String| {
            Error::invalid(
                ComponentProblem::ReadsSection,
                format!("its `{READS_SECTION}` section: {problem}"),
            )
        };
        let mut declared = Vec::new();
        let mut found = false;
        for payload in wasmparser::Parser::new(0).parse_all(component) {
            let payload = payload.map_err(|error| invalid(error.to_string()))?;
            if let wasmparser::Payload::CustomSection(section) = payload
                && section.name() == READS_SECTION
            {
                found = true;
                let text = std::str::from_utf8(section.data())
                    .map_err(|_| invalid("not UTF-8".to_owned()))?;
                declared.extend(
                    text.lines()
                        .filter(|line| !line.is_empty())
                        .map(str::to_owned),
                );
            }
        }
        if !found {
            return Ok(None);
        }
        declared.sort();
        declared.dedup();
        Self::new(&declared).map(Some).map_err(invalid)
    }

    /// The paths as the check declared them (without the identity the host adds).
    pub fn declared(&self) -> &[String] {
        &self.declared
    }

    /// The content of a [`READS_SECTION`] declaring these paths: each followed by a newline.
    pub fn section(&self) -> Vec<u8> {
        self.declared
            .iter()
            .flat_map(|path| path.bytes().chain([b'\n']))
            .collect()
    }

    /// The parts of `object` the check reads, shaped as in `object`.
    pub fn apply(&self, object: &Value) -> Value {
        let mut projected = Value::Object(Map::new());
        for path in &self.paths {
            copy(object, path, &mut projected);
        }
        projected
    }
}

/// The keys of one path: `a.b[c.d].e` is `a`, `b`, `c.d`, `e`.
fn keys(path: &str) -> Result<Vec<String>, String> {
    let mut keys = Vec::new();
    let mut rest = path;
    loop {
        let (key, after) = match rest.strip_prefix('[') {
            Some(bracketed) => bracketed
                .split_once(']')
                .ok_or_else(|| "a `[` without its `]`".to_owned())?,
            None => rest.split_at(rest.find(['.', '[']).unwrap_or(rest.len())),
        };
        if key.is_empty() {
            return Err("an empty key".to_owned());
        }
        keys.push(key.to_owned());
        rest = match after.strip_prefix('.') {
            Some(next) if !next.is_empty() => next,
            Some(_) => return Err("it ends with a dot".to_owned()),
            None if after.is_empty() => return Ok(keys),
            None if after.starts_with('[') => after,
            None => return Err(format!("`{after}` after a bracketed key")),
        };
    }
}

/// Copies the part of `source` that `path` names into `into`, which holds what earlier paths copied.
fn copy(source: &Value, path: &[String], into: &mut Value) {
    let Some((key, rest)) = path.split_first() else {
        *into = source.clone();
        return;
    };
    match source {
        Value::Object(fields) => {
            if !into.is_object() {
                *into = Value::Object(Map::new());
            }
            if let (Some(child), Value::Object(copied)) = (fields.get(key), into) {
                copy(
                    child,
                    rest,
                    copied.entry(key.clone()).or_insert(Value::Null),
                );
            }
        }
        Value::Array(items) => {
            if !matches!(into, Value::Array(copied) if copied.len() == items.len()) {
                *into = Value::Array(vec![Value::Null; items.len()]);
            }
            if let Value::Array(copied) = into {
                for (item, slot) in items.iter().zip(copied) {
                    copy(item, path, slot);
                }
            }
        }
        scalar => *into = scalar.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object() -> Value {
        json!({
            "apiVersion": "apps.example.com/v1",
            "kind": "App",
            "metadata": {"name": "a", "namespace": "ns", "uid": "u", "labels": {"team": "x"},
                "annotations": {"example.com/tier": "gold", "other": "y"}},
            "spec": {"dependsOn": ["db"], "replicas": 3, "mode": "fast",
                "components": [{"name": "c0", "image": "i0", "env": [1]}, {"name": "c1"}, "odd"]},
            "status": {"conditions": [{"type": "Ready"}]},
        })
    }

    fn project(paths: &[&str]) -> Value {
        Projection::new(paths).unwrap().apply(&object())
    }

    #[test]
    fn keeps_the_declared_fields_and_the_identity() {
        let identity = json!({"apiVersion": "apps.example.com/v1", "kind": "App",
            "metadata": {"name": "a", "namespace": "ns", "uid": "u"}});
        let with = |extra: Value| {
            let mut expected = identity.clone();
            for (key, value) in extra.as_object().unwrap() {
                match (expected.get_mut(key), value) {
                    (Some(Value::Object(into)), Value::Object(fields)) => {
                        into.extend(fields.clone())
                    }
                    _ => expected[key] = value.clone(),
                }
            }
            expected
        };
        let table: [(&[&str], Value); 9] = [
            (&[], identity.clone()),
            (
                &["spec.dependsOn"],
                with(json!({"spec": {"dependsOn": ["db"]}})),
            ),
            (&["spec"], with(json!({"spec": object()["spec"]}))),
            (
                &["spec", "spec.mode"],
                with(json!({"spec": object()["spec"]})),
            ),
            (
                &["spec.mode", "spec"],
                with(json!({"spec": object()["spec"]})),
            ),
            (
                &["metadata.annotations[example.com/tier]"],
                with(json!({"metadata": {"annotations": {"example.com/tier": "gold"}}})),
            ),
            (
                &["spec.components.image"],
                with(json!({"spec": {"components": [{"image": "i0"}, {}, "odd"]}})),
            ),
            (&["spec.missing", "nothing.here"], with(json!({"spec": {}}))),
            (
                &["spec.mode.deeper"],
                with(json!({"spec": {"mode": "fast"}})),
            ),
        ];
        for (paths, expected) in table {
            assert_eq!(project(paths), expected, "paths {paths:?}");
        }
    }

    #[test]
    fn its_section_declares_the_same_paths() {
        let projection = Projection::new(&["spec.mode", "metadata.annotations[a.b/c]"]).unwrap();
        assert_eq!(
            projection.section(),
            b"spec.mode\nmetadata.annotations[a.b/c]\n"
        );
    }

    #[test]
    fn all_of_an_object_is_the_object() {
        let all = ["apiVersion", "kind", "metadata", "spec", "status"];
        assert_eq!(project(&all), object());
    }

    #[test]
    fn parses_dotted_and_bracketed_keys() {
        assert_eq!(keys("a.b[c.d].e").unwrap(), ["a", "b", "c.d", "e"]);
        assert_eq!(keys("[a.b][c]").unwrap(), ["a.b", "c"]);
        for (bad, problem) in [
            ("", "an empty key"),
            ("a..b", "an empty key"),
            ("a.", "it ends with a dot"),
            ("a[b", "a `[` without its `]`"),
            ("a[b]c", "`c` after a bracketed key"),
            ("a.[]", "an empty key"),
        ] {
            assert_eq!(keys(bad).unwrap_err(), problem, "path {bad:?}");
        }
        assert_eq!(
            Projection::new(&["spec", "a..b"]).unwrap_err(),
            "path `a..b`: an empty key"
        );
        let many: Vec<String> = (0..=MAX_PATHS).map(|i| format!("spec.f{i}")).collect();
        assert!(Projection::new(&many[1..]).is_ok());
        assert_eq!(
            Projection::new(&many).unwrap_err(),
            "257 paths declared, at most 256 are accepted (declare a parent instead of its fields)"
        );
        assert_eq!(
            Projection::new(&["a".repeat(MAX_PATH_BYTES + 1)]).unwrap_err(),
            "a path of 1025 bytes, at most 1024 are accepted"
        );
    }
}
