#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Routes held against what dotnet-monitor's own functional tests assert (issue 32 items 5, 6, 7,
10, 11), with the real test app and the forms dotnet-monitor documents:

  - GET / answers 200 without a token, on the API URL and the metrics URL (its RootTests), while
    the other routes still want the token;
  - metrics on: /metrics answers Prometheus text without a token on the API URL too (its
    AuthenticationTests); metrics off by the command line, the environment, a settings file or a
    key-per-file folder (its four MetricsTests): /metrics on the API URL is a 400 problem whose
    detail is "Metrics was not enabled.", and the metrics URL is not bound;
  - /info lists its five capabilities under its names (call_stacks, ...) with metrics enabled as
    configured, and a runtimeVersion that parses as a version (its InfoTests);
  - the short ProcessFilterDescriptor forms ({"ProcessName": "x"}, {"ProcessId": "n"},
    {"ManagedEntryPointAssemblyName": "x"}, {"CommandLine": "x", "MatchType": "Contains"}) select
    the default process and a collection rule's processes, and each one is applied (a value that
    does not match leaves no default process, a rule that does not match is not applied);
  - /logs with None as the default level, as the query's level or the body's logLevel, is a 400
    problem before anything streams (its LogsTests), while a real level streams; a collection
    rule's CollectLogs with DefaultLevel None fails with that reason.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from dmtest import App, check, close_log, fetch, free_port, start_dotmon, stop, verdict, wait_log  # noqa: E402

DM_NO_PROCESS = "Unable to discover a target process."
METRICS_OFF = "Metrics was not enabled."
CAPABILITIES = ["exceptions", "parameters", "call_stacks", "metrics", "http_egress"]


def problem(st, hdrs, body):
    """The problem's JSON when the answer is an application/problem+json, else None."""
    if not hdrs.get("Content-Type", "").startswith("application/problem+json"):
        return None
    try:
        return json.loads(body)
    except ValueError:
        return None


def get(port, path, token=None, **kw):
    return fetch(f"http://127.0.0.1:{port}{path}", token=token, **kw)


def check_info(port, token, metrics_on, label):
    st, _, body = get(port, "/info", token)
    info = json.loads(body) if st == 200 else {}
    caps = {c.get("name"): c.get("enabled") for c in info.get("capabilities", [])}
    check(st == 200 and list(caps) == CAPABILITIES and caps["metrics"] is metrics_on and
          caps["http_egress"] is True and caps["call_stacks"] is True and
          not (caps["exceptions"] or caps["parameters"]),
          f"{label}: /info lists {CAPABILITIES}, metrics {metrics_on} ({st} {caps})")
    check(re.fullmatch(r"\d+\.\d+(\.\d+){0,2}", str(info.get("runtimeVersion"))) is not None,
          f"{label}: /info runtimeVersion parses as a version ({info.get('runtimeVersion')!r})")


def main():
    tmp = tempfile.mkdtemp(prefix="dmroutes")
    os.chmod(tmp, 0o700)
    app = dm = log = None
    key = json.loads(subprocess.run([os.environ["DOTMON_BIN"], "generatekey", "--output", "machinejson"],
                                    capture_output=True, text=True, check=True).stdout)
    token = key["AuthorizationHeader"].split(" ", 1)[1]

    def finish():
        """Stops the running dotmon, if any, and closes its log."""
        nonlocal dm, log
        stop(dm)
        close_log(log)
        dm = log = None

    try:
        app = App(tmp)
        pid = app.pid

        def start(name, settings, metrics_port, args=(), env=None):
            """dotmon with settings (a settings file, or None), the key, and metrics_port (None:
            --metrics false); its log in tmp/<name>.log."""
            nonlocal dm, log
            extra = list(args)
            if settings is not None:
                path = os.path.join(tmp, f"{name}.json")
                with open(path, "w") as f:
                    json.dump(settings, f)
                extra += ["--configuration-file-path", path]
            log = open(os.path.join(tmp, f"{name}.log"), "w+")
            dm = start_dotmon(tmp, port, log, [pid], args=extra, key=key, env=env, metrics_port=metrics_port)

        port, mport = free_port(), free_port()
        rule = {"Trigger": {"Type": "Startup"},
                "Actions": [{"Type": "GetEnvironmentVariable", "Settings": {"Name": "HOME"}}]}
        short = {"ProcessName": {"ProcessName": "TestApp"},
                 "ProcessId": {"ProcessId": str(pid)},
                 "ManagedEntryPointAssemblyName": {"ManagedEntryPointAssemblyName": "TestApp"},
                 "CommandLine": {"CommandLine": "testapp", "MatchType": "Contains"}}
        wrong = {"ProcessName": {"ProcessName": "NoSuchApp"},
                 "ProcessId": {"ProcessId": "1"},
                 "ManagedEntryPointAssemblyName": {"ManagedEntryPointAssemblyName": "NoSuchApp"},
                 "CommandLine": {"CommandLine": "no-such-app", "MatchType": "Contains"}}
        rules = {f"Is{k}": dict(rule, Filters=[v]) for k, v in short.items()}
        rules.update({f"Not{k}": dict(rule, Filters=[v]) for k, v in wrong.items()})
        # A CollectLogs action with None as its default level fails when it runs.
        rules["LogsNone"] = {"Trigger": {"Type": "Startup"}, "Actions": [
            {"Type": "CollectLogs", "Settings": {"DefaultLevel": "None", "Egress": "out", "Duration": "00:00:01"}}]}
        os.mkdir(os.path.join(tmp, "out"), 0o700)
        start("on", {"DefaultProcess": {"Filters": list(short.values())}, "CollectionRules": rules,
                     "Egress": {"FileSystem": {"out": {"DirectoryPath": os.path.join(tmp, "out")}}}}, mport)

        # GET / (RootTests): 200 without a token on both URLs; other routes still want it.
        for which, p in (("API URL", port), ("metrics URL", mport)):
            st, hdrs, body = get(p, "/")
            doc = json.loads(body) if st == 200 else {}
            check(st == 200 and hdrs.get("Content-Type", "").startswith("application/json") and
                  "openapi" in doc and "/metrics" in doc.get("paths", {}),
                  f"GET / on the {which}: 200, an OpenAPI document, no token ({st})")
            st, _, _ = get(p, "/", method="HEAD")
            check(st == 200, f"HEAD / on the {which}: 200 ({st})")
        check(sorted(doc.get("paths", {})) == ["/", "/metrics"],
              f"GET / on the metrics URL lists only what that URL serves ({sorted(doc.get('paths', {}))})")
        st, _, body = get(port, "/")
        paths = json.loads(body).get("paths", {})
        check("/processes" in paths and "security" in paths["/processes"]["get"] and
              "security" not in paths["/metrics"]["get"],
              "GET / on the API URL lists /processes (with the bearer token) and /metrics (without)")
        check(get(port, "/processes")[0] == 401, "GET /processes without the token: 401")
        check(get(mport, "/processes", token)[0] == 404, "GET /processes on the metrics URL: 404")

        # Metrics on (AuthenticationTests): /metrics without a token on the API URL too.
        for which, p in (("API URL", port), ("metrics URL", mport)):
            st, hdrs, body = get(p, "/metrics")
            check(st == 200 and hdrs.get("Content-Type", "").startswith("text/plain; version=0.0.4") and
                  b"# TYPE " in body, f"metrics on: GET /metrics on the {which} without a token: 200 text ({st})")
        st, _, body = get(port, "/metrics/dotmon", token)
        check(st == 200 and b"dotmon_runtime_sessions " in body, f"GET /metrics/dotmon: dotmon's own families ({st})")
        check(get(port, "/metrics/dotmon")[0] == 401, "GET /metrics/dotmon without the token: 401")
        check_info(port, token, True, "metrics on")

        # dotnet-monitor's answer for an in-process feature that is off (its FeatureNotEnabled):
        # 400, its detail word for word; dotmon says why in "reason". Without the token: 401.
        # (POST /exceptions with the history off is dotnet-monitor's 404: below.)
        for method, path, detail in (("POST", "/parameters", "The 'Parameter Capturing' feature is not enabled."),
                                     ("GET", "/exceptions", "The 'Exceptions' feature is not enabled.")):
            st, h, body = fetch(f"http://127.0.0.1:{port}{path}?pid={pid}", method=method, token=token,
                                data=b"{}" if method == "POST" else None,
                                headers={"Content-Type": "application/json"} if method == "POST" else None)
            doc = json.loads(body) if body.startswith(b"{") else {}
            check(st == 400 and h.get("Content-Type", "").startswith("application/problem+json") and
                  doc.get("detail") == detail and doc.get("reason"),
                  f"{method} {path}: 400 '{detail}' with a reason ({st} {body[:160]!r})")
            st = fetch(f"http://127.0.0.1:{port}{path}?pid={pid}", method=method,
                       data=b"{}" if method == "POST" else None)[0]
            check(st == 401, f"{method} {path} without the token: 401 ({st})")
        st, h, body = fetch(f"http://127.0.0.1:{port}/exceptions?pid={pid}", method="POST", token=token, data=b"{}",
                            headers={"Content-Type": "application/json"})
        check(st == 404 and h.get("Content-Type", "").startswith("application/problem+json") and
              b"InProcessFeatures:Exceptions:Enabled" in body,
              f"POST /exceptions with the history off: dotnet-monitor's 404, a problem naming the setting ({st})")

        # The short filter forms: all four together select the app as the default process.
        st, _, body = get(port, "/process", token)
        check(st == 200 and json.loads(body).get("pid") == pid,
              f"DefaultProcess with the four short forms selects the app ({st} {body[:120]!r})")
        st, _, body = get(port, "/collectionrules", token)
        applied = sorted(json.loads(body)) if st == 200 else []
        check(applied == sorted([f"Is{k}" for k in short] + ["LogsNone"]),
              f"the rules whose short-form filter matches are applied, the others not ({st} {applied})")
        check(wait_log(log, r"LogsNone.*LogLevel None is not supported as the default log level", 30) is not None,
              "a rule's CollectLogs with DefaultLevel None fails with that reason")

        # Log level None (LogsTests): 400 before anything streams; a real level streams.
        for form, method, path, data in (
                ("query", "GET", "/logs?level=None&durationSeconds=1", None),
                ("body", "POST", "/logs?durationSeconds=1", b'{"logLevel":"None"}')):
            st, hdrs, body = get(port, path, token, method=method, data=data,
                                 headers={"Content-Type": "application/json", "Accept": "application/x-ndjson"})
            p = problem(st, hdrs, body) or {}
            check(st == 400 and p.get("status") == 400 and "None" in p.get("detail", ""),
                  f"/logs with None as the {form}'s level: 400 problem ({st} {p.get('detail')!r})")
        st, hdrs, _ = get(port, "/logs?level=Warning&durationSeconds=1", token, headers={"Accept": "application/x-ndjson"})
        check(st == 200 and hdrs.get("Content-Type", "").startswith("application/x-ndjson"),
              f"/logs?level=Warning streams ({st})")
        st, hdrs, _ = get(port, "/logs?durationSeconds=1", token, method="POST", data=b'{"filterSpecs":{"Microsoft":"None"}}',
                          headers={"Content-Type": "application/json", "Accept": "application/x-ndjson"})
        check(st == 200, f"None as a filterSpecs level is still accepted ({st})")
        finish()

        # Metrics off, each of dotnet-monitor's four ways, each with one short form that does not
        # match (so no default process: that form is applied).
        shared = os.path.join(tmp, "kpf")
        os.mkdir(shared, 0o700)
        with open(os.path.join(shared, "Metrics__Enabled"), "w") as f:
            f.write("false\n")
        ways = [("command line", None, None, {}),
                ("environment", mport, None, {"DotnetMonitor_Metrics__Enabled": "false"}),
                ("settings file", mport, {"Metrics": {"Enabled": False}}, {}),
                ("key-per-file", mport, None, {"DOTMON_SHARED_CONFIG_DIR": shared})]
        for (way, mp, settings, env), (form, filt) in zip(ways, wrong.items()):
            settings = dict(settings or {}, DefaultProcess={"Filters": [filt]})
            start(way.replace(" ", "-"), settings, mp, env=env)
            st, hdrs, body = get(port, "/metrics", token)
            p = problem(st, hdrs, body) or {}
            check(st == 400 and p.get("status") == 400 and p.get("detail") == METRICS_OFF,
                  f"metrics off ({way}): /metrics on the API URL is dotnet-monitor's 400 ({st} {p.get('detail')!r})")
            check(get(mport, "/metrics")[0] == 0, f"metrics off ({way}): the metrics URL is not bound")
            check_info(port, token, False, f"metrics off ({way})")
            st, hdrs, body = get(port, "/process", token)
            p = problem(st, hdrs, body) or {}
            check(st == 400 and p.get("detail") == DM_NO_PROCESS,
                  f"DefaultProcess {json.dumps(filt)} ({form}) does not match the app: no default process ({st})")
            finish()
    finally:
        finish()  # dotmon first: the app's kill is then no runtime leaving under a live dotmon
        if app is not None:
            app.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    return verdict("routes held against dotnet-monitor's tests")


if __name__ == "__main__":
    sys.exit(main())
