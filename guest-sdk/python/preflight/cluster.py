"""Read-only lookups of other Kubernetes objects (contract 0.2), answered by the operator from its watch
caches. Only the kinds (and Secrets, by name) the check's ConfigMap grants can be read, in the gated object's
namespace unless cluster scope is granted; anything else raises `LookupError` naming what is not granted.
The same rules and names as the Rust SDK's `preflight_guest::cluster`.

    found = preflight.cluster.get("v1", "ConfigMap", None, "db-endpoint")   # a dict, or None
"""

import json

from componentize_py_types import Err
from wit_world.imports import cluster as _cluster
from wit_world.imports.preflight_check_types import ObjectKind


class LookupError(Exception):  # noqa: A001 - the Rust SDK's name, on purpose
    """A lookup the host refused or that failed; the message names what is not granted."""


def _kind(api_version, kind):
    group, _, version = api_version.rpartition("/")
    return ObjectKind(group=group, version=version, kind=kind)


def get(api_version, kind, namespace, name):
    """The object `name` of `kind` in `api_version` ("v1", "apps/v1") as a dict, or None when it does not
    exist. `namespace` None: the gated object's namespace."""
    try:
        found = _cluster.get(_kind(api_version, kind), namespace, name)
    except Err as refused:
        raise LookupError(str(refused.value)) from None
    return None if found is None else json.loads(found)


def list(api_version, kind, namespace, label_selector=""):  # noqa: A001 - the contract's name
    """The objects of `kind` matching `label_selector` ("app=db,tier!=cache"; empty: all), as dicts, sorted
    by namespace and name."""
    try:
        found = _cluster.list(_kind(api_version, kind), namespace, label_selector)
    except Err as refused:
        raise LookupError(str(refused.value)) from None
    return [json.loads(item) for item in found]
