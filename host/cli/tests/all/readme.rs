//! The README's tutorial, run as a newcomer runs it: each command as written, in a clean shell from the
//! repository root, whose PATH has what a shell has after `scripts/setup` (cargo, go, node, python) plus the
//! `preflight` this build made (where `cargo install` puts it) and the `kubectl` of the test control plane.
//! What the README shows a command printing, it must print. A README that drifts from the command fails
//! here.
//!
//! Not run here: `cargo install` itself (a release build of minutes: the binary this build made stands in
//! for it), and the install section's image commands (`scripts/image` runs in `scripts/test`; pushing needs
//! a registry).

use preflight_kube_harness::{kubeconfig, kubectl};
use preflight_test_support::{newcomer_command, wasm_target_dir, workspace_root};
use std::path::PathBuf;
use std::process::Output;
use std::sync::OnceLock;

/// The README, as a user reads it.
fn readme() -> String {
    std::fs::read_to_string(workspace_root().join("README.md")).unwrap()
}

/// The fenced blocks of `language` (`sh`, `console`), their indentation removed.
fn blocks(readme: &str, language: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut lines = readme.lines();
    while let Some(line) = lines.next() {
        let Some(indent) = line.find("```") else {
            continue;
        };
        if line[indent + 3..].trim() != language {
            continue;
        }
        let mut block = String::new();
        for line in lines.by_ref() {
            if line.trim_start().starts_with("```") {
                break;
            }
            block.push_str(line.get(indent..).unwrap_or_default());
            block.push('\n');
        }
        found.push(block);
    }
    found
}

/// A command of a `console` block (`$ ` and its continuation lines) and the lines shown after it.
struct Shown {
    command: String,
    output: Vec<String>,
}

fn console(block: &str) -> Vec<Shown> {
    let mut shown: Vec<Shown> = Vec::new();
    let mut continued = false;
    for line in block.lines() {
        if let Some(command) = line.strip_prefix("$ ") {
            shown.push(Shown {
                command: command.to_owned(),
                output: Vec::new(),
            });
        } else if let Some(last) = shown.last_mut() {
            if continued {
                last.command.push('\n');
                last.command.push_str(line);
            } else {
                last.output.push(line.to_owned());
            }
        }
        continued = line.ends_with('\\');
    }
    shown
}

/// Runs `script` with bash (`set -euo pipefail`) in a clean environment, from the repository root.
/// `target/` in the README's paths is `$CARGO_TARGET_DIR/`, as the README says for a set target directory.
fn shell(script: &str) -> Output {
    let preflight = PathBuf::from(env!("CARGO_BIN_EXE_preflight"));
    let installed = [
        preflight.parent().unwrap().to_path_buf(),
        kubectl().parent().unwrap().to_path_buf(),
    ];
    let script = script.replace("target/", "$CARGO_TARGET_DIR/");
    newcomer_command("timeout", &installed)
        .args(["300", "bash", "-c"])
        .arg(format!("set -euo pipefail\n{script}"))
        .current_dir(workspace_root())
        .env("CARGO_TARGET_DIR", wasm_target_dir())
        .env("CARGO_NET_OFFLINE", "true")
        .output()
        .unwrap()
}

fn said(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Step 2's build command, found in the README and run once.
fn built_check() {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        let build =
            "cargo build --target wasm32-unknown-unknown --profile wasm -p dependency-ready";
        assert!(readme().contains(&format!("`{build}`")), "step 2 changed");
        let output = shell(build);
        assert!(output.status.success(), "{}", said(&output));
    });
}

/// Whether `actual` is the line the README shows: equal, or equal up to where the README elides with `…`
/// (a digest, a time), once trailing spaces are ignored.
fn same_line(shown: &str, actual: &str) -> bool {
    let (shown, actual) = (shown.trim_end(), actual.trim_end());
    match shown.split_once('…') {
        Some((before, after)) => actual.starts_with(before) && actual.ends_with(after),
        None => shown == actual,
    }
}

#[test]
fn the_tutorial_s_commands_print_what_the_readme_shows() {
    built_check();
    let readme = readme();
    let shown: Vec<Shown> = blocks(&readme, "console")
        .iter()
        .flat_map(|block| console(block))
        .collect();
    let commands: Vec<&str> = shown.iter().map(|s| s.command.as_str()).collect();
    assert!(
        commands
            .iter()
            .any(|c| c.starts_with("cargo install --locked --path host/cli"))
            && commands.iter().any(|c| c.starts_with("preflight run"))
            && commands.iter().any(|c| c.starts_with("preflight test")),
        "the tutorial's commands: {commands:?}"
    );
    for step in shown
        .iter()
        .filter(|s| !s.command.starts_with("cargo install"))
    {
        let output = shell(&step.command);
        // Paths the README writes under `target/` are printed under the target directory set here.
        let printed = String::from_utf8_lossy(&output.stdout)
            .replace(&format!("{}/", wasm_target_dir().display()), "target/");
        // `run` exits 3 when the object may not proceed, as the README's example shows; others exit 0.
        let expected_status = if step.command.starts_with("preflight run") {
            3
        } else {
            0
        };
        assert_eq!(
            output.status.code(),
            Some(expected_status),
            "{}: {}",
            step.command,
            said(&output)
        );
        let mut actual = printed.lines();
        for line in &step.output {
            // A line of its own `…` stands for lines left out; `took` is a time.
            if line.trim() == "…" || line.starts_with("took ") {
                continue;
            }
            assert!(
                actual.any(|printed| same_line(line, printed)),
                "{}: the README shows {line:?}, which it did not print (in order):\n{printed}",
                step.command
            );
        }
    }
}

#[test]
fn the_tutorial_s_step_5_and_the_rollout_example_run_on_a_real_control_plane() {
    built_check();
    kubeconfig();
    let readme = readme();
    let step5: Vec<String> = blocks(&readme, "sh")
        .into_iter()
        .filter(|block| {
            block.contains("tests/cluster/up")
                || block.contains("create configmap dependency-ready")
        })
        .collect();
    assert_eq!(step5.len(), 2, "step 5's two blocks: {step5:?}");
    let rollout: Vec<String> = blocks(&readme, "sh")
        .into_iter()
        .filter(|block| block.contains("preflight what-if"))
        .collect();
    assert_eq!(rollout.len(), 1, "the operator section's rollout block");
    // A second run on the same control plane starts from where a newcomer starts: no check yet.
    let cleared = shell(&format!(
        "export KUBECONFIG={}\nkubectl -n preflight-system delete configmap dependency-ready deps-next --ignore-not-found",
        kubeconfig().display()
    ));
    assert!(cleared.status.success(), "{}", said(&cleared));
    // The README's blocks as they are, then what a newcomer does next: look again until the column fills.
    // Then the operator section's rollout block, looking again until the monitored verdicts are in: the
    // payments team's Apps get one (ready would proceed, waiting would not), the unlabeled App none.
    let script = format!(
        "trap 'kill $(jobs -p) 2>/dev/null' EXIT\n{}\n{}\n\
         for attempt in $(seq 60); do\n\
           table=$(kubectl get apps.apps.example.com)\n\
           if [ \"$(echo \"$table\" | tail -n +2 | awk '{{print $2}}' | grep -cE '^(True|False)$')\" = 3 ]; then\n\
             break\n\
           fi\n\
           sleep 1\n\
         done\n\
         {}\n\
         for attempt in $(seq 60); do\n\
           monitored=$(kubectl get apps.apps.example.com -o custom-columns='NAME:.metadata.name,WOULD-PROCEED:.status.conditions[?(@.type==\"PreflightMonitor\")].status' --no-headers | tr -s ' ' | sort | tr '\\n' ' ')\n\
           if [ \"$monitored\" = 'ready True unlabeled <none> waiting False ' ]; then\n\
             echo \"$monitored\"; echo \"$table\"; exit 0\n\
           fi\n\
           sleep 1\n\
         done\n\
         echo \"monitored: $monitored\"; echo \"$table\"; exit 1\n",
        step5[0], step5[1], rollout[0]
    );
    let output = shell(&script);
    let printed = said(&output);
    assert!(output.status.success(), "{printed}");
    // The last table printed: the one the loop above waited for.
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let last = stdout.rfind("NAME").unwrap_or_default();
    let table: Vec<&str> = stdout[last..]
        .lines()
        .map(|line| line.split_whitespace().nth(1).unwrap_or_default())
        .collect();
    assert_eq!(table.first(), Some(&"PREFLIGHT"), "{printed}");
    assert_eq!(table.len(), 4, "the three example objects: {printed}");
    assert!(
        table[1..]
            .iter()
            .all(|column| *column == "True" || *column == "False"),
        "{printed}"
    );
}
