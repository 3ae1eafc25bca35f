// {{name}}: a preflight check. While the object's spec.paused is true, do not reconcile it: evaluate again
// after retryAfterSeconds (configuration, default 60).
import { InvalidObject, Outcome, exports } from "./preflight.js";

function check(request) {
  const paused = request.object.spec?.paused ?? false;
  if (typeof paused !== "boolean") {
    throw new InvalidObject("the object does not match the check's type: spec.paused is not a boolean");
  }
  const seconds = request.config.retryAfterSeconds ?? 60;
  if (paused) {
    return Outcome.requeueAfter(seconds).because("Paused", `paused; checking again in ${seconds} s`);
  }
  return Outcome.proceed().because("Ready", "not paused");
}

export const { evaluate, configure } = exports(check);
