"""Do not reconcile until the ConfigMap an object references exists (and holds the required key); retry
after a delay with jitter. The Python build of plugins/referenced-config: the same configuration and answers.

    {"requiredKey": "endpoint", "retryAfterSeconds": 60, "jitterPercent": 10}
"""

import preflight


def check(request):
    config = request.config
    name = (request.object.get("spec") or {}).get("configRef") or ""
    if not name:
        return preflight.Outcome.error("spec.configRef is empty").because("InvalidSpec")
    retry_after_seconds = config.get("retryAfterSeconds", 60)
    required_key = config.get("requiredKey")

    def waiting(reason, what):
        delay = preflight.with_jitter(retry_after_seconds, config.get("jitterPercent", 10), request.target)
        return preflight.Outcome.requeue_after(delay).because(
            reason, f"{what}; checking again every {retry_after_seconds} s")

    found = preflight.cluster.get("v1", "ConfigMap", None, name)
    if found is None:
        return waiting("ConfigMissing", f"waiting for ConfigMap {name}")
    if required_key is not None and required_key not in (found.get("data") or {}):
        return waiting("ConfigIncomplete", f"ConfigMap {name} has no key {required_key}")
    return preflight.Outcome.proceed().because("ConfigPresent", f"ConfigMap {name} is there")


Evaluate, Configure = preflight.exports(check)
