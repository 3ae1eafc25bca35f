// The conformance check in JavaScript (see tests/conformance/README.md): what it does is picked by spec.behave.
import { InvalidObject, Outcome, exports, parseTime } from "./preflight.js";

// Evaluations this instance has served: 1 in a fresh instance, more when the host reuses instances.
let calls = 0;

function check(request) {
  calls += 1;
  const spec = request.object.spec;
  if (typeof spec !== "object" || spec === null || typeof spec.behave !== "string") {
    throw new InvalidObject("the object does not match the check's type: spec.behave is not a string");
  }
  switch (spec.behave) {
    case "proceed":
      return Outcome.proceed()
        .because("Ready", "ready")
        .output("namespace", request.target.namespace ?? "")
        .output("greeting", request.config.greeting ?? "")
        .output("now", String(request.nowMs));
    case "requeue": {
      const seconds = spec.seconds ?? 0;
      if (!Number.isInteger(seconds) || seconds < 0) {
        throw new InvalidObject("the object does not match the check's type: spec.seconds is not a count");
      }
      return Outcome.requeueAfter(seconds).because("Waiting", `waiting ${seconds} s`);
    }
    case "since": {
      let at;
      try {
        at = parseTime(spec.at);
      } catch (problem) {
        throw new InvalidObject(`the object does not match the check's type: spec.at: ${problem.message}`);
      }
      return Outcome.proceed().because("Parsed", "").output("at", String(at));
    }
    case "count":
      return Outcome.proceed().because("Counted", "").output("calls", String(calls));
    case "block":
      return Outcome.block().because("Blocked", "blocked");
    case "error":
      return Outcome.error("it failed").because("Failed", "");
    case "bad-reason":
      return Outcome.proceed().because("not camel case", "");
    case "loop":
      for (;;) {}
    default:
      return Outcome.error(`unknown behaviour ${JSON.stringify(spec.behave)}`);
  }
}

const sdk = exports(check);

// The SDK turns an exception inside `check` into an error outcome; one that escapes the component traps,
// which is what `trap` asks for.
export const evaluate = {
  check(request) {
    if (JSON.parse(request.object)?.spec?.behave === "trap") {
      throw new Error("conformance: a trap, as asked");
    }
    return sdk.evaluate.check(request);
  },
};
export const configure = sdk.configure;
