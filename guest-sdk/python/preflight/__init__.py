"""Write a preflight check in Python: a function from a `Request` to an `Outcome`.

    import preflight

    def check(request):
        missing = [d for d in request.object["spec"].get("dependsOn", [])
                   if d not in request.config.get("available", [])]
        if missing:
            return preflight.Outcome.requeue_after(600).because(
                "DependencyMissing", "waiting for " + ", ".join(missing))
        return preflight.Outcome.proceed()

    Evaluate, Configure = preflight.exports(check)

Build with componentize-py for the world in guest-sdk/python/wit (see guest-sdk/python/README.md). The idioms are the Rust SDK's:
proceed / requeue after / block / error, with a reason and a message, outputs, logging. An exception raised
by the check becomes an error outcome (the host backs off and retries), `InvalidObject` with that reason.
"""

import datetime
import json
import math

from componentize_py_types import Err
from wit_world import exports as _wit_exports
from wit_world.imports import log as _log
from wit_world.imports.preflight_check_types import CheckRequest, Datetime, Output, PreflightResult
from wit_world.imports.preflight_check_types import Target as _WitTarget

from . import cluster, http

__all__ = [
    "Outcome", "Request", "Target", "InvalidObject", "exports", "with_jitter", "parse_time", "http", "cluster",
    "trace", "debug", "info", "warn", "error",
]


class InvalidObject(Exception):
    """Raise when the object does not have the shape the check needs: an error outcome, reason InvalidObject."""


class Target:
    """Which object is being checked."""

    def __init__(self, target):
        self.group = target.group
        self.version = target.version
        self.kind = target.kind
        self.namespace = target.namespace
        self.name = target.name


class Request:
    """What a check is given: the object and its configuration as dicts, the object's identity, the time."""

    def __init__(self, request, config):
        self.raw_object = request.object
        self.object = json.loads(request.object)
        self.config = config
        self.target = Target(request.target)
        # The host's clock as whole milliseconds since the Unix epoch (every SDK's `now` in one unit, exact),
        # and as an aware datetime with the microseconds the host gave (no float rounding on the way).
        self.now_ms = request.now.seconds * 1000 + request.now.nanoseconds // 1_000_000
        self.now = datetime.datetime.fromtimestamp(request.now.seconds, tz=datetime.timezone.utc) + \
            datetime.timedelta(microseconds=request.now.nanoseconds // 1000)


class Outcome:
    """The decision of a check."""

    def __init__(self, proceed, requeue_after=None, error=None):
        self._proceed = proceed
        self._requeue_after = requeue_after
        self._error = error
        self._reason = ""
        self._message = ""
        self._outputs = {}

    @staticmethod
    def proceed():
        """The object may be reconciled now."""
        return Outcome(True)

    @staticmethod
    def requeue_after(seconds):
        """Do not reconcile now; evaluate again after `seconds` (a number, rounded to the nearest
        millisecond: `2.007` is 2007 ms)."""
        return Outcome(False, requeue_after=seconds)

    @staticmethod
    def block():
        """Do not reconcile; evaluate again when the object or the check changes."""
        return Outcome(False)

    @staticmethod
    def error(message):
        """The check could not decide; the host retries with backoff."""
        return Outcome(False, error=str(message))

    def because(self, reason, message=""):
        """Sets the condition's reason (UpperCamelCase) and message."""
        self._reason = reason
        self._message = message
        return self

    def recheck_after(self, seconds):
        """For a proceeding outcome: evaluate again after `seconds` even if nothing changes."""
        self._requeue_after = seconds
        return self

    def output(self, key, value):
        """Records `key` = `value` on the object (by default in its preflight.dev/outputs annotation)."""
        self._outputs.pop(key, None)
        self._outputs[key] = str(value)
        return self

    def _result(self):
        delay = None
        if self._requeue_after is not None:
            delay = min(max(_milliseconds(self._requeue_after), 0), 2**32 - 1)
        return PreflightResult(
            proceed=self._proceed, requeue_after_ms=delay, error=self._error,
            reason=self._reason, message=self._message,
            outputs=[Output(key=key, value=value) for key, value in self._outputs.items()])


def _milliseconds(seconds):
    """`seconds` as whole milliseconds, rounded to the nearest: a float's representation error (2.007 * 1000
    is 2007.0000000000002) never adds one."""
    return math.floor(seconds * 1000 + 0.5)


def _config(raw):
    config = json.loads(raw) if raw.strip() else {}
    if not isinstance(config, dict):
        raise ValueError("the configuration must be a mapping")
    return config


def _evaluate(check, request):
    """`check`'s answer to a `check-request`, as the contract's `preflight-result`."""
    try:
        config = _config(request.config)
    except ValueError as problem:
        return Outcome.error(f"invalid check configuration: {problem}").because("InvalidConfig")._result()
    try:
        outcome = check(Request(request, config))
    except InvalidObject as problem:
        outcome = Outcome.error(str(problem)).because("InvalidObject")
    except Exception as problem:  # noqa: BLE001 - a check's exception is its error outcome
        outcome = Outcome.error(f"{type(problem).__name__}: {problem}")
    return outcome._result()


def exports(check, validate=None):
    """The `Evaluate` and `Configure` classes componentize-py exports, for `check` and an optional
    `validate(config)` that raises (any exception) to refuse a configuration at load."""

    _warm_up()

    class Evaluate(_wit_exports.Evaluate):
        def check(self, request):
            return _evaluate(check, request)

    class Configure(_wit_exports.Configure):
        def validate_config(self, config):
            try:
                parsed = _config(config)
                if validate is not None:
                    validate(parsed)
            except Exception as problem:  # noqa: BLE001 - any refusal is reported to the administrator
                raise Err(str(problem)) from None

    return Evaluate, Configure


def _sdk_check(request):
    """The SDK's own check for `_warm_up`, in the idioms checks are written in (this module's example): it
    proceeds with an output, requeues with jitter, or raises."""
    names = request.object.get("spec", {}).get("dependsOn", [])
    missing = [name for name in names if name not in request.config.get("available", [])]
    if request.object["metadata"].get("name") == "invalid":
        raise InvalidObject("invalid")
    if missing:
        delay = with_jitter(request.config.get("retryAfterSeconds", 600), 10, request.target)
        return Outcome.requeue_after(delay).because("Waiting", f"waiting for {', '.join(missing)}")
    return Outcome.proceed().because("Ready", "all there").output("at", request.now_ms)


def _warm_up():
    """Runs the SDK's own side of an evaluation (decoding, the outcomes, the jitter, the result) with a check
    of its own, never the author's, and calls no import. componentize-py snapshots the interpreter after
    the app's import, and CPython specialises the bytecode it runs and fills its type caches as it goes; run
    here, that work is in the snapshot instead of redone in every fresh instance (a fresh evaluation of the
    example faults 191 pages in instead of 227 and runs 2 % fewer instructions; two rounds instead of 32 left
    more pages to fault in)."""
    now = Datetime(seconds=1_796_000_000, nanoseconds=250_000_000)
    config = '{"available": ["a"], "retryAfterSeconds": 600}'
    for _ in range(32):
        for name, depends_on in (("ready", ["a"]), ("waiting", ["a", "b"]), ("invalid", [])):
            sample = {
                "apiVersion": "example.com/v1", "kind": "Sample",
                "metadata": {"name": name, "namespace": "default", "uid": "0" * 36, "resourceVersion": "1",
                             "generation": 1, "creationTimestamp": "2026-12-04T10:15:30Z",
                             "labels": {"app": name}, "annotations": {"note": "x" * 64}},
                "spec": {"dependsOn": depends_on, "replicas": 3, "enabled": True, "ratio": 0.5, "none": None},
                "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "Waiting"}]},
            }
            target = _WitTarget(group="example.com", version="v1", kind="Sample", namespace="default", name=name)
            request = CheckRequest(object=json.dumps(sample), config=config, target=target, now=now)
            _evaluate(_sdk_check, request)


_TIME_SEPARATORS = ((4, "-"), (7, "-"), (10, "T"), (13, ":"), (16, ":"))


def parse_time(text):
    """An RFC 3339 date-time as Kubernetes writes them (`2026-12-04T10:15:30Z`, `2026-12-04T11:15:30.25+01:00`)
    in Unix milliseconds, by the rule every SDK holds to: `YYYY-MM-DDTHH:MM:SS`, then 1 to 9 fraction digits
    after a `.` (truncated to milliseconds), then `Z` or `+HH:MM`/`-HH:MM`; `T` and `Z` upper case; the date
    must exist, seconds 0-59, offsets up to 23:59. Raises ValueError otherwise (datetime.fromisoformat accepts
    more than RFC 3339, and other SDKs would refuse what it accepts)."""
    problem = ValueError(f"{text!r} is not an RFC 3339 time such as 2026-12-04T10:15:30Z")

    def number(start, digits):
        field = text[start:start + digits]
        if len(field) != digits or not all("0" <= c <= "9" for c in field):
            raise problem
        return int(field)

    if not isinstance(text, str) or any(text[at:at + 1] != sep for at, sep in _TIME_SEPARATORS):
        raise problem
    year, month, day = number(0, 4), number(5, 2), number(8, 2)
    hour, minute, second = number(11, 2), number(14, 2), number(17, 2)
    if not 1 <= month <= 12 or hour > 23 or minute > 59 or second > 59:
        raise problem
    try:
        date = datetime.date(year, month, day)
    except ValueError:
        raise problem from None
    at, millis = 19, 0
    if text[at:at + 1] == ".":
        digits = 0
        while "0" <= text[at + 1 + digits:at + 2 + digits] <= "9" and text[at + 1 + digits:at + 2 + digits]:
            digits += 1
        if not 1 <= digits <= 9:
            raise problem
        kept = min(digits, 3)
        millis = number(at + 1, kept) * 10 ** (3 - kept)
        at += 1 + digits
    rest = text[at:]
    if rest == "Z":
        offset = 0
    elif len(rest) == 6 and rest[0] in "+-" and rest[3] == ":":
        hours, minutes = number(at + 1, 2), number(at + 4, 2)
        if hours > 23 or minutes > 59:
            raise problem
        offset = (hours * 60 + minutes) * (-1 if rest[0] == "-" else 1)
    else:
        raise problem
    days = (date - datetime.date(1970, 1, 1)).days
    return (days * 86400 + hour * 3600 + minute * 60 + second - offset * 60) * 1000 + millis


def with_jitter(seconds, percent, target):
    """`seconds` plus up to `percent`% of it, chosen by a hash of the object's namespace and name (the same
    rule as the Rust SDK's `with_jitter`, FNV-1a): objects spread their retries, each keeps its schedule.
    Computed in whole milliseconds, as in Rust; the seconds returned are a whole number of milliseconds, which
    `requeue_after` takes exactly."""
    base_ms = _milliseconds(seconds)
    spread_ms = base_ms * min(percent, 100) // 100
    if spread_ms == 0:
        return base_ms / 1000
    digest = 0xCBF29CE484222325
    for byte in f"{target.namespace or ''}/{target.name}".encode():
        digest = ((digest ^ byte) * 0x100000001B3) % 2**64
    return (base_ms + digest % spread_ms) / 1000


def _logger(level):
    def emit(message):
        _log.log(level, str(message))
    return emit


trace = _logger(_log.Level.TRACE)
debug = _logger(_log.Level.DEBUG)
info = _logger(_log.Level.INFO)
warn = _logger(_log.Level.WARN)
error = _logger(_log.Level.ERROR)
