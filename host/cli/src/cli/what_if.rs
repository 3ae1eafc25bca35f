//! `preflight what-if`: a candidate check against every live object of its kind, read-only; prints the
//! objects whose verdict would change. The work is the operator library's ([`preflight_operator::what_if`]);
//! this module reads the candidate and prints the report.

use super::{EXIT_DIFFERENCES, EXIT_PROCEED, Format, Problem, WhatIfArgs, input, pack};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use preflight_engine::Limits;
use preflight_operator::what_if::{self, Change, Report, WhatIfOptions};
use std::collections::BTreeMap;
use std::sync::Arc;

pub async fn what_if(args: WhatIfArgs) -> Result<u8, Problem> {
    // What the command line says is checked before the cluster is asked anything.
    let in_cluster = args
        .configmap
        .as_deref()
        .map(|reference| {
            reference
                .split_once('/')
                .filter(|(namespace, name)| !namespace.is_empty() && !name.is_empty())
                .ok_or_else(|| {
                    Problem::Input(format!("--configmap {reference:?}: write NAMESPACE/NAME"))
                })
        })
        .transpose()?;
    let client = kube::Client::try_default().await.map_err(|error| {
        Problem::Input(format!("cannot configure the Kubernetes client: {error}"))
    })?;
    let engine = Arc::new(input::engine(args.concurrency, 0)?);
    let limits = Limits::default();
    let candidate = match (in_cluster, &args.check) {
        (Some((namespace, name)), _) => {
            let sources = what_if::Sources {
                registry: args.registries.options()?,
                verify_keys: super::oci::verification_keys(&args.registries.verify_key)?,
            };
            what_if::candidate_from_cluster(&client, namespace, name, &limits, &sources)
                .await
                .map_err(|error| Problem::Input(error.to_string()))?
        }
        (None, Some(path)) => {
            let component = input::read(path)?;
            let check = engine.load(&component).map_err(Problem::Unusable)?;
            let data =
                pack::check_data(&engine, &check, args.config.as_deref(), &args.settings).await?;
            let name = path
                .file_stem()
                .map_or_else(|| "check".into(), |stem| stem.to_string_lossy());
            // The ConfigMap the check would be shipped in, with the component as it is (uncompressed).
            let mut config_map = ConfigMap::default();
            config_map.metadata.name = Some(name.into_owned());
            config_map.metadata.namespace = Some(args.check_namespace.clone());
            config_map.metadata.labels = Some(BTreeMap::from([(
                preflight_operator::GATES_LABEL.to_owned(),
                args.gates.clone().unwrap_or_default(),
            )]));
            config_map.data = Some(data);
            config_map.binary_data = Some(BTreeMap::from([(
                preflight_operator::COMPONENT_KEY.to_owned(),
                ByteString(component),
            )]));
            what_if::candidate_from_config_maps(&config_map, &[], &limits)
                .map_err(|error| Problem::Input(error.to_string()))?
        }
        (None, None) => {
            return Err(Problem::Input(
                "name a check: FILE.wasm or --configmap".into(),
            ));
        }
    };
    let options = WhatIfOptions {
        namespace: args.namespace.clone(),
        concurrency: args.concurrency as usize,
    };
    let report = what_if::what_if(&client, engine, candidate, &options)
        .await
        .map_err(|error| Problem::Input(error.to_string()))?;
    match args.output {
        Format::Json => println!(
            "{:#}",
            serde_json::to_value(&report).map_err(|error| Problem::Input(error.to_string()))?
        ),
        Format::Text => print!("{}", text(&report)),
    }
    let totals = &report.totals;
    let changed = report.differences.len() + totals.not_evaluated;
    Ok(if changed > 0 {
        EXIT_DIFFERENCES
    } else {
        EXIT_PROCEED
    })
}

/// The report for people: a table of the objects that would change, what could not be evaluated, totals.
fn text(report: &Report) -> String {
    let mut out = String::new();
    let change = |change: Change| match change {
        Change::ProceedToHold => "proceed → hold",
        Change::HoldToProceed => "hold → proceed",
        Change::ReasonChanged => "reason changes",
    };
    if !report.differences.is_empty() {
        let rows: Vec<[&str; 5]> = report
            .differences
            .iter()
            .map(|row| {
                [
                    row.namespace.as_str(),
                    row.name.as_str(),
                    change(row.change),
                    row.now.as_str(),
                    row.would.as_str(),
                ]
            })
            .collect();
        out.push_str(&table(
            ["NAMESPACE", "NAME", "CHANGE", "NOW", "WOULD BE"],
            &rows,
        ));
    }
    if !report.not_evaluated.is_empty() {
        out.push_str("\nnot evaluated (the check failed on them):\n");
        let rows: Vec<[&str; 4]> = report
            .not_evaluated
            .iter()
            .map(|row| {
                [
                    row.namespace.as_str(),
                    row.name.as_str(),
                    row.reason.as_str(),
                    row.message.as_str(),
                ]
            })
            .collect();
        out.push_str(&table(["NAMESPACE", "NAME", "REASON", "MESSAGE"], &rows));
    }
    let totals = &report.totals;
    out.push_str(&format!(
        "\n{} on {}: {} objects, {} not selected, {} unchanged, {} proceed → hold, {} hold → proceed, \
         {} reason changes, {} not evaluated ({:.2} s)\n",
        report.check,
        report.kind,
        totals.objects,
        totals.not_selected,
        totals.unchanged,
        totals.proceed_to_hold,
        totals.hold_to_proceed,
        totals.reason_changed,
        totals.not_evaluated,
        report.seconds,
    ));
    out
}

/// Left-aligned columns, two spaces apart.
fn table<const N: usize>(header: [&str; N], rows: &[[&str; N]]) -> String {
    let mut widths = header.map(|title| title.chars().count());
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: &[&str; N]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        format!("{}\n", padded.join("  ").trim_end())
    };
    let mut out = line(&header);
    for row in rows {
        out.push_str(&line(row));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up_and_no_line_ends_in_spaces() {
        let text = table(
            ["NAME", "CHANGE"],
            &[["web", "proceed → hold"], ["a-long-name", "x"]],
        );
        assert_eq!(
            text,
            "NAME         CHANGE\nweb          proceed → hold\na-long-name  x\n"
        );
    }
}
