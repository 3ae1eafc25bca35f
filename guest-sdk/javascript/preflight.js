// Write a preflight check in JavaScript: a function from a request to an `Outcome`.
//
//   import { Outcome, exports } from "./preflight.js";
//   function check(request) {
//     const missing = (request.object.spec?.dependsOn ?? []).filter((d) => !(request.config.available ?? []).includes(d));
//     return missing.length
//       ? Outcome.requeueAfter(600).because("DependencyMissing", `waiting for ${missing.join(", ")}`)
//       : Outcome.proceed();
//   }
//   export const { evaluate, configure } = exports(check);
//
// The idioms are the Rust SDK's: proceed / requeue after / block / error, with a reason, a message and
// outputs; logging to the host; `http.get` over the standard wasi:http and `cluster.get` / `cluster.list`
// lookups of other objects (the host enforces the check's grants). An exception thrown by the check is an error outcome (the host backs off and retries);
// `InvalidObject` gives it that reason. Built with componentize-js (see guest-sdk/javascript/README.md).

import { get as clusterGet, list as clusterList } from "preflight:check/cluster@0.2.0";
import { log } from "preflight:check/log@0.2.0";
import { handle } from "wasi:http/outgoing-handler@0.2.12";
import { Fields, IncomingBody, OutgoingRequest } from "wasi:http/types@0.2.12";

/** Thrown when the object does not have the shape the check needs: an error outcome, reason InvalidObject. */
export class InvalidObject extends Error {}

/** A request that failed or was refused; the message names the wasi:http error code. */
export class HttpError extends Error {}

/** The decision of a check. */
export class Outcome {
  constructor(proceed, requeueAfter, error) {
    this.proceed = proceed;
    this.requeueAfter = requeueAfter;
    this.error = error;
    this.reason = "";
    this.message = "";
    this.outputs = new Map();
  }

  /** The object may be reconciled now. */
  static proceed() {
    return new Outcome(true, undefined, undefined);
  }

  /** Do not reconcile now; evaluate again after `seconds` (a number, rounded to the nearest millisecond). */
  static requeueAfter(seconds) {
    return new Outcome(false, seconds, undefined);
  }

  /** Do not reconcile; evaluate again when the object or the check changes. */
  static block() {
    return new Outcome(false, undefined, undefined);
  }

  /** The check could not decide; the host retries with backoff. */
  static error(message) {
    return new Outcome(false, undefined, String(message));
  }

  /** Sets the condition's reason (UpperCamelCase) and message. */
  because(reason, message = "") {
    this.reason = reason;
    this.message = message;
    return this;
  }

  /** For a proceeding outcome: evaluate again after `seconds` even if nothing changes. */
  recheckAfter(seconds) {
    this.requeueAfter = seconds;
    return this;
  }

  /** Records `key` = `value` on the object (by default in its preflight.dev/outputs annotation). */
  output(key, value) {
    this.outputs.delete(key);
    this.outputs.set(key, String(value));
    return this;
  }

  /** The contract's preflight-result. */
  toResult() {
    const delay =
      this.requeueAfter === undefined
        ? undefined
        : Math.min(Math.max(milliseconds(this.requeueAfter), 0), 2 ** 32 - 1);
    return {
      proceed: this.proceed,
      requeueAfterMs: delay,
      error: this.error,
      reason: this.reason,
      message: this.message,
      outputs: [...this.outputs].map(([key, value]) => ({ key, value })),
    };
  }
}

/**
 * `seconds` as whole milliseconds, rounded to the nearest: a float's representation error (2.007 * 1000 is
 * 2007.0000000000002) never adds one.
 */
function milliseconds(seconds) {
  return Math.floor(seconds * 1000 + 0.5);
}

function parseConfig(raw) {
  const config = raw.trim() ? JSON.parse(raw) : {};
  if (config === null || typeof config !== "object" || Array.isArray(config)) {
    throw new Error("the configuration must be a mapping");
  }
  return config;
}

/**
 * The `evaluate` and `configure` exports for `check` and an optional `validate(config)` that throws to
 * refuse a configuration at load.
 */
export function exports(check, validate) {
  warmUp();
  return exportsFor(check, validate);
}

/**
 * Runs the SDK's own side of an evaluation (decoding, the outcomes, the jitter, the result) with a check of
 * its own, never the author's, and calls no import. componentize-js runs the module's top level once, at
 * build time, and snapshots it: SpiderMonkey compiles a function on its first call, so what runs here is
 * compiled in the snapshot instead of in every fresh instance (a fresh evaluation of the example 0.87x).
 */
function warmUp() {
  const sdkCheck = ({ object, config }) => {
    const names = object.spec.dependsOn;
    if (names.length === 0) {
      return Outcome.proceed().because("Ready", "ready").output("key", String(config.retryAfterSeconds));
    }
    if (names[0] === "invalid") {
      throw new InvalidObject("invalid");
    }
    return Outcome.requeueAfter(withJitter(config.retryAfterSeconds, 10, { namespace: "a", name: "b" })).because(
      "Waiting",
      `waiting for ${names.join(", ")}`,
    );
  };
  const { evaluate, configure } = exportsFor(sdkCheck, undefined);
  for (const dependsOn of [[], ["x"], ["invalid"]]) {
    evaluate.check({
      object: JSON.stringify({ apiVersion: "v1", kind: "Sample", metadata: { name: "b" }, spec: { dependsOn } }),
      config: '{"retryAfterSeconds": 600}',
      target: { group: "", version: "v1", kind: "Sample", namespace: "a", name: "b" },
      now: { seconds: 0n, nanoseconds: 0 },
    });
  }
  configure.validateConfig("{}");
}

function exportsFor(check, validate) {
  return {
    evaluate: {
      check(request) {
        let config;
        try {
          config = parseConfig(request.config);
        } catch (problem) {
          return Outcome.error(`invalid check configuration: ${problem.message}`).because("InvalidConfig").toResult();
        }
        // The host's clock as whole milliseconds since the Unix epoch (every SDK's `now` in one unit).
        const nowMs = Number(request.now.seconds) * 1000 + Math.floor(request.now.nanoseconds / 1e6);
        let outcome;
        try {
          outcome = check({
            object: JSON.parse(request.object),
            rawObject: request.object,
            config,
            target: request.target,
            now: new Date(nowMs),
            nowMs,
          });
        } catch (problem) {
          outcome =
            problem instanceof InvalidObject
              ? Outcome.error(problem.message).because("InvalidObject")
              : Outcome.error(`${problem.name}: ${problem.message}`);
        }
        return outcome.toResult();
      },
    },
    configure: {
      // componentize-js turns a thrown value into the result's error, which must be a string: an Error
      // escaping here would trap instead of refusing the configuration with its message.
      validateConfig(raw) {
        try {
          const config = parseConfig(raw);
          if (validate) {
            validate(config);
          }
        } catch (problem) {
          throw problem instanceof Error ? problem.message : String(problem);
        }
      },
    },
  };
}

/**
 * `seconds` plus up to `percent`% of it, chosen by a hash of the object's namespace and name (FNV-1a, the
 * same rule as the Rust and Python SDKs): objects spread their retries, each keeps its schedule. Computed
 * in whole milliseconds, as in Rust; the seconds returned are a whole number of milliseconds, which
 * `requeueAfter` takes exactly.
 */
export function withJitter(seconds, percent, target) {
  const baseMs = milliseconds(seconds);
  const spreadMs = (BigInt(baseMs) * BigInt(Math.floor(Math.min(percent, 100)))) / 100n;
  if (spreadMs === 0n) {
    return baseMs / 1000;
  }
  let digest = 0xcbf29ce484222325n;
  for (const byte of new TextEncoder().encode(`${target.namespace ?? ""}/${target.name}`)) {
    digest = ((digest ^ BigInt(byte)) * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return (baseMs + Number(digest % spreadMs)) / 1000;
}

/**
 * An RFC 3339 date-time as Kubernetes writes them (`2026-12-04T10:15:30Z`, `2026-12-04T11:15:30.25+01:00`) in
 * Unix milliseconds, by the rule every SDK holds to: `YYYY-MM-DDTHH:MM:SS`, then 1 to 9 fraction digits after a
 * `.` (truncated to milliseconds), then `Z` or `+HH:MM`/`-HH:MM`; `T` and `Z` upper case; the date must exist,
 * seconds 0-59, offsets up to 23:59. Throws otherwise (`Date.parse` accepts much more than RFC 3339, and
 * other SDKs would refuse what it accepts).
 */
export function parseTime(text) {
  const match =
    typeof text === "string" &&
    /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|([+-])(\d{2}):(\d{2}))$/.exec(text);
  const problem = () => new Error(`${JSON.stringify(text)} is not an RFC 3339 time such as 2026-12-04T10:15:30Z`);
  if (!match) {
    throw problem();
  }
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number);
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  const monthDays = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1];
  if (month < 1 || month > 12 || day < 1 || day > monthDays || hour > 23 || minute > 59 || second > 59) {
    throw problem();
  }
  const millis = match[7] === undefined ? 0 : Number(match[7].slice(0, 3).padEnd(3, "0"));
  let offset = 0;
  if (match[8] !== "Z") {
    const [hours, minutes] = [Number(match[10]), Number(match[11])];
    if (hours > 23 || minutes > 59) {
      throw problem();
    }
    offset = (match[9] === "-" ? -1 : 1) * (hours * 60 + minutes);
  }
  const utc = new Date(0);
  utc.setUTCFullYear(year, month - 1, day);
  utc.setUTCHours(hour, minute, second, millis);
  return utc.getTime() - offset * 60000;
}

/** How many redirects `http.get` follows; each one is a new request the host checks against the allow-list. */
export const MAX_REDIRECTS = 5;

function splitUrl(url) {
  const match = /^(https?):\/\/([^/?]+)(.*)$/i.exec(url);
  if (!match) {
    throw new HttpError(`${JSON.stringify(url)} is not an absolute http(s) URL`);
  }
  return [match[1].toLowerCase(), match[2], match[3] || "/"];
}

/** The error code's name as the Rust and Python SDKs print it: `HTTP-request-denied` is `HttpRequestDenied`. */
function errorCode(code) {
  const tag = code?.tag ?? String(code);
  return tag
    .split("-")
    .map((word) => word.charAt(0).toUpperCase() + word.slice(1).toLowerCase())
    .join("");
}

function sendGet(url) {
  const [scheme, authority, path] = splitUrl(url);
  const request = new OutgoingRequest(new Fields());
  request.setMethod({ tag: "get" });
  request.setScheme({ tag: scheme === "https" ? "HTTPS" : "HTTP" });
  request.setAuthority(authority);
  request.setPathWithQuery(path);
  let pending;
  try {
    pending = handle(request, undefined);
  } catch (refused) {
    throw new HttpError(`GET ${url}: ${errorCode(refused.payload)}`);
  }
  pending.subscribe().block();
  const answer = pending.get();
  if (!answer || answer.tag !== "ok") {
    throw new HttpError(`GET ${url}: no response`);
  }
  if (answer.val.tag !== "ok") {
    throw new HttpError(`GET ${url}: ${errorCode(answer.val.val)}`);
  }
  const response = answer.val.val;
  const status = response.status();
  const headers = response.headers().entries();
  const body = response.consume();
  const stream = body.stream();
  const chunks = [];
  for (;;) {
    try {
      chunks.push(stream.blockingRead(64n * 1024n));
    } catch (ended) {
      if (ended.payload?.tag === "closed") {
        break;
      }
      throw new HttpError(`GET ${url}: reading the body failed`);
    }
  }
  stream[Symbol.dispose]?.();
  IncomingBody.finish(body);
  const length = chunks.reduce((sum, chunk) => sum + chunk.length, 0);
  const bytes = new Uint8Array(length);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.length;
  }
  return {
    status,
    headers,
    body: bytes,
    text: () => new TextDecoder().decode(bytes),
    json() {
      try {
        return JSON.parse(new TextDecoder().decode(bytes));
      } catch (problem) {
        throw new HttpError(`the response is not the JSON expected: ${problem.message}`);
      }
    },
    header(name) {
      const found = headers.find(([key]) => key.toLowerCase() === name.toLowerCase());
      return found ? new TextDecoder().decode(found[1]) : undefined;
    },
  };
}

/** Outbound HTTP: `http.get(url)` reads the whole response (the host caps its size), following redirects. */
export const http = {
  get(url) {
    let current = url;
    for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
      const response = sendGet(current);
      const location = [301, 302, 303, 307, 308].includes(response.status) ? response.header("location") : undefined;
      if (location === undefined) {
        return response;
      }
      if (location.includes("://")) {
        current = location;
      } else if (location.startsWith("/")) {
        const [scheme, authority] = splitUrl(current);
        current = `${scheme}://${authority}${location}`;
      } else {
        throw new HttpError(`unsupported redirect location ${JSON.stringify(location)}`);
      }
    }
    throw new HttpError(`more than ${MAX_REDIRECTS} redirects from ${url}`);
  },
};

export const trace = (message) => log("trace", String(message));
export const debug = (message) => log("debug", String(message));
export const info = (message) => log("info", String(message));
export const warn = (message) => log("warn", String(message));
export const error = (message) => log("error", String(message));

/** A lookup the host refused or that failed; the message names what is not granted. */
export class LookupError extends Error {}

function objectKind(apiVersion, kind) {
  const slash = apiVersion.lastIndexOf("/");
  return slash < 0
    ? { group: "", version: apiVersion, kind }
    : { group: apiVersion.slice(0, slash), version: apiVersion.slice(slash + 1), kind };
}

function lookup(call) {
  try {
    return call();
  } catch (refused) {
    throw new LookupError(String(refused?.payload ?? refused));
  }
}

/**
 * Read-only lookups of other Kubernetes objects (contract 0.2), answered by the operator from its watch
 * caches; only what the check's ConfigMap grants. The same rules and names as the Rust SDK's `cluster`.
 */
export const cluster = {
  /** The object `name` of `kind` in `apiVersion` ("v1", "apps/v1"), or undefined when it does not exist;
   *  `namespace` undefined: the gated object's. */
  get(apiVersion, kind, namespace, name) {
    const found = lookup(() => clusterGet(objectKind(apiVersion, kind), namespace, name));
    return found === undefined ? undefined : JSON.parse(found);
  },
  /** The objects of `kind` matching `labelSelector` ("app=db,tier!=cache"; "": all), sorted. */
  list(apiVersion, kind, namespace, labelSelector = "") {
    return lookup(() => clusterList(objectKind(apiVersion, kind), namespace, labelSelector)).map((item) =>
      JSON.parse(item),
    );
  },
};
