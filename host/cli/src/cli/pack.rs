//! `preflight pack`: the ConfigMap manifests that ship a check, ready for `kubectl apply -f`.

use super::{EXIT_PROCEED, PackArgs, Problem, input};
use k8s_openapi::api::core::v1::ConfigMap;
use preflight_engine::{Check, Engine, Limits};
use preflight_operator::LoadedCheck;
use preflight_operator::what_if::{WhatIfError, candidate_from_config_maps};
use std::collections::BTreeMap;
use std::path::Path;

pub async fn pack(args: PackArgs) -> Result<u8, Problem> {
    let component = input::read(&args.check)?;
    // One engine loads the check and asks its validate-config: a check runs only in the engine that loaded it.
    let engine = input::engine(1, 0)?;
    let check = engine.load(&component).map_err(Problem::Unusable)?;
    let data = check_data(&engine, &check, args.config.as_deref(), &args.settings).await?;
    let config_maps = preflight_operator::pack(&preflight_operator::Package {
        component: &component,
        name: &args.name,
        namespace: &args.namespace,
        gates: &args.gates,
        data,
        max_part_bytes: args.max_part_size,
    })
    .map_err(Problem::Input)?;
    // The check is still loaded: reading it back compiles nothing again.
    read_back(&engine, &config_maps)?;
    for config_map in config_maps {
        let mut document =
            serde_json::to_value(&config_map).map_err(|error| Problem::Input(error.to_string()))?;
        document["apiVersion"] = "v1".into();
        document["kind"] = "ConfigMap".into();
        let yaml = serde_norway::to_string(&document)
            .map_err(|error| Problem::Input(error.to_string()))?;
        print!("---\n{yaml}");
    }
    Ok(EXIT_PROCEED)
}

/// Reads the packed ConfigMaps back as the operator reads them, and refuses them as it would (an unknown
/// key, a `timeout` above 1m or a `memoryLimit` above the default `--max-memory`, a `mode`, `selector`,
/// `pause` or `http` it cannot read, a kind that is no `Kind.group`), so that `pack` never writes a
/// ConfigMap that `kubectl apply` accepts and the operator then rejects.
fn read_back(engine: &Engine, config_maps: &[ConfigMap]) -> Result<(), Problem> {
    let refused = |problem: String| {
        Problem::Input(format!(
            "the operator would reject this ConfigMap, so nothing is written: {problem}"
        ))
    };
    let Some((check, parts)) = config_maps.split_last() else {
        return Err(refused("no ConfigMap was made".to_owned()));
    };
    let source =
        candidate_from_config_maps(check, parts, &Limits::default()).map_err(
            |error| match error {
                WhatIfError::Rejected(problem) => refused(problem),
                other => refused(other.to_string()),
            },
        )?;
    LoadedCheck::load(engine, source).map_err(|rejection| refused(rejection.problem))?;
    Ok(())
}

/// The `data` of a check's ConfigMap: its configuration from `config` (refused here when the check's
/// validate-config refuses it, as the operator would) and every `KEY=VALUE` (or `KEY=@FILE`) setting.
pub async fn check_data(
    engine: &Engine,
    check: &Check,
    config: Option<&Path>,
    settings: &[String],
) -> Result<BTreeMap<String, String>, Problem> {
    let mut data = BTreeMap::new();
    if let Some(path) = config {
        let config = input::parse_document(path)?.to_string();
        let limits = preflight_engine::Limits::default();
        if let Some(why) = input::refused_config(engine, check, &config, &limits).await {
            return Err(Problem::Input(format!(
                "the check refuses the configuration in {} (validate-config): {why}; the operator would \
                 reject this ConfigMap, so nothing is written",
                path.display()
            )));
        }
        data.insert("config".to_owned(), config);
    }
    for setting in settings {
        let (key, value) = setting.split_once('=').ok_or_else(|| {
            Problem::Input(format!("--set {setting:?}: write KEY=VALUE (or KEY=@FILE)"))
        })?;
        let value = match value.strip_prefix('@') {
            Some(path) => String::from_utf8(input::read(Path::new(path))?)
                .map_err(|_| Problem::Input(format!("{path} is not UTF-8 text")))?,
            None => value.to_owned(),
        };
        data.insert(key.to_owned(), value);
    }
    Ok(data)
}
