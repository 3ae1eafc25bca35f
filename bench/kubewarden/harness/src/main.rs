//! Kubewarden's policy evaluator as its policy-server runs it: one engine, the policy compiled once into a
//! `PolicyEvaluatorPre`, and per admission request a fresh instance (`rehydrate`) that validates it, with
//! epoch interruption on (a 1 s tick, a 2-tick deadline, policy-server's defaults).
//!
//! Usage: `kubewarden-harness POLICY.wasm SETTINGS_JSON OBJECT.json...`. It checks that the policy accepts
//! every object with the settings given and rejects it when nothing is available, prints `ready`, then
//! answers the same line protocol as `bench/peers` (one contender, `kubewarden`):
//!
//! ```text
//! time kubewarden OBJECT COUNT    COUNT/10 unrecorded evaluations, then COUNT timed: their latencies in ns
//! rate kubewarden OBJECT TOTAL    TOTAL evaluations on 2 threads: the wall time in ns
//! count kubewarden OBJECT TOTAL   TOTAL evaluations, untimed: "done"
//! ```

use policy_evaluator::admission_request::AdmissionRequest;
use policy_evaluator::evaluation_context::EvaluationContext;
use policy_evaluator::policy_evaluator::{PolicyEvaluatorPre, PolicyExecutionMode, PolicySettings, ValidateRequest};
use policy_evaluator::policy_evaluator_builder::PolicyEvaluatorBuilder;
use policy_evaluator::wasmtime;
use serde_json::{Value, json};
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

/// Epoch ticks an evaluation may take (policy-server's default `policy-timeout` of 2 s, at 1 tick per second).
const DEADLINE_TICKS: u64 = 2;

struct Harness {
    pre: PolicyEvaluatorPre,
    context: EvaluationContext,
    settings: PolicySettings,
    requests: Vec<ValidateRequest>,
}

impl Harness {
    /// One admission request through a fresh instance: whether the policy accepted it.
    fn evaluate(&self, index: usize) -> bool {
        let mut evaluator = self.pre.rehydrate(&self.context).unwrap_or_else(|error| fail(&format!("rehydrate: {error}")));
        evaluator.validate(self.requests[index].clone(), &self.settings).allowed
    }
}

fn main() {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let [policy, settings, objects @ ..] = &arguments[..] else {
        fail("usage: kubewarden-harness POLICY.wasm SETTINGS_JSON OBJECT.json...")
    };
    let mut config = wasmtime::Config::new();
    config.wasm_function_references(true);
    config.epoch_interruption(true);
    let engine = wasmtime::Engine::new(&config).unwrap_or_else(|error| fail(&format!("engine: {error}")));
    let ticker = engine.clone();
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(Duration::from_secs(1));
            ticker.increment_epoch();
        }
    });
    let bytes = std::fs::read(policy).unwrap_or_else(|error| fail(&format!("{policy}: {error}")));
    let module = wasmtime::Module::new(&engine, bytes).unwrap_or_else(|error| fail(&format!("compiling {policy}: {error}")));
    let pre = PolicyEvaluatorBuilder::new()
        .engine(engine)
        .policy_module(module)
        .execution_mode(PolicyExecutionMode::KubewardenWapc)
        .enable_epoch_interruptions(DEADLINE_TICKS, DEADLINE_TICKS)
        .build_pre()
        .unwrap_or_else(|error| fail(&format!("building the evaluator: {error}")));
    let context = EvaluationContext {
        policy_id: "dependency-ready".to_owned(),
        callback_channel: None,
        ctx_aware_resources_allow_list: Default::default(),
        epoch_deadline: Some(DEADLINE_TICKS),
        host_capabilities: Default::default(),
    };
    let requests: Vec<ValidateRequest> = objects
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path).unwrap_or_else(|error| fail(&format!("{path}: {error}")));
            let object: Value = serde_json::from_str(&text).unwrap_or_else(|error| fail(&format!("{path}: {error}")));
            admission_request(object)
        })
        .collect();
    let parse_settings = |text: &str| match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => PolicySettings(map),
        _ => fail(&format!("settings must be a JSON object, got {text}")),
    };
    let harness = Harness { pre: pre.clone(), context: context.clone(), settings: parse_settings(settings), requests: requests.clone() };
    let refusing = Harness { pre, context, settings: parse_settings(r#"{"available":[]}"#), requests };
    for (index, path) in objects.iter().enumerate() {
        if !harness.evaluate(index) {
            fail(&format!("the policy does not accept {path}"));
        }
        if refusing.evaluate(index) {
            fail(&format!("the policy accepts {path} with nothing available"));
        }
    }
    println!("ready");
    serve(&harness);
}

/// The admission request the API server would send for creating `object`.
fn admission_request(object: Value) -> ValidateRequest {
    let metadata = &object["metadata"];
    let request = json!({
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": "apps.example.com", "version": "v1", "kind": "App"},
        "resource": {"group": "apps.example.com", "version": "v1", "resource": "apps"},
        "name": metadata["name"],
        "namespace": metadata["namespace"],
        "operation": "CREATE",
        "userInfo": {"username": "admin", "groups": ["system:authenticated"]},
        "object": object,
    });
    let request: AdmissionRequest = serde_json::from_value(request).unwrap_or_else(|error| fail(&format!("admission request: {error}")));
    ValidateRequest::AdmissionRequest(Box::new(request))
}

fn serve(harness: &Harness) {
    let mut out = std::io::stdout().lock();
    for line in std::io::stdin().lock().lines() {
        let line = line.unwrap_or_else(|error| fail(&format!("stdin: {error}")));
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (request, index, count) = match fields[..] {
            [request, "kubewarden", index, count] => match (index.parse::<usize>(), count.parse::<u64>()) {
                (Ok(index), Ok(count)) if index < harness.requests.len() => (request, index, count),
                _ => fail(&format!("bad request {line:?}")),
            },
            _ => fail(&format!("expected `time|rate|count kubewarden OBJECT COUNT`, got {line:?}")),
        };
        let answer = match request {
            "time" => {
                (0..count / 10).for_each(|_| {
                    harness.evaluate(index);
                });
                let latencies: Vec<String> = (0..count)
                    .map(|_| {
                        let started = Instant::now();
                        let accepted = harness.evaluate(index);
                        let nanoseconds = started.elapsed().as_nanos();
                        if !accepted {
                            fail("the policy stopped accepting");
                        }
                        nanoseconds.to_string()
                    })
                    .collect();
                latencies.join(" ")
            }
            "rate" => {
                let remaining = AtomicI64::new(count as i64);
                let started = Instant::now();
                std::thread::scope(|scope| {
                    for _ in 0..2 {
                        scope.spawn(|| {
                            while remaining.fetch_sub(1, Ordering::Relaxed) > 0 {
                                harness.evaluate(index);
                            }
                        });
                    }
                });
                started.elapsed().as_nanos().to_string()
            }
            "count" => {
                (0..count).for_each(|_| {
                    harness.evaluate(index);
                });
                "done".to_owned()
            }
            _ => fail(&format!("unknown request {request:?}")),
        };
        writeln!(out, "{answer}").and_then(|()| out.flush()).unwrap_or_else(|error| fail(&format!("stdout: {error}")));
    }
}

fn fail(message: &str) -> ! {
    eprintln!("kubewarden-harness: {message}");
    std::process::exit(1)
}
