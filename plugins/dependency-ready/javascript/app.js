// Do not reconcile until the dependencies an object names are available; retry in N minutes, with jitter.
// The JavaScript build of plugins/dependency-ready: the same configuration, answers and fixtures.
import { InvalidObject, Outcome, debug, exports, withJitter } from "./preflight.js";

function dependsOn(object) {
  const spec = object.spec ?? {};
  if (typeof spec !== "object" || Array.isArray(spec)) {
    throw new InvalidObject("the object does not match the check's type: spec is not a mapping");
  }
  const names = spec.dependsOn ?? [];
  if (!Array.isArray(names) || !names.every((name) => typeof name === "string")) {
    throw new InvalidObject("the object does not match the check's type: spec.dependsOn is not a list of names");
  }
  return names;
}

function check(request) {
  const available = request.config.available ?? [];
  const retryAfterSeconds = request.config.retryAfterSeconds ?? 600;
  const missing = dependsOn(request.object).filter((name) => !available.includes(name));
  if (missing.length === 0) {
    return Outcome.proceed().because("DependenciesAvailable", "all dependencies are available");
  }
  const delay = withJitter(retryAfterSeconds, request.config.jitterPercent ?? 10, request.target);
  debug(`${request.target.name} is waiting for ${missing.join(", ")}`);
  return Outcome.requeueAfter(delay).because(
    "DependencyMissing",
    `waiting for ${missing.join(", ")}; checking again every ${retryAfterSeconds} s`,
  );
}

function validate(config) {
  if (!Array.isArray(config.available ?? [])) {
    throw new Error("available must be a list of names");
  }
}

export const { evaluate, configure } = exports(check, validate);
