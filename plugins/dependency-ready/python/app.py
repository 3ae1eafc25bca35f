"""Do not reconcile until the dependencies an object names are available; retry in N minutes, with jitter.

The Python build of plugins/dependency-ready: the same configuration, the same answers, the same fixtures
(plugins/dependency-ready/fixtures.yaml):

    {"available": ["postgres-main"], "retryAfterSeconds": 600, "jitterPercent": 10}
"""

import preflight


def depends_on(obj):
    """spec.dependsOn, checked to be a list of names."""
    spec = obj.get("spec") or {}
    if not isinstance(spec, dict):
        raise preflight.InvalidObject("the object does not match the check's type: spec is not a mapping")
    names = spec.get("dependsOn", [])
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        raise preflight.InvalidObject(
            "the object does not match the check's type: spec.dependsOn is not a list of names")
    return names


def check(request):
    config = request.config
    available = config.get("available", [])
    retry_after_seconds = config.get("retryAfterSeconds", 600)
    missing = [name for name in depends_on(request.object) if name not in available]
    if not missing:
        return preflight.Outcome.proceed().because("DependenciesAvailable", "all dependencies are available")
    delay = preflight.with_jitter(retry_after_seconds, config.get("jitterPercent", 10), request.target)
    preflight.debug(f"{request.target.name} is waiting for {', '.join(missing)}")
    return preflight.Outcome.requeue_after(delay).because(
        "DependencyMissing",
        f"waiting for {', '.join(missing)}; checking again every {retry_after_seconds} s")


def validate(config):
    if not isinstance(config.get("available", []), list):
        raise ValueError("available must be a list of names")


Evaluate, Configure = preflight.exports(check, validate)
