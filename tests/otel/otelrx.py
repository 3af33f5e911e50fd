# SPDX-License-Identifier: MIT
"""Issue 33's test side: a real OTLP receiver, the OpenTelemetry test app, what the receiver got as
Python objects, and comparisons of two receivers' views (dotmon's export against the in-process
OpenTelemetry SDK's).

Receiver   Microsoft's Aspire Dashboard (NuGet Aspire.Dashboard.Sdk.linux-x64, a self-contained
           binary restored into the build tree by the ctest fixture otel_dashboard: its path is
           DOTMON_ASPIRE_DASHBOARD). It listens on free ports of 127.0.0.1: OTLP/HTTP (protobuf and
           JSON, /v1/logs, /v1/traces, /v1/metrics) and its frontend, whose JSON API answers what it
           received (GET /api/telemetry/resources, /spans, /traces, /traces/<id>, /logs; it also takes
           OTLP/JSON requests). Own
           folder (HOME too: ASP.NET Core keeps its data-protection keys there), stopped at the end.
           The API has no metrics in 13.6.5 (see Receiver.metrics_api).
OtelApp    tests/otel/app (DOTMON_OTELAPP_DIR): /work?id=N makes a known set of logs, metrics and
           spans and answers the ids it created; with sdk=True its in-process SDK exports them.
FaultProxy an HTTP proxy in front of a receiver for the fault tests: down (connection refused),
           a status (429/503 with Retry-After), slow answers; it records every request's path,
           Content-Type and Content-Encoding, and decodes what went through (otlp_pb: value
           types kept; the only view of metrics' values, which the dashboard's API lacks).

What the dashboard's API changes, which the normalisers below undo or ignore: every attribute value
comes back as a string (intValue 7 reads "7"); it adds aspire.* attributes of its own
(aspire.destination on client and server spans, aspire.log_id on log records); a span status Unset
has no "status"; service.instance.id is its resource key and comes back empty; log records lose
the {OriginalFormat} attribute and the scope's TraceId, SpanId and ParentId (DASHBOARD_DROPS_LOG_ATTRS);
it does not read gzip bodies (FaultProxy inflates them).

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "otel"))
    from otelrx import OtelApp, Receiver, compare_logs, compare_spans, flat_logs, flat_spans
"""

import collections
import gzip
import http.client
import http.server
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from dmtest import MULT, dotnet_root, fetch, free_port, stop, wait_for  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import otlp_pb  # noqa: E402

# Attributes the dashboard adds to what it received: never part of a comparison.
DASHBOARD_ATTRS = frozenset({"aspire.destination", "aspire.log_id"})
# Log attributes the dashboard drops from what it received (the template, and the TraceId, SpanId,
# ParentId that .NET's activity-tracking scope adds): ignore them when comparing its view with a
# view that has them (FaultProxy.received).
DASHBOARD_DROPS_LOG_ATTRS = frozenset({"{OriginalFormat}", "TraceId", "SpanId", "ParentId"})


# ---------------------------------------------------------------------------------------------
# The receiver


class Receiver:
    """One Aspire Dashboard on free ports of 127.0.0.1, in its own folder (tmp, or a new one it
    removes at stop()). api_key: OTLP requests must carry the header x-otlp-api-key with it (else
    401); cert and key (PEM files): OTLP/HTTP is HTTPS with that certificate; limits: the
    dashboard's TelemetryLimits (MaxLogCount, MaxTraceCount, MaxMetricsCount, ...).
    Attributes: otlp_url (scheme://127.0.0.1:port, the OTEL_EXPORTER_OTLP_ENDPOINT to give),
    api_port, start_seconds (from exec to the API answering), log (its output's path).
    A context manager: `with Receiver() as rx:`."""

    # The HTTP telemetry API of the dashboard answers logs, spans, traces and resources; not
    # metrics (13.6.5: the metrics it receives are only shown on its Blazor pages).
    metrics_api = False

    def __init__(self, tmp=None, api_key=None, cert=None, key=None, limits=None, timeout=60):
        exe = os.environ.get("DOTMON_ASPIRE_DASHBOARD", "")
        if not os.path.isfile(exe):
            raise RuntimeError(f"no Aspire Dashboard at DOTMON_ASPIRE_DASHBOARD={exe!r} (ctest fixture otel_dashboard)")
        self.own_tmp = tmp is None
        self.tmp = tempfile.mkdtemp(prefix="otelrx-") if tmp is None else tmp
        os.chmod(self.tmp, 0o700)
        self.api_key = api_key
        self.api_port = free_port()
        self.otlp_port = free_port()
        scheme = "https" if cert else "http"
        self.otlp_url = f"{scheme}://127.0.0.1:{self.otlp_port}"
        home = os.path.join(self.tmp, "home")
        os.makedirs(home, exist_ok=True)
        # The machine's own OTEL_*, ASPNETCORE_*, DOTNET_* and dashboard settings stay out.
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("OTEL_", "ASPNETCORE_", "DOTNET_", "ASPIRE_", "DASHBOARD__", "Dashboard__",
                                    "Kestrel__"))}
        env.update({
            "HOME": home,
            "TMPDIR": self.tmp,
            "DOTNET_CLI_TELEMETRY_OPTOUT": "1",
            "ASPNETCORE_URLS": f"http://127.0.0.1:{self.api_port}",
            "ASPIRE_DASHBOARD_OTLP_HTTP_ENDPOINT_URL": self.otlp_url,
            "DASHBOARD__FRONTEND__AUTHMODE": "Unsecured",
            "DASHBOARD__API__AUTHMODE": "Unsecured",
            "DASHBOARD__OTLP__AUTHMODE": "ApiKey" if api_key else "Unsecured",
        })
        if api_key:
            env["DASHBOARD__OTLP__PRIMARYAPIKEY"] = api_key
        if cert:
            env["Kestrel__Certificates__Default__Path"] = cert
            env["Kestrel__Certificates__Default__KeyPath"] = key
        for k, v in (limits or {}).items():
            env[f"DASHBOARD__TELEMETRYLIMITS__{k.upper()}"] = str(v)
        self.command = [exe]
        self.env_given = {k: v for k, v in env.items() if k not in os.environ or os.environ[k] != v}
        self.log = os.path.join(self.tmp, "dashboard.log")
        self._log = open(self.log, "w")
        t0 = time.monotonic()
        self.p = subprocess.Popen(self.command, env=env, stdout=self._log, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, cwd=self.tmp)
        ok = wait_for(lambda: self.p.poll() is not None or self._answers(), timeout, 0.05)
        if not ok or self.p.poll() is not None:
            self.stop(show_log=True)
            raise RuntimeError(f"the Aspire Dashboard did not answer within {timeout} s")
        self.start_seconds = time.monotonic() - t0

    def command_line(self):
        """The dashboard's command line as a shell would run it: the settings given (every
        variable that differs from this process's environment) and the binary."""
        return " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.env_given.items())) + " " + \
            " ".join(shlex.quote(c) for c in self.command)

    def _answers(self):
        st, _, _ = fetch(f"http://127.0.0.1:{self.api_port}/api/telemetry/resources", timeout=2)
        if st != 200:
            return False
        try:
            socket.create_connection(("127.0.0.1", self.otlp_port), timeout=2).close()
        except OSError:
            return False
        return True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop(show_log=exc[0] is not None)

    def stop(self, show_log=False):
        """Stops the dashboard (SIGTERM, SIGKILL after 10 s); show_log writes its output's tail to
        standard error; removes the folder when the receiver made it."""
        stop(getattr(self, "p", None), 10)
        if getattr(self, "_log", None) is not None:
            self._log.close()
            self._log = None
            if show_log:
                with open(self.log, errors="replace") as f:
                    sys.stderr.write("--- dashboard log (tail) ---\n" + f.read()[-4000:])
        if self.own_tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def sdk_env(self, service_name, protocol="http/protobuf", interval_ms=1000, delay_ms=200, endpoint=None):
        """The standard OTEL_* variables that point an OpenTelemetry SDK (or dotmon) at this
        receiver: protocol, short export interval and batch delays, the API key header."""
        env = {
            "OTEL_SERVICE_NAME": service_name,
            "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint or self.otlp_url,
            "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
            "OTEL_METRIC_EXPORT_INTERVAL": str(interval_ms),
            "OTEL_BSP_SCHEDULE_DELAY": str(delay_ms),
            "OTEL_BLRP_SCHEDULE_DELAY": str(delay_ms),
        }
        if self.api_key:
            env["OTEL_EXPORTER_OTLP_HEADERS"] = f"x-otlp-api-key={self.api_key}"
        return env

    # -- the JSON API ---------------------------------------------------------------------------

    def get(self, path, **params):
        """GET /api/telemetry/<path>?params (None values left out; lists repeat the key): the
        parsed JSON, or None when the dashboard answers 404 (an unknown resource or trace)."""
        q = urllib.parse.urlencode([(k, x) for k, v in params.items() if v is not None
                                    for x in (v if isinstance(v, (list, tuple)) else [v])])
        url = f"http://127.0.0.1:{self.api_port}/api/telemetry/{path}" + (f"?{q}" if q else "")
        st, _, body = fetch(url, timeout=30)
        if st == 404:
            return None
        if st != 200:
            raise RuntimeError(f"GET {url}: {st} {body[:200]!r}")
        return json.loads(body)

    def resources(self):
        """[{name, instanceId?, displayName, hasLogs, hasTraces, hasMetrics}] of every resource
        that sent something: name is service.name, instanceId service.instance.id when sent,
        displayName "<name>-<instanceId>" (or name). The resource's other attributes come with
        each span and record (flat_spans' and flat_logs' "resource")."""
        return self.get("resources") or []

    def spans(self, trace_id=None, resource=None, has_error=None, limit=10000, service=None):
        """Flat spans (flat_spans) the dashboard holds, optionally of one trace, of one resource
        (the dashboard's name: service.name alone matches only while one instance of it sent
        telemetry; with several, "<service.name>-<service.instance.id>", its displayName), or of
        one service.name whatever the instance (service: filtered here)."""
        d = self.get("spans", traceId=trace_id, resource=resource,
                     hasError=None if has_error is None else str(has_error).lower(), limit=limit)
        out = flat_spans(d["data"]) if d else []
        return [x for x in out if service is None or x["resource"].get("service.name") == service]

    def trace(self, trace_id):
        """The flat spans of one trace (GET /api/telemetry/traces/<id>), [] when unknown."""
        d = self.get(f"traces/{trace_id}")
        return flat_spans(d["data"]) if d else []

    def logs(self, trace_id=None, resource=None, severity=None, limit=10000, service=None):
        """Flat log records (flat_logs), optionally of one trace / resource / service.name (as for
        spans) / minimum severity (Trace, Debug, Information, Warning, Error, Critical)."""
        d = self.get("logs", traceId=trace_id, resource=resource, severity=severity, limit=limit)
        out = flat_logs(d["data"]) if d else []
        return [x for x in out if service is None or x["resource"].get("service.name") == service]

    def wait_spans(self, want, seconds=20, **query):
        """Polls spans(**query) until want(spans) holds (or want is a count reached), for up to
        seconds (scaled); returns the last spans."""
        return _wait(lambda: self.spans(**query), want, seconds)

    def wait_logs(self, want, seconds=20, **query):
        """Like wait_spans, for logs(**query)."""
        return _wait(lambda: self.logs(**query), want, seconds)


def _wait(get, want, seconds):
    ok = want if callable(want) else (lambda v: len(v) >= want)
    deadline = time.time() + seconds * MULT
    v = get()
    while not ok(v) and time.time() < deadline:
        time.sleep(0.2)
        v = get()
    return v


def private_ca(folder):
    """A private CA and a server certificate for 127.0.0.1 signed by it (EC P-256, two days), made
    with the openssl command in folder: (CA certificate, server certificate, server key) paths,
    PEM; the key is 0600. For Receiver(cert=, key=) and an exporter trusting only that CA."""
    os.makedirs(folder, exist_ok=True)
    ca, ca_key = os.path.join(folder, "ca.pem"), os.path.join(folder, "ca.key")
    crt, key, csr = os.path.join(folder, "server.pem"), os.path.join(folder, "server.key"), os.path.join(folder, "server.csr")
    ext = os.path.join(folder, "server.ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    for cmd in (["openssl", "req", "-x509", *ec, "-keyout", ca_key, "-out", ca, "-days", "2", "-subj", "/CN=otelrx test CA"],
                ["openssl", "req", *ec, "-keyout", key, "-out", csr, "-subj", "/CN=127.0.0.1"],
                ["openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-out", crt,
                 "-days", "2", "-extfile", ext]):
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for k in (ca_key, key):
        os.chmod(k, 0o600)
    return ca, crt, key


# ---------------------------------------------------------------------------------------------
# OTLP JSON as flat Python objects


def any_value(v):
    """An OTLP AnyValue as a string (the dashboard gives every value as a string: both sides of a
    comparison go through here). Arrays and maps as JSON of their values; an empty value as ""."""
    if not isinstance(v, dict) or not v:
        return ""
    for k in ("stringValue", "intValue", "doubleValue"):
        if k in v:
            return str(v[k])
    if "boolValue" in v:
        return "true" if v["boolValue"] else "false"
    if "bytesValue" in v:
        return str(v["bytesValue"])
    if "arrayValue" in v:
        return json.dumps([any_value(x) for x in v["arrayValue"].get("values", [])])
    if "kvlistValue" in v:
        return json.dumps({x["key"]: any_value(x.get("value")) for x in v["kvlistValue"].get("values", [])},
                          sort_keys=True)
    return ""


def attrs(lst, ignore=DASHBOARD_ATTRS):
    """OTLP KeyValue list → {key: string value}, without the keys of ignore."""
    return {a["key"]: any_value(a.get("value")) for a in (lst or []) if a["key"] not in ignore}


def flat_spans(data):
    """OTLP JSON traces data ({"resourceSpans": [...]}) → a list of dicts, one a span: resource
    (attributes), scope, scope_version, trace_id, span_id, parent_span_id ("" for a root), name,
    kind (int), status (0 Unset, 1 Ok, 2 Error), status_message, attributes, start_ns, end_ns,
    duration_ns, events [(name, attributes)], links [(trace_id, span_id)]."""
    out = []
    for rs in data.get("resourceSpans", []):
        res = attrs(rs.get("resource", {}).get("attributes"))
        for ss in rs.get("scopeSpans", []):
            scope = ss.get("scope", {})
            for s in ss.get("spans", []):
                st = s.get("status") or {}
                start, end = int(s.get("startTimeUnixNano", 0)), int(s.get("endTimeUnixNano", 0))
                out.append({
                    "resource": res, "scope": scope.get("name", ""), "scope_version": scope.get("version", ""),
                    "trace_id": s.get("traceId", "").lower(), "span_id": s.get("spanId", "").lower(),
                    "parent_span_id": (s.get("parentSpanId") or "").lower(), "name": s.get("name", ""),
                    "kind": int(s.get("kind", 0)), "status": int(st.get("code", 0)),
                    "status_message": st.get("message", "") or "", "attributes": attrs(s.get("attributes")),
                    "start_ns": start, "end_ns": end, "duration_ns": end - start,
                    "events": [(e.get("name", ""), attrs(e.get("attributes"))) for e in s.get("events", [])],
                    "links": [(ln.get("traceId", "").lower(), ln.get("spanId", "").lower())
                              for ln in s.get("links", [])],
                })
    return out


def flat_logs(data):
    """OTLP JSON logs data ({"resourceLogs": [...]}) → a list of dicts, one a record: resource,
    scope (the ILogger category), time_ns, severity (number), severity_text, body, event_name,
    attributes, trace_id, span_id ("" when none)."""
    out = []
    for rl in data.get("resourceLogs", []):
        res = attrs(rl.get("resource", {}).get("attributes"))
        for sl in rl.get("scopeLogs", []):
            scope = sl.get("scope", {}).get("name", "")
            for r in sl.get("logRecords", []):
                out.append({
                    "resource": res, "scope": scope, "time_ns": int(r.get("timeUnixNano", 0) or 0),
                    "severity": int(r.get("severityNumber", 0)), "severity_text": r.get("severityText", ""),
                    "body": any_value(r.get("body")), "event_name": r.get("eventName", ""),
                    "attributes": attrs(r.get("attributes")), "trace_id": (r.get("traceId") or "").lower(),
                    "span_id": (r.get("spanId") or "").lower(),
                })
    return out


def metric_points(data):
    """OTLP JSON metrics data ({"resourceMetrics": [...]}, the body of an ExportMetricsServiceRequest
    in JSON) → {(scope, name, kind, frozenset(attributes.items())): value}: the last point of each
    series; value is a number for sum and gauge, (count, sum, bucket counts) for histograms,
    (count, sum) for exponential histograms and summaries. kind: sum, gauge, histogram,
    exponentialHistogram, summary; with sum also monotonic and temporality under the key
    (scope, name, "sum.meta", frozenset())."""
    out = {}
    for rm in data.get("resourceMetrics", []):
        for sm in rm.get("scopeMetrics", []):
            scope = sm.get("scope", {}).get("name", "")
            for m in sm.get("metrics", []):
                for kind in ("sum", "gauge", "histogram", "exponentialHistogram", "summary"):
                    if kind not in m:
                        continue
                    body = m[kind]
                    if kind == "sum":
                        out[(scope, m["name"], "sum.meta", frozenset())] = (
                            bool(body.get("isMonotonic", False)), int(body.get("aggregationTemporality", 0)))
                    for p in body.get("dataPoints", []):
                        key = (scope, m["name"], kind, frozenset(attrs(p.get("attributes")).items()))
                        if kind in ("sum", "gauge"):
                            v = p.get("asDouble", p.get("asInt", 0))
                            out[key] = float(v)
                        elif kind == "histogram":
                            out[key] = (int(p.get("count", 0)), float(p.get("sum", 0)),
                                        tuple(int(c) for c in p.get("bucketCounts", [])))
                        else:
                            out[key] = (int(p.get("count", 0)), float(p.get("sum", 0)))
    return out


# ---------------------------------------------------------------------------------------------
# Comparisons: each answers a list of differences (strings); [] means the same.


def span_tuple(s, ignore_attrs=()):
    """What must be equal of one span in two views: (trace id, span id, parent span id, name,
    kind, status, status message, attributes without ignore_attrs)."""
    a = frozenset((k, v) for k, v in s["attributes"].items() if k not in ignore_attrs)
    return (s["trace_id"], s["span_id"], s["parent_span_id"], s["name"], s["kind"], s["status"],
            s["status_message"], a)


def compare_spans(a, b, tolerance_ns=1_000_000, ignore_attrs=(), start_tolerance_ns=None):
    """Spans of view a against view b, matched by (trace id, span id): each must exist in both
    with the same span_tuple, and durations within tolerance_ns (1 ms); with start_tolerance_ns
    the start times too. Lists what differs."""
    fields = ("trace_id", "span_id", "parent_span_id", "name", "kind", "status", "status_message", "attributes")
    ia = {(s["trace_id"], s["span_id"]): s for s in a}
    ib = {(s["trace_id"], s["span_id"]): s for s in b}
    diffs = []
    for k in sorted(set(ia) - set(ib)):
        diffs.append(f"span {k[0]}/{k[1]} ({ia[k]['name']}) only in the first view")
    for k in sorted(set(ib) - set(ia)):
        diffs.append(f"span {k[0]}/{k[1]} ({ib[k]['name']}) only in the second view")
    for k in sorted(set(ia) & set(ib)):
        ta, tb = span_tuple(ia[k], ignore_attrs), span_tuple(ib[k], ignore_attrs)
        for f, x, y in zip(fields, ta, tb):
            if x != y:
                if f == "attributes":
                    x, y = dict(x), dict(y)
                    x, y = ({q: v for q, v in x.items() if y.get(q) != v}, {q: v for q, v in y.items() if x.get(q) != v})
                diffs.append(f"span {ia[k]['name']} {k[1]}: {f} {x!r} != {y!r}")
        dd = abs(ia[k]["duration_ns"] - ib[k]["duration_ns"])
        if dd > tolerance_ns:
            diffs.append(f"span {ia[k]['name']} {k[1]}: durations differ by {dd / 1e6:.3f} ms")
        if start_tolerance_ns is not None and abs(ia[k]["start_ns"] - ib[k]["start_ns"]) > start_tolerance_ns:
            diffs.append(f"span {ia[k]['name']} {k[1]}: start times differ by "
                         f"{abs(ia[k]['start_ns'] - ib[k]['start_ns']) / 1e6:.3f} ms")
    return diffs


def log_tuple(r, ignore_attrs=()):
    """What must be equal of one log record in two views: (trace id, span id, scope (category),
    severity number, body, event name, attributes without ignore_attrs)."""
    a = frozenset((k, v) for k, v in r["attributes"].items() if k not in ignore_attrs)
    return (r["trace_id"], r["span_id"], r["scope"], r["severity"], r["body"], r["event_name"], a)


def compare_logs(a, b, ignore_attrs=(), time_tolerance_ns=None):
    """Log records of view a against view b as multisets of log_tuple (records have no id of their
    own); with time_tolerance_ns, matched records' times too. Lists what differs."""
    ca = collections.Counter(log_tuple(r, ignore_attrs) for r in a)
    cb = collections.Counter(log_tuple(r, ignore_attrs) for r in b)
    diffs = [f"log {t[2]} {t[4]!r} (trace {t[0] or '-'}): {n} more in the first view {dict(t[6])}"
             for t, n in (ca - cb).items()]
    diffs += [f"log {t[2]} {t[4]!r} (trace {t[0] or '-'}): {n} more in the second view {dict(t[6])}"
              for t, n in (cb - ca).items()]
    if time_tolerance_ns is not None:
        times_b = collections.defaultdict(list)
        for r in b:
            times_b[log_tuple(r, ignore_attrs)].append(r["time_ns"])
        for r in a:
            tb = times_b.get(log_tuple(r, ignore_attrs))
            if tb and min(abs(r["time_ns"] - t) for t in tb) > time_tolerance_ns:
                diffs.append(f"log {r['scope']} {r['body']!r}: times differ by more than "
                             f"{time_tolerance_ns / 1e6:.3f} ms")
    return diffs


def compare_resources(a, b, keys=("service.name",)):
    """Resource attribute dicts a and b agree on keys (missing counts as a difference)."""
    return [f"resource {k}: {a.get(k)!r} != {b.get(k)!r}" for k in keys if a.get(k) is None or a.get(k) != b.get(k)]


def compare_metrics(a, b, tolerance=None, names=None):
    """metric_points a against b: every series of names (default: all, of both) in both, values
    equal within tolerance[name] (a number: absolute difference allowed on sums, gauges and
    histogram count/sum; one export interval's worth of change). Lists what differs."""
    tolerance = tolerance or {}
    keys = {k for k in set(a) | set(b) if names is None or k[1] in names}
    diffs = []
    for k in sorted(keys, key=repr):
        if k not in a or k not in b:
            diffs.append(f"metric {k[1]} {k[2]} {dict(k[3])}: only in the {'second' if k not in a else 'first'} view")
            continue
        x, y, tol = a[k], b[k], tolerance.get(k[1], 0)
        if isinstance(x, (int, float)) and isinstance(y, (int, float)):
            if abs(x - y) > tol:
                diffs.append(f"metric {k[1]} {dict(k[3])}: {x} != {y} (tolerance {tol})")
        elif isinstance(x, tuple) and isinstance(y, tuple) and k[2] != "sum.meta":
            if abs(x[0] - y[0]) > tol or abs(x[1] - y[1]) > tol * max(1.0, abs(x[1]) / max(1, x[0])):
                diffs.append(f"metric {k[1]} {k[2]} {dict(k[3])}: count/sum {x[:2]} != {y[:2]}")
        elif x != y:
            diffs.append(f"metric {k[1]} {k[2]}: {x!r} != {y!r}")
    return diffs


def compare_receivers(a, b, trace_ids, service=None, ignore_span_attrs=(), ignore_log_attrs=(),
                      tolerance_ns=1_000_000):
    """Two receivers' views (Receiver a and b: say the in-process SDK's and dotmon's) of the traces
    trace_ids (of service, a service.name, when given): their spans (compare_spans, durations
    within tolerance_ns), the log records of those traces (compare_logs) and the resources'
    service.name. Lists every difference; [] when the views agree."""
    ids = set(trace_ids)
    sa = [x for x in a.spans(service=service) if x["trace_id"] in ids]
    sb = [x for x in b.spans(service=service) if x["trace_id"] in ids]
    la = [x for x in a.logs(service=service) if x["trace_id"] in ids]
    lb = [x for x in b.logs(service=service) if x["trace_id"] in ids]
    diffs = compare_spans(sa, sb, tolerance_ns, ignore_span_attrs)
    diffs += compare_logs(la, lb, ignore_log_attrs)
    if sa and sb:
        diffs += compare_resources(sa[0]["resource"], sb[0]["resource"])
    elif not sa and not sb:
        diffs.append(f"no span of traces {sorted(ids)} in either view")
    return diffs


# ---------------------------------------------------------------------------------------------
# The test app


APP_METER = "DotmonTest.OTel"  # tests/otel/app: its Meter and ActivitySource


class OtelApp:
    """tests/otel/app's OtelApp (DOTMON_OTELAPP_DIR) on a free port, TMPDIR=tmp, with env added
    (the SDK's OTEL_* when sdk=True: OTEL_TEST_SDK=1). Waits for its ready line; pid, url."""

    def __init__(self, tmp, env=None, sdk=False, timeout=60):
        self.port = free_port()
        e = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        e.update(TMPDIR=tmp, DOTNET_ROOT=dotnet_root(), OTEL_APP_PORT=str(self.port),
                 OTEL_TEST_SDK="1" if sdk else "0", **(env or {}))
        self.p = subprocess.Popen([os.path.join(os.environ["DOTMON_OTELAPP_DIR"], "OtelApp")], env=e,
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
        self.pid, self.url = None, None
        ready = threading.Event()

        def read():
            for line in self.p.stdout:
                m = re.match(r"ready pid=(\d+) url=(\S+)", line)
                if m:
                    self.pid, self.url = int(m.group(1)), m.group(2)
                    ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(timeout * MULT):
            self.kill()
            raise RuntimeError("the OTel test app did not get ready")

    def get(self, path, timeout=30):
        """GET path on the app: the parsed JSON answer (raises on a status other than 200)."""
        st, _, body = fetch(self.url + path, timeout=timeout)
        if st != 200:
            raise RuntimeError(f"GET {path}: {st} {body[:200]!r}")
        return json.loads(body)

    def work(self, n):
        """/work?id=n: the ids it created (see tests/otel/app/Program.cs)."""
        return self.get(f"/work?id={n}")

    def items(self, n, rate=0, kind="plain"):
        """/items?n=&rate=&kind=: n items (a scope, two spans, a log record, two measurements each,
        and what kind adds: an await, an exception, an HTTP call) at about rate per second (0: as
        fast as the app goes); the seconds the app took."""
        return self.get(f"/items?n={n}&rate={rate}&kind={kind}",
                        timeout=n / max(rate, 1000) * 4 + 60)["ms"] / 1000

    def metrics_state(self):
        """The values the app's instruments hold (its own count of what it recorded)."""
        return self.get("/metrics-state")

    def expected_points(self, histogram=None):
        """What metric_points should hold for the app's instruments, from its own counts: the
        counter, the up-down counter, the gauge, and with histogram (the point kind: "histogram"
        from the SDK, "exponentialHistogram" from dotmon on .NET 10) its (count, sum)."""
        st = self.metrics_state()
        want = {
            (APP_METER, "dotmontest.requests", "sum", frozenset({("route", "/work")})): st["requests"],
            (APP_METER, "dotmontest.open_orders", "sum", frozenset({("tenant", "contoso")})): st["openOrders"],
            (APP_METER, "dotmontest.last_order", "gauge", frozenset({("tenant", "contoso")})): st["lastOrder"],
        }
        if histogram is not None:
            want[(APP_METER, "dotmontest.work_size", histogram, frozenset({("route", "/work")}))] = \
                (st["histogramCount"], st["histogramSum"])
        return want

    def stop(self, timeout=15):
        """SIGTERM (the host stops; an in-process SDK flushes), SIGKILL after timeout s."""
        stop(self.p, timeout)

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


# ---------------------------------------------------------------------------------------------
# Faults in front of a receiver


class FaultProxy:
    """An HTTP/1.1 proxy on a free port of 127.0.0.1 in front of target_url (a receiver's OTLP
    endpoint, plain HTTP). mode: "pass" (forward), "status" (answer status with Retry-After:
    retry_after when set, forward nothing), "slow" (wait delay s, then forward). down() closes the
    listening socket (connections refused) until up() opens it again on the same port. Every
    request is recorded in requests: (path, Content-Type, Content-Encoding, body size as sent, the
    status answered). The Aspire Dashboard (13.6.5) does not read Content-Encoding: gzip (it
    parses the compressed bytes as protobuf and answers 500), so with gunzip (the default) the
    proxy inflates gzip bodies and forwards them plain: a body that is not valid gzip is answered
    400 and not forwarded, so delivery proves the exporter's gzip."""

    def __init__(self, target_url, gunzip=True):
        u = urllib.parse.urlsplit(target_url)
        self.target = (u.hostname, u.port)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.gunzip = gunzip
        self.mode, self.status, self.retry_after, self.delay = "pass", 503, None, 0.0
        self.requests = []
        self.bodies = []
        self.answers = []
        self.lock = threading.Lock()
        self.idle = threading.Condition(self.lock)
        self.inflight = 0
        self.server = None
        self.up()

    def _handler(self):
        proxy = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _body(self):
                if "chunked" not in self.headers.get("Transfer-Encoding", "").lower():
                    return self.rfile.read(int(self.headers.get("Content-Length", "0") or 0))
                parts = []
                while True:
                    n = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                    if n == 0:
                        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                            pass
                        return b"".join(parts)
                    parts.append(self.rfile.read(n))
                    self.rfile.readline()

            def do_POST(self):
                with proxy.lock:
                    proxy.inflight += 1
                try:
                    self._post()
                finally:
                    with proxy.lock:
                        proxy.inflight -= 1
                        proxy.idle.notify_all()

            def _post(self):
                body = self._body()
                arrived = time.time_ns()
                sent = len(body)
                gz = self.headers.get("Content-Encoding", "").lower() == "gzip"
                bad_gzip = False
                if gz and proxy.gunzip:
                    try:
                        body = gzip.decompress(body)
                    except (OSError, EOFError):
                        bad_gzip = True
                mode = proxy.mode
                if mode == "slow":
                    time.sleep(proxy.delay)
                if bad_gzip:
                    st, hdrs, data = 400, [("Content-Length", "0")], b""
                elif mode == "status":
                    st, hdrs, data = proxy.status, [("Content-Length", "0")], b""
                    if proxy.retry_after is not None:
                        hdrs.append(("Retry-After", str(proxy.retry_after)))
                else:
                    c = http.client.HTTPConnection(*proxy.target, timeout=30)
                    try:
                        fwd = {k: v for k, v in self.headers.items()
                               if k.lower() not in ("host", "connection", "transfer-encoding", "content-length")
                               and not (proxy.gunzip and k.lower() == "content-encoding")}
                        c.request("POST", self.path, body=body, headers=fwd)
                        r = c.getresponse()
                        data = r.read()
                        st = r.status
                        hdrs = [(k, v) for k, v in r.getheaders()
                                if k.lower() not in ("transfer-encoding", "connection", "content-length")]
                        hdrs.append(("Content-Length", str(len(data))))
                    except OSError:
                        st, hdrs, data = 502, [("Content-Length", "0")], b""
                    finally:
                        c.close()
                with proxy.lock:
                    proxy.requests.append((self.path, self.headers.get("Content-Type", ""),
                                           self.headers.get("Content-Encoding", ""), sent, st))
                    if not bad_gzip and (not gz or proxy.gunzip):
                        proxy.bodies.append((self.path, self.headers.get("Content-Type", ""), body, st, arrived))
                    if data and 200 <= st < 300:
                        proxy.answers.append((self.path, dict(hdrs).get("Content-Type", ""), data))
                self.send_response(st)
                for k, v in hdrs:
                    self.send_header(k, v)
                self.end_headers()
                try:
                    self.wfile.write(data)
                except OSError:
                    pass  # the client gave up (a timeout of its own): recorded above all the same

        return H

    def up(self):
        if self.server is not None:
            return
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        srv.daemon_threads = True
        self.server = srv
        threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()

    def down(self):
        if self.server is None:
            return
        self.server.shutdown()
        self.server.server_close()
        self.server = None

    def close(self):
        self.down()

    def settle(self, seconds=5):
        """Waits (up to seconds) until no request is being handled. A request is recorded once
        the receiver has answered it, so the receiver may hold its data a moment before the
        request is on the lists: readers of the lists settle first."""
        with self.idle:
            return self.idle.wait_for(lambda: self.inflight == 0, timeout=seconds)

    def received(self, signal, accepted_only=True):
        """What went through for signal ("traces", "logs" or "metrics") as one OTLP JSON data dict
        ({"resourceSpans"|"resourceLogs"|"resourceMetrics": [...]} of every request in order,
        only those the receiver answered 2xx unless accepted_only is false): protobuf bodies
        decoded by otlp_pb (value types kept, unlike the dashboard's API), JSON bodies parsed."""
        top = {"traces": "resourceSpans", "logs": "resourceLogs", "metrics": "resourceMetrics"}[signal]
        self.settle()
        with self.lock:
            bodies = [b for b in self.bodies if b[0].endswith("/v1/" + signal)]
        out = {top: []}
        for path, ctype, body, st, _ in bodies:
            if accepted_only and not 200 <= st < 300:
                continue
            d = json.loads(body) if "json" in ctype else otlp_pb.decode(path, body)
            out[top].extend(d.get(top, []))
        return out

    def partial_successes(self):
        """The receiver's 2xx answers that reported a partial success: [(path, rejected count,
        error message)] (protobuf answers decoded by otlp_pb, JSON ones parsed)."""
        with self.lock:
            answers = list(self.answers)
        out = []
        for path, ctype, data in answers:
            try:
                d = json.loads(data) if "json" in ctype else otlp_pb.decode_response(path, data)
            except (ValueError, KeyError):
                continue
            ps = d.get("partialSuccess") or {}
            n = next((int(v) for k, v in ps.items() if k.startswith("rejected")), 0)
            if n or ps.get("errorMessage"):
                out.append((path, n, ps.get("errorMessage", "")))
        return out

    def span_latencies(self, trace_ids=None):
        """For each span that went through (accepted), of trace_ids when given: the time from its
        end (end_ns, the app's clock) to the arrival of the request carrying it at the proxy
        (this machine's clock, the same one), in milliseconds. For the benchmark's p50/p99 from an
        Activity's end to the receiver."""
        self.settle()
        with self.lock:
            bodies = [b for b in self.bodies if b[0].endswith("/v1/traces") and 200 <= b[3] < 300]
        out = []
        for path, ctype, body, _, arrived in bodies:
            d = json.loads(body) if "json" in ctype else otlp_pb.decode(path, body)
            out += [(arrived - sp["end_ns"]) / 1e6 for sp in flat_spans(d)
                    if trace_ids is None or sp["trace_id"] in trace_ids]
        return out

    def seen(self, path_suffix=""):
        """The recorded requests whose path ends with path_suffix (once settled)."""
        self.settle()
        with self.lock:
            return [r for r in self.requests if r[0].endswith(path_suffix)]


__all__ = ["DASHBOARD_ATTRS", "DASHBOARD_DROPS_LOG_ATTRS", "FaultProxy", "OtelApp", "Receiver", "any_value", "attrs",
           "compare_logs", "compare_metrics", "compare_receivers", "compare_resources", "compare_spans", "flat_logs", "flat_spans",
           "log_tuple", "metric_points", "private_ca", "span_tuple"]
