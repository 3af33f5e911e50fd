#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""
API parity with dotnet-monitor: the real dotmon (with a temporary API key) and the real .NET test
app; every implemented route is called, good and bad, and each answer is checked against
dotnet-monitor's OpenAPI document (tests/fixtures/openapi, a copy of its documentation/openapi.json):
the status code is one the document lists for that path and method, a 2xx body has a content type
the document lists, and a JSON body (or problem+json) validates against the document's schema,
including "additionalProperties": false (no field the schema does not have).

Routes dotmon does not implement yet are called too and must answer 404 problem+json (never a 2xx
that a script could mistake for the real thing); they are listed at the end.

Environment: DOTMON_BIN, DOTMON_TESTAPP_DIR, DOTNET_EXE (or DOTNET_ROOT), DOTMON_OPENAPI.
Exit 0 when every check passed, 1 otherwise; prints one line per check.
"""

import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from dmtest import dotnet_root, settle, wait_for  # noqa: E402

SPEC = None
FAILURES = []
CHECKS = 0


# ---- a small OpenAPI 3.0 schema validator (the subset the document uses) ------------------------

def resolve(schema):
    while "$ref" in schema:
        name = schema["$ref"].split("/")[-1]
        schema = SPEC["components"]["schemas"][name]
    return schema


def validate(value, schema, path="$"):
    """Returns a list of error strings."""
    schema = resolve(schema)
    if value is None:
        return [] if schema.get("nullable") or schema == {} else [f"{path}: null not allowed"]
    errors = []
    if "oneOf" in schema:
        matches = [s for s in schema["oneOf"] if not validate(value, s, path)]
        if len(matches) != 1:
            errors.append(f"{path}: matches {len(matches)} of oneOf")
        return errors
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: {value!r} not in {schema['enum']}")
    t = schema.get("type")
    if t == "object":
        if not isinstance(value, dict):
            return [f"{path}: not an object"]
        props = schema.get("properties", {})
        for req in schema.get("required", []):
            if req not in value:
                errors.append(f"{path}: required '{req}' missing")
        extra = schema.get("additionalProperties", True)
        for k, v in value.items():
            if k in props:
                errors += validate(v, props[k], f"{path}.{k}")
            elif extra is False:
                errors.append(f"{path}: '{k}' is not in the schema (additionalProperties: false)")
            elif isinstance(extra, dict) and extra:
                errors += validate(v, extra, f"{path}.{k}")
    elif t == "array":
        if not isinstance(value, list):
            return [f"{path}: not an array"]
        for i, v in enumerate(value):
            errors += validate(v, schema.get("items", {}), f"{path}[{i}]")
        if schema.get("uniqueItems") and len(set(map(json.dumps, value))) != len(value):
            errors.append(f"{path}: items not unique")
    elif t == "string":
        if not isinstance(value, str):
            return [f"{path}: not a string"]
        if len(value) < schema.get("minLength", 0):
            errors.append(f"{path}: shorter than minLength")
        fmt = schema.get("format")
        if fmt == "uuid":
            try:
                uuid.UUID(value)
            except ValueError:
                errors.append(f"{path}: {value!r} is not a uuid")
        if fmt == "date-time" and not re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$", value):
            errors.append(f"{path}: {value!r} is not a date-time")
    elif t == "integer":
        if not isinstance(value, int) or isinstance(value, bool):
            errors.append(f"{path}: not an integer")
        elif schema.get("format") == "int32" and not -2**31 <= value < 2**31:
            errors.append(f"{path}: out of int32 range")
    elif t == "boolean":
        if not isinstance(value, bool):
            errors.append(f"{path}: not a boolean")
    return errors


# Answers dotnet-monitor gives that its document does not list: an unknown or finished operation
# is a 400 problem (its EgressOperationStore throws, the controller maps that to 400).
UNDOCUMENTED = {("/operations/{operationId}", "get", "400"), ("/operations/{operationId}", "delete", "400")}


def response_spec(path, method, status):
    op = SPEC["paths"][path][method.lower()]
    r = op["responses"].get(str(status))
    if r is None and (path, method.lower(), str(status)) in UNDOCUMENTED:
        r = {"$ref": "#/components/responses/BadRequestResponse"}
    if r is None:
        return None, sorted(op["responses"].keys())
    if "$ref" in r:
        r = SPEC["components"]["responses"][r["$ref"].split("/")[-1]]
    return r, sorted(op["responses"].keys())


# ---- HTTP --------------------------------------------------------------------------------------

class Dotmon:
    def __init__(self, port, token):
        self.port = port
        self.token = token

    def request(self, method, target, body=None, headers=None, auth=True, read=True):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        h = dict(headers or {})
        if auth and self.token:
            h["Authorization"] = "Bearer " + self.token
        c.request(method, target, body=body, headers=h)
        r = c.getresponse()
        data = r.read() if read else b""
        hdrs = {k.lower(): v for k, v in r.getheaders()}
        c.close()
        return r.status, hdrs, data


def check(label, ok, why=""):
    global CHECKS
    CHECKS += 1
    print(f"{'ok  ' if ok else 'FAIL'} {label}{'' if ok else ': ' + why}", flush=True)
    if not ok:
        FAILURES.append(f"{label}: {why}")


def conforms(label, spec_path, method, status, hdrs, body, expect_status=None):
    """Checks one answer against the document; returns the parsed JSON body (or None)."""
    label = f"{method} {label} -> {status}"
    if expect_status is not None and status != expect_status:
        check(label, False, f"expected {expect_status}; body {body[:300]!r}")
        return None
    r, listed = response_spec(spec_path, method, status)
    if r is None:
        check(label, False, f"status {status} is not one dotnet-monitor's document lists ({listed})")
        return None
    ctype = hdrs.get("content-type", "").split(";")[0].strip()
    content = r.get("content")
    parsed = None
    if content:
        types = {t.split(";")[0].strip(): v for t, v in content.items()}
        if ctype not in types:
            check(label, False, f"content type {ctype!r} not in {list(types)}")
            return None
        schema = types[ctype].get("schema")
        if ctype.endswith("json") and schema is not None:
            try:
                parsed = json.loads(body)
            except ValueError as e:
                check(label, False, f"body is not JSON: {e}")
                return None
            errs = validate(parsed, schema)
            if errs:
                check(label, False, "; ".join(errs[:5]))
                return None
    elif 200 <= status < 300 and body:
        pass  # documented without a body (202, DELETE's 200): dotmon may say more
    if status == 401:
        if "www-authenticate" not in hdrs:
            check(label, False, "401 without WWW-Authenticate")
            return None
    check(label, True)
    return parsed


# ---- the run -----------------------------------------------------------------------------------

def start_app(tmp):
    env = dict(os.environ, TMPDIR=tmp, DOTNET_ROOT=dotnet_root())
    app = subprocess.Popen([os.path.join(os.environ["DOTMON_TESTAPP_DIR"], "TestApp"), "--no-stdin-exit"],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
    deadline = time.time() + 60
    while time.time() < deadline:
        line = app.stdout.readline()
        m = re.match(r"ready pid=(\d+)", line)
        if m:
            return app, int(m.group(1))
        if not line:
            break
    raise RuntimeError("the test app did not get ready")


def start_dotmon(tmp):
    env = dict(os.environ, TMPDIR=tmp)
    log = open(os.path.join(tmp, "dotmon.log"), "w+")
    out = open(os.path.join(tmp, "dotmon.out"), "w+")
    dm = subprocess.Popen([os.environ["DOTMON_BIN"], "collect", "--temp-apikey", "--urls", "http://127.0.0.1:0",
                           "--metrics", "false"], stdout=out, stderr=log, env=env)
    deadline = time.time() + 30
    port = token = None
    while time.time() < deadline and (port is None or token is None):
        time.sleep(0.05)
        log.seek(0)
        m = re.search(r"Now listening on: http://127\.0\.0\.1:(\d+)", log.read())
        port = int(m.group(1)) if m else None
        out.seek(0)
        m = re.search(r"Authorization: Bearer (\S+)", out.read())
        token = m.group(1) if m else None
    if port is None or token is None:
        raise RuntimeError("dotmon did not start")
    return dm, Dotmon(port, token)


def main():
    global SPEC
    SPEC = json.load(open(os.environ["DOTMON_OPENAPI"]))
    tmp = tempfile.mkdtemp(prefix="dmparity")
    os.chmod(tmp, 0o700)
    app = dm = None
    try:
        app, pid = start_app(tmp)
        dm, d = start_dotmon(tmp)
        def listed():
            st, _, body = d.request("GET", "/processes")
            return st == 200 and any(p.get("pid") == pid for p in json.loads(body))

        wait_for(listed, 20)

        # Processes.
        st, h, b = d.request("GET", "/processes")
        procs = conforms("/processes", "/processes", "GET", st, h, b, 200)
        uid = next(p["uid"] for p in procs if p["pid"] == pid)
        for q in ["", f"?pid={pid}", f"?uid={uid}", "?name=TestApp"]:
            st, h, b = d.request("GET", "/process" + q)
            p = conforms("/process" + q, "/process", "GET", st, h, b, 200)
            check(f"/process{q} is the app", p is not None and p["pid"] == pid and p["uid"] == uid)
        for q in ["?pid=999999", f"?uid={uuid.uuid4()}", "?pid=abc", f"?pid={pid}&uid={uuid.uuid4()}"]:
            for route in ["/process", "/env", "/dump", "/gcdump", "/trace"]:
                st, h, b = d.request("GET", route + q)
                conforms(route + q, route, "GET", st, h, b, 400)
        st, h, b = d.request("GET", "/processes", auth=False)
        conforms("/processes (no token)", "/processes", "GET", st, h, b, 401)
        st, h, b = d.request("GET", f"/env?pid={pid}")
        envj = conforms("/env", "/env", "GET", st, h, b, 200)
        check("/env is a string map", isinstance(envj, dict) and all(isinstance(v, str) for v in envj.values()))
        st, h, b = d.request("GET", "/info")
        conforms("/info", "/info", "GET", st, h, b, 200)

        # A trace: 200 octet-stream with a Location; its operation is 201 once Succeeded.
        st, h, b = d.request("GET", f"/trace?pid={pid}&profile=Metrics&durationSeconds=1")
        conforms("/trace (1 s)", "/trace", "GET", st, h, b, 200)
        check("/trace body is a nettrace", b[:8] == b"Nettrace",
              repr(b[:16]))
        check("/trace has Content-Disposition", "attachment" in h.get("content-disposition", ""))
        m = re.search(r'filename="?(\d{8}_\d{6}_\d{3})_' + str(pid) + r'\.nettrace', h.get("content-disposition", ""))
        check("/trace file name is yyyyMMdd_HHmmss_fff_pid.nettrace", m is not None, h.get("content-disposition", ""))
        loc = h.get("location", "")
        op_path = loc[loc.find("/operations/"):] if "/operations/" in loc else ""
        check("/trace has a Location /operations/{id}", bool(op_path), loc)
        st, h, b = d.request("GET", op_path)
        o = conforms("/operations/{id} (Succeeded)", "/operations/{operationId}", "GET", st, h, b, 201)
        check("Succeeded operation: error is null", o is not None and o.get("error", 1) is None, repr(o))
        st, h, b = d.request("GET", op_path + "/details")
        det = json.loads(b) if st == 200 else {}
        check("/operations/{id}/details has the trace verdict", det.get("trace", {}).get("verdict") == "complete", repr(det)[:300])
        body = json.dumps({"Providers": [{"Name": "Microsoft-Windows-DotNETRuntime", "EventLevel": "Informational",
                                          "Keywords": "0x1"}], "RequestRundown": False, "BufferSizeInMB": 16})
        st, h, b = d.request("POST", f"/trace?pid={pid}&durationSeconds=1", body=body,
                             headers={"Content-Type": "application/json"})
        conforms("POST /trace", "/trace", "POST", st, h, b, 200)
        st, h, b = d.request("POST", f"/trace?pid={pid}&durationSeconds=1", body="{",
                             headers={"Content-Type": "application/json"})
        conforms("POST /trace (bad body)", "/trace", "POST", st, h, b, 400)
        st, h, b = d.request("GET", f"/trace?pid={pid}&profile=NoSuchProfile")
        conforms("/trace?profile=NoSuchProfile", "/trace", "GET", st, h, b, 400)

        # A running trace: stop=true is 202, cancelling another is 200.
        results = {}

        def run(key, target):
            try:
                results[key] = d.request("GET", target)
            except (http.client.HTTPException, OSError) as e:
                results[key] = e  # the cancelled one: its transfer is cut
        # Each trace tagged with its role: which request the runtime starts first is not fixed.
        threads = [threading.Thread(target=run, args=(k, f"/trace?pid={pid}&profile=Metrics&durationSeconds=-1&tags={k}"))
                   for k in ("stop", "cancel")]
        for t in threads:
            t.start()
        def running_ops():
            ids = []
            for k in ("stop", "cancel"):
                st, h, b = d.request("GET", f"/operations?tags={k}")
                ops = json.loads(b) if st == 200 else []
                ids += [o["operationId"] for o in ops if o["status"] == "Running"][:1]
            return ids

        running = settle(running_ops, lambda ids: len(ids) >= 2, 20, 0.2)
        st, h, b = d.request("GET", "/operations")
        conforms("/operations", "/operations", "GET", st, h, b, 200)
        st, h, b = d.request("GET", f"/operations?pid={pid}&tags=none")
        lst = conforms("/operations?pid&tags", "/operations", "GET", st, h, b, 200)
        check("/operations?tags=none lists nothing", lst == [], repr(lst))
        check("two traces running", len(running) == 2, repr(running))
        if len(running) == 2:
            st, h, b = d.request("GET", f"/operations/{running[0]}")
            conforms("/operations/{id} (Running)", "/operations/{operationId}", "GET", st, h, b, 200)
            st, h, b = d.request("DELETE", f"/operations/{running[0]}?stop=true")
            conforms("/operations/{id}?stop=true", "/operations/{operationId}", "DELETE", st, h, b, 202)
            st, h, b = d.request("DELETE", f"/operations/{running[1]}")
            conforms("/operations/{id} (cancel)", "/operations/{operationId}", "DELETE", st, h, b, 200)
        for t in threads:
            t.join(60)
        check("stopped trace: a whole file", isinstance(results.get("stop"), tuple) and results["stop"][0] == 200
              and results["stop"][2][:8] == b"Nettrace", repr(results.get("stop"))[:200])
        check("cancelled trace: a cut transfer", isinstance(results.get("cancel"), Exception),
              repr(results.get("cancel"))[:200])
        time.sleep(0.5)
        if len(running) == 2:
            st, h, b = d.request("DELETE", f"/operations/{running[1]}")
            conforms("/operations/{id} (cancel a finished one)", "/operations/{operationId}", "DELETE", st, h, b, 400)
            st, h, b = d.request("GET", f"/operations/{running[1]}")
            o = conforms("/operations/{id} (Cancelled)", "/operations/{operationId}", "GET", st, h, b, 200)
            check("cancelled operation says Cancelled", o is not None and o["status"] == "Cancelled", repr(o))
        unknown = str(uuid.uuid4())
        st, h, b = d.request("GET", f"/operations/{unknown}")
        p = conforms("/operations/{unknown}", "/operations/{operationId}", "GET", st, h, b, 400)
        check("unknown operation: dotnet-monitor's message",
              p is not None and p.get("detail") == "Operation not found.", repr(p))
        st, h, b = d.request("DELETE", f"/operations/{unknown}")
        conforms("DELETE /operations/{unknown}", "/operations/{operationId}", "DELETE", st, h, b, 400)

        # A dump.
        st, h, b = d.request("GET", f"/dump?pid={pid}&type=Mini")
        conforms("/dump?type=Mini", "/dump", "GET", st, h, b, 200)
        check("/dump is an ELF core", b[:4] == b"\x7fELF", repr(b[:8]))
        m = re.search(r'filename="?core_\d{8}_\d{6}_\d{3}"?$', h.get("content-disposition", ""))
        check("/dump file name is core_yyyyMMdd_HHmmss_fff", m is not None, h.get("content-disposition", ""))
        st, h, b = d.request("GET", f"/dump?pid={pid}&type=Huge")
        conforms("/dump?type=Huge", "/dump", "GET", st, h, b, 400)

        # A GC heap snapshot (FastSerialization's signature opens the file).
        st, h, b = d.request("GET", f"/gcdump?pid={pid}")
        conforms("/gcdump", "/gcdump", "GET", st, h, b, 200)
        check("/gcdump is a FastSerialization file", b"!FastSerialization.1" in b[:64], repr(b[:32]))
        m = re.search(rf'filename="?\d{{8}}_\d{{6}}_\d{{3}}_{pid}\.gcdump"?$', h.get("content-disposition", ""))
        check("/gcdump file name is yyyyMMdd_HHmmss_fff_<pid>.gcdump", m is not None, h.get("content-disposition", ""))

        # Metrics off (--metrics false): /metrics on the API port is its documented 400 problem, no
        # auth needed (tests/api/check_routes_dm.py has the 200 with metrics on).
        st, h, b = d.request("GET", "/metrics", auth=False)
        conforms("/metrics", "/metrics", "GET", st, h, b, 400)

        # Live metrics: json-seq records for durationSeconds; bad input is a 400 problem.
        st, h, b = d.request("GET", f"/livemetrics?pid={pid}&durationSeconds=7")   # counters every 5 s
        conforms("/livemetrics", "/livemetrics", "GET", st, h, b, 200)
        recs = [json.loads(r) for r in b.decode().split("\x1e") if r.strip()] if st == 200 else []
        check("/livemetrics records have dotnet-monitor's fields",
              bool(recs) and all(list(r) == ["timestamp", "provider", "name", "displayName", "unit", "counterType",
                                             "tags", "value", "meterTags", "instrumentTags"] for r in recs),
              str(recs[:1]))
        st, h, b = d.request("POST", f"/livemetrics?pid={pid}&durationSeconds=7",
                             body='{"includeDefaultProviders":false,"providers":[{"providerName":"System.Runtime",'
                                  '"counterNames":["cpu-usage"]}]}', headers={"Content-Type": "application/json"})
        conforms("POST /livemetrics", "/livemetrics", "POST", st, h, b, 200)
        recs = [json.loads(r) for r in b.decode().split("\x1e") if r.strip()] if st == 200 else []
        check("POST /livemetrics gives only the counter asked for",
              bool(recs) and all(r["name"] == "cpu-usage" for r in recs), str([r["name"] for r in recs][:5]))
        for q, body in [("durationSeconds=-2", None), ("durationSeconds=x", None),
                        ("durationSeconds=1", '{"providers":[{"counterNames":["x"]}]}'),
                        ("durationSeconds=1", '{"includeDefaultProviders":"yes"}'),
                        ("durationSeconds=1", '{"meters":[{"meterName":"*"}]}'),
                        ("durationSeconds=1", '{"providers":[{"providerName":"A,B"}]}'),
                        ("durationSeconds=1", "[1]")]:
            method = "POST" if body is not None else "GET"
            st, h, b = d.request(method, f"/livemetrics?pid={pid}&{q}", body=body,
                                 headers={"Content-Type": "application/json"} if body else None)
            conforms(f"{method} /livemetrics?{q} {body or ''}", "/livemetrics", method, st, h, b, 400)

        # Logs: a stream in the format Accept picks for durationSeconds; bad input is a 400 problem,
        # an Accept that matches no format a 406.
        st, h, b = d.request("GET", f"/logs?pid={pid}&durationSeconds=2",
                             headers={"Accept": "application/json-seq"})
        conforms("/logs (json-seq)", "/logs", "GET", st, h, b, 200)
        recs = [json.loads(r) for r in b.decode().split("\x1e") if r.strip()] if st == 200 else []
        check("/logs records have dotnet-monitor's fields",
              all(list(r)[:6] == ["Timestamp", "LogLevel", "EventId", "EventName", "Category", "Message"]
                  for r in recs), str(recs[:1]))
        st, h, b = d.request("GET", f"/logs?pid={pid}&durationSeconds=2&level=Warning",
                             headers={"Accept": "application/x-ndjson"})
        check("GET /logs (ndjson) -> 200 application/x-ndjson, one JSON object a line",
              st == 200 and h.get("content-type", "").startswith("application/x-ndjson") and
              all(isinstance(json.loads(x), dict) for x in b.decode().splitlines()), f"{st} {b[:200]!r}")
        st, h, b = d.request("POST", f"/logs?pid={pid}&durationSeconds=2",
                             body='{"logLevel":"Information","filterSpecs":{"TestApp":null},"useAppFilters":false}',
                             headers={"Content-Type": "application/json", "Accept": "text/plain"})
        conforms("/logs (text/plain)", "/logs", "POST", st, h, b, 200)
        for method, q, body in [("GET", "durationSeconds=-2", None), ("GET", "level=Loud", None),
                                ("POST", "durationSeconds=1", '{"logLevel":"Loud"}'),
                                ("POST", "durationSeconds=1", '{"logLevel":"Warning","useAppFilters":"yes"}'),
                                ("POST", "durationSeconds=1", '{"logLevel":"Warning","filterSpecs":{"A;B":null}}'),
                                ("POST", "durationSeconds=1", "[1]")]:
            st, h, b = d.request(method, f"/logs?pid={pid}&{q}", body=body,
                                 headers={"Content-Type": "application/json"} if body else None)
            conforms(f"/logs?{q} {body or ''}", "/logs", method, st, h, b, 400)
        st, h, b = d.request("GET", f"/logs?pid={pid}&durationSeconds=1", headers={"Accept": "application/xml"})
        check("GET /logs with Accept application/xml -> 406 problem",
              st == 406 and h.get("content-type", "").startswith("application/problem+json"), str(st))

        # Not implemented yet: a 404 problem, never a 2xx.
        missing = []
        for method, route in [("GET", "/stacks"), ("GET", "/exceptions"),
                              ("POST", "/exceptions"), ("POST", "/parameters"), ("GET", "/collectionrules"),
                              ("GET", "/collectionrules/x")]:
            st, h, b = d.request(method, f"{route}?pid={pid}", body="{}" if method == "POST" else None,
                                 headers={"Content-Type": "application/json"} if method == "POST" else None)
            if st == 404:
                missing.append(f"{method} {route}")
            check(f"{method} {route}: a 404 problem until implemented, or not a 404",
                  st != 404 or h.get("content-type", "").startswith("application/problem+json"), str(st))
        print("not implemented yet (404): " + ", ".join(missing))
    finally:
        for p in (dm, app):
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
        if FAILURES:
            try:
                print(open(os.path.join(tmp, "dotmon.log")).read()[-4000:])
            except OSError:
                pass
        shutil.rmtree(tmp, ignore_errors=True)
    passed = CHECKS - len(FAILURES)
    print(f"{passed} passed, {len(FAILURES)} failed")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
