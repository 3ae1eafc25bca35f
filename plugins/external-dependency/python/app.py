"""Do not reconcile until an external system says the dependency exists; then expose its key.

The Python build of plugins/external-dependency, answering exactly as the Rust build: the object names its
dependency in `spec.dependency`; `GET {endpoint}{dependency}` answers 200 with `{"key": ...}` (proceed, and
output the key), 404 (requeue after `retryAfterSeconds` plus jitter), or anything else (an error).
"""

import preflight

DEFAULTS = {"endpoint": "", "retryAfterSeconds": 600, "jitterPercent": 10, "outputKey": "dependencyKey"}


def settings(config):
    unknown = sorted(set(config) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"unknown field `{unknown[0]}`")
    return {**DEFAULTS, **config}


def validate(config):
    config = settings(config)
    if not config["endpoint"].startswith(("http://", "https://")):
        raise ValueError(f"endpoint {config['endpoint']!r} must be an http:// or https:// URL")
    if config["retryAfterSeconds"] == 0:
        raise ValueError("retryAfterSeconds must be at least 1")


def check(request):
    config = settings(request.config)
    dependency = (request.object.get("spec") or {}).get("dependency", "")
    if not dependency:
        return preflight.Outcome.error("spec.dependency is empty").because("InvalidSpec")
    if not all(c.isascii() and (c.isalnum() or c in "-_.") for c in dependency):
        return preflight.Outcome.error(f"spec.dependency {dependency!r} is not a plain name").because("InvalidSpec")
    url = f"{config['endpoint']}{dependency}"
    response = preflight.http.get(url)
    if response.status == 200:
        return preflight.Outcome.proceed().because(
            "DependencyAvailable", f"{dependency} is available").output(config["outputKey"], response.json()["key"])
    if response.status == 404:
        delay = preflight.with_jitter(config["retryAfterSeconds"], config["jitterPercent"], request.target)
        return preflight.Outcome.requeue_after(delay).because(
            "DependencyMissing",
            f"{dependency} does not exist yet; checking again every {config['retryAfterSeconds']} s")
    return preflight.Outcome.error(f"{url} answered {response.status}")


Evaluate, Configure = preflight.exports(check, validate)
