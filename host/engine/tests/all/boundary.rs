//! The engine knows nothing of Kubernetes, HTTP serving, CLI parsing or metrics: an operator author who
//! embeds the gate, or a host of another kind, gets wasmtime and the engine only. This fails the build when
//! one of those crates enters the engine's normal dependency tree. (hyper is allowed since contract 0.2: it
//! is the HTTP client of checks' outbound `wasi:http`, as in wasmtime-wasi-http; serving stays out.)
//! Also: no module of the host imports a module that imports it back (a reader can follow any file downward).

/// Crates the engine must never depend on, directly or not.
const FORBIDDEN: [&str; 6] = [
    "kube",
    "k8s-openapi",
    "axum",
    "tower-http",
    "clap",
    "prometheus-client",
];

#[test]
fn the_engine_depends_on_no_kubernetes_server_cli_or_metrics_crate() {
    let crates = preflight_test_support::normal_dependencies("preflight-engine");
    assert!(
        crates.iter().any(|name| name == "wasmtime"),
        "the tree was read: {crates:?}"
    );
    let found: Vec<&&str> = FORBIDDEN
        .iter()
        .filter(|name| crates.iter().any(|crate_name| crate_name == **name))
        .collect();
    assert!(found.is_empty(), "preflight-engine depends on {found:?}");
}

/// The modules of a crate's `src/` (a top-level file, or a directory of files) and the other modules each
/// one names as `crate::module` or `super::module` (comments left out, tests included).
fn module_graph(src: &std::path::Path) -> std::collections::BTreeMap<String, Vec<String>> {
    use std::collections::BTreeMap;
    let mut sources: BTreeMap<String, String> = BTreeMap::new();
    for entry in std::fs::read_dir(src).unwrap() {
        let path = entry.unwrap().path();
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            let text: String = std::fs::read_dir(&path)
                .unwrap()
                .map(|file| std::fs::read_to_string(file.unwrap().path()).unwrap())
                .collect();
            sources.entry(stem).or_default().push_str(&text);
        } else if path.extension().is_some_and(|ext| ext == "rs") && stem != "lib" && stem != "main"
        {
            let text = std::fs::read_to_string(&path).unwrap();
            sources.entry(stem).or_default().push_str(&text);
        }
    }
    let names: Vec<String> = sources.keys().cloned().collect();
    sources
        .iter()
        .map(|(module, text)| {
            let code: String = text
                .lines()
                .map(|line| line.split("//").next().unwrap_or_default())
                .collect::<Vec<_>>()
                .join("\n");
            let named = |other: &str| {
                let paths = code
                    .match_indices("crate::")
                    .chain(code.match_indices("super::"));
                paths.into_iter().any(|(at, prefix)| {
                    let after = &code[at + prefix.len()..];
                    let direct = after.strip_prefix(other).is_some_and(|rest| {
                        !rest.starts_with(|c: char| c.is_alphanumeric() || c == '_')
                    });
                    let grouped = after.starts_with('{')
                        && after[1..after.find('}').unwrap_or(after.len())]
                            .split([',', ' ', '\n', '{'])
                            .any(|item| item.trim().split("::").next() == Some(other));
                    direct || grouped
                })
            };
            let edges = names
                .iter()
                .filter(|other| *other != module && named(other))
                .cloned()
                .collect();
            (module.clone(), edges)
        })
        .collect()
}

/// A module that imports, directly or through others, a module that imports it back, as the path that
/// closes the circle.
fn circle(graph: &std::collections::BTreeMap<String, Vec<String>>) -> Option<Vec<String>> {
    fn visit(
        module: &str,
        graph: &std::collections::BTreeMap<String, Vec<String>>,
        path: &mut Vec<String>,
        done: &mut std::collections::BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|seen| seen == module) {
            let mut circle = path[start..].to_vec();
            circle.push(module.to_owned());
            return Some(circle);
        }
        if done.contains(module) {
            return None;
        }
        path.push(module.to_owned());
        for next in &graph[module] {
            if let Some(circle) = visit(next, graph, path, done) {
                return Some(circle);
            }
        }
        path.pop();
        done.insert(module.to_owned());
        None
    }
    let mut done = std::collections::BTreeSet::new();
    graph
        .keys()
        .find_map(|module| visit(module, graph, &mut Vec::new(), &mut done))
}

#[test]
fn no_module_of_the_host_imports_one_that_imports_it_back() {
    let root = preflight_test_support::workspace_root();
    for krate in [
        "host/engine/src",
        "host/oci/src",
        "host/operator/src",
        "host/cli/src/cli",
    ] {
        let graph = module_graph(&root.join(krate));
        assert!(graph.len() > 3, "{krate} was read: {graph:?}");
        if let Some(circle) = circle(&graph) {
            panic!("{krate}: an import circle: {}", circle.join(" -> "));
        }
    }
    // The detector finds a circle where there is one.
    let made_up = std::collections::BTreeMap::from([
        ("a".to_owned(), vec!["b".to_owned()]),
        ("b".to_owned(), vec!["c".to_owned()]),
        ("c".to_owned(), vec!["a".to_owned()]),
    ]);
    assert_eq!(circle(&made_up).unwrap().join(" -> "), "a -> b -> c -> a");
}
