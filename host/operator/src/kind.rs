//! The kind a check gates, named the way `kubectl` names it: `Kind.group` (`App.apps.example.com`), or just
//! `Kind` for the core group.

use std::fmt;

/// An API group and kind, without a version: checks gate a kind in every version the server serves.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GatedKind {
    /// The API group, empty for the core group.
    pub group: String,
    /// The kind, e.g. `App`.
    pub kind: String,
}

impl GatedKind {
    /// Parses `Kind.group` or `Kind`; `None` when the kind is empty or not an identifier.
    pub fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        let (kind, group) = match text.split_once('.') {
            Some((kind, group)) => (kind, Some(group)),
            None => (text, None),
        };
        let valid_kind = kind.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && kind.chars().all(|c| c.is_ascii_alphanumeric());
        let valid_group = group.is_none_or(|group| {
            group.split('.').all(|part| {
                !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            })
        });
        (valid_kind && valid_group).then(|| Self {
            group: group.unwrap_or_default().to_ascii_lowercase(),
            kind: kind.to_owned(),
        })
    }
}

impl fmt::Display for GatedKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.kind)
        } else {
            write!(f, "{}.{}", self.kind, self.group)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kind_dot_group_and_core_kinds() {
        let app = GatedKind::parse("App.apps.example.com").unwrap();
        assert_eq!(
            (app.kind.as_str(), app.group.as_str()),
            ("App", "apps.example.com")
        );
        assert_eq!(app.to_string(), "App.apps.example.com");
        let pod = GatedKind::parse(" Pod ").unwrap();
        assert_eq!((pod.kind.as_str(), pod.group.as_str()), ("Pod", ""));
        assert_eq!(pod.to_string(), "Pod");
        for invalid in [
            "",
            ".apps",
            "App.",
            "App..example.com",
            "1App",
            "App/v1",
            "App.exa mple",
        ] {
            assert_eq!(GatedKind::parse(invalid), None, "{invalid:?}");
        }
    }
}
