// Do not reconcile until the ConfigMap an object references exists (and holds the required key); retry after
// a delay with jitter. The JavaScript build of plugins/referenced-config: the same configuration and answers.
import { Outcome, cluster, exports, withJitter } from "./preflight.js";

function check(request) {
  const config = request.config;
  const name = request.object.spec?.configRef ?? "";
  if (!name) {
    return Outcome.error("spec.configRef is empty").because("InvalidSpec");
  }
  const retryAfterSeconds = config.retryAfterSeconds ?? 60;
  const waiting = (reason, what) =>
    Outcome.requeueAfter(withJitter(retryAfterSeconds, config.jitterPercent ?? 10, request.target)).because(
      reason,
      `${what}; checking again every ${retryAfterSeconds} s`,
    );
  const found = cluster.get("v1", "ConfigMap", undefined, name);
  if (found === undefined) {
    return waiting("ConfigMissing", `waiting for ConfigMap ${name}`);
  }
  const key = config.requiredKey;
  if (key !== undefined && !(key in (found.data ?? {}))) {
    return waiting("ConfigIncomplete", `ConfigMap ${name} has no key ${key}`);
  }
  return Outcome.proceed().because("ConfigPresent", `ConfigMap ${name} is there`);
}

export const { evaluate, configure } = exports(check);
