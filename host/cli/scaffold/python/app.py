"""{{name}}: a preflight check. While the object's spec.paused is true, do not reconcile it: evaluate again after
retryAfterSeconds (configuration, default 60)."""

import preflight


def check(request):
    paused = (request.object.get("spec") or {}).get("paused", False)
    if not isinstance(paused, bool):
        raise preflight.InvalidObject("the object does not match the check's type: spec.paused is not a boolean")
    seconds = request.config.get("retryAfterSeconds", 60)
    if paused:
        return preflight.Outcome.requeue_after(seconds).because("Paused", f"paused; checking again in {seconds} s")
    return preflight.Outcome.proceed().because("Ready", "not paused")


Evaluate, Configure = preflight.exports(check)
