// Do not reconcile until an external system says the dependency exists; then expose its key.
// The JavaScript build of plugins/external-dependency, answering exactly as the Rust build.
import { Outcome, exports, http, withJitter } from "./preflight.js";

const DEFAULTS = { endpoint: "", retryAfterSeconds: 600, jitterPercent: 10, outputKey: "dependencyKey" };

function settings(config) {
  const unknown = Object.keys(config).filter((key) => !(key in DEFAULTS)).sort();
  if (unknown.length) {
    throw new Error(`unknown field \`${unknown[0]}\``);
  }
  return { ...DEFAULTS, ...config };
}

function validate(raw) {
  const config = settings(raw);
  if (!/^https?:\/\//.test(config.endpoint)) {
    throw new Error(`endpoint ${JSON.stringify(config.endpoint)} must be an http:// or https:// URL`);
  }
  if (config.retryAfterSeconds === 0) {
    throw new Error("retryAfterSeconds must be at least 1");
  }
}

function check(request) {
  const config = settings(request.config);
  const dependency = request.object.spec?.dependency ?? "";
  if (!dependency) {
    return Outcome.error("spec.dependency is empty").because("InvalidSpec");
  }
  if (!/^[A-Za-z0-9._-]+$/.test(dependency)) {
    return Outcome.error(`spec.dependency ${JSON.stringify(dependency)} is not a plain name`).because("InvalidSpec");
  }
  const url = `${config.endpoint}${dependency}`;
  const response = http.get(url);
  if (response.status === 200) {
    return Outcome.proceed()
      .because("DependencyAvailable", `${dependency} is available`)
      .output(config.outputKey, response.json().key);
  }
  if (response.status === 404) {
    const delay = withJitter(config.retryAfterSeconds, config.jitterPercent, request.target);
    return Outcome.requeueAfter(delay).because(
      "DependencyMissing",
      `${dependency} does not exist yet; checking again every ${config.retryAfterSeconds} s`,
    );
  }
  return Outcome.error(`${url} answered ${response.status}`);
}

export const { evaluate, configure } = exports(check, validate);
