"""The conformance check in Python (see tests/conformance/README.md): what it does is picked by spec.behave."""

import os

import preflight

# Evaluations this instance has served: 1 in a fresh instance, more when the host reuses instances.
calls = 0


def check(request):
    global calls
    calls += 1
    spec = request.object.get("spec")
    if not isinstance(spec, dict) or not isinstance(spec.get("behave"), str):
        raise preflight.InvalidObject("the object does not match the check's type: spec.behave is not a string")
    behave = spec["behave"]
    if behave == "proceed":
        return (preflight.Outcome.proceed().because("Ready", "ready")
                .output("namespace", request.target.namespace or "")
                .output("greeting", request.config.get("greeting", ""))
                .output("now", str(request.now_ms)))
    if behave == "requeue":
        seconds = spec.get("seconds", 0)
        if type(seconds) is not int or seconds < 0:
            raise preflight.InvalidObject("the object does not match the check's type: spec.seconds is not a count")
        return preflight.Outcome.requeue_after(seconds).because("Waiting", f"waiting {seconds} s")
    if behave == "since":
        try:
            at = preflight.parse_time(spec.get("at"))
        except ValueError as problem:
            raise preflight.InvalidObject(f"the object does not match the check's type: spec.at: {problem}") from None
        return preflight.Outcome.proceed().because("Parsed").output("at", str(at))
    if behave == "count":
        return preflight.Outcome.proceed().because("Counted").output("calls", str(calls))
    if behave == "block":
        return preflight.Outcome.block().because("Blocked", "blocked")
    if behave == "error":
        return preflight.Outcome.error("it failed").because("Failed")
    if behave == "bad-reason":
        return preflight.Outcome.proceed().because("not camel case")
    if behave == "trap":
        os.abort()
    if behave == "loop":
        while True:
            pass
    return preflight.Outcome.error(f"unknown behaviour {behave!r}")


Evaluate, Configure = preflight.exports(check)
