"""Outbound HTTP from a Python check, through the standard `wasi:http/outgoing-handler` (contract 0.2).

The host sends a request only when the check's ConfigMap allows its destination (`http` key); anything
else fails with `HttpError` before any connection, and the host reports the refused destination on its
side. The host also enforces a per-request timeout, a response-size cap and a requests-per-evaluation cap,
may add credentials the check never sees, and answers from its cache when a response carried
`Cache-Control: max-age`. The same rules as the Rust SDK's `preflight_guest::http`.

    response = preflight.http.get("https://deps.example.com/dependencies/db")
    if response.status == 404: ...
"""

import json

from componentize_py_types import Err, Ok
from wit_world.imports import outgoing_handler, streams
from wit_world.imports import wasi_http_types as http_types

MAX_REDIRECTS = 5
"""How many redirects `get` follows; each one is a new request the host checks against the allow-list."""


class HttpError(Exception):
    """A request that failed or was refused; the message names the `wasi:http` error code."""


class Response:
    """A response read whole (the host caps its size)."""

    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    def header(self, name):
        """The first value of header `name` (case-insensitive), as text."""
        for key, value in self.headers:
            if key.lower() == name.lower():
                return value.decode("utf-8", "replace")
        return None

    def json(self):
        """The body decoded as JSON."""
        try:
            return json.loads(self.body)
        except ValueError as problem:
            raise HttpError(f"the response is not the JSON expected: {problem}") from None


def split_url(url):
    """(scheme, authority, path with query) of an absolute http(s) URL."""
    scheme, separator, rest = url.partition("://")
    if not separator:
        raise HttpError(f"{url!r} is not an absolute URL")
    if scheme.lower() not in ("http", "https"):
        raise HttpError(f"{url!r}: the scheme must be http or https")
    cut = min([i for i in (rest.find("/"), rest.find("?")) if i >= 0] or [len(rest)])
    authority, path = rest[:cut], rest[cut:]
    if not authority:
        raise HttpError(f"{url!r} has no host")
    return scheme.lower(), authority, path or "/"


def get(url):
    """Sends `GET url` and reads the whole response, following up to `MAX_REDIRECTS` redirects."""
    for _ in range(MAX_REDIRECTS + 1):
        response = _send_get(url)
        location = response.header("location") if response.status in (301, 302, 303, 307, 308) else None
        if location is None:
            return response
        if "://" in location:
            url = location
        elif location.startswith("/"):
            scheme, authority, _ = split_url(url)
            url = f"{scheme}://{authority}{location}"
        else:
            raise HttpError(f"unsupported redirect location {location!r} (relative paths are not followed)")
    raise HttpError(f"more than {MAX_REDIRECTS} redirects from {url}")


def _send_get(url):
    scheme, authority, path = split_url(url)
    request = http_types.OutgoingRequest(http_types.Fields())
    try:
        request.set_method(http_types.Method_Get())
        request.set_scheme(http_types.Scheme_Https() if scheme == "https" else http_types.Scheme_Http())
        request.set_authority(authority)
        request.set_path_with_query(path)
    except Err:
        raise HttpError(f"GET {url}: invalid URL") from None
    try:
        pending = outgoing_handler.handle(request, None)
    except Err as refused:
        raise HttpError(f"GET {url}: {_code(refused.value)}") from None
    with pending.subscribe() as ready:
        ready.block()
    answer = pending.get()
    if not isinstance(answer, Ok):
        raise HttpError(f"GET {url}: no response")
    if isinstance(answer.value, Err):
        raise HttpError(f"GET {url}: {_code(answer.value.value)}")
    response = answer.value.value
    status = response.status()
    headers = response.headers().entries()
    body = response.consume()
    chunks = []
    with body.stream() as stream:
        while True:
            try:
                chunks.append(stream.blocking_read(64 * 1024))
            except Err as ended:
                if isinstance(ended.value, streams.StreamError_Closed):
                    break
                raise HttpError(f"GET {url}: reading the body failed") from None
    http_types.IncomingBody.finish(body)
    return Response(status, headers, b"".join(chunks))


def _code(error_code):
    """The error code's name, as the Rust SDK prints it (`HttpRequestDenied`)."""
    name = type(error_code).__name__
    return name.split("_", 1)[1] if name.startswith("ErrorCode_") else name
