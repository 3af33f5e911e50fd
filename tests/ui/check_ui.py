#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""GET /ui end to end (issue 20, item 4): the page in headless Chromium against the real test app.

dotmon runs with an API key (`dotmon generatekey --output machinejson`, configured through
DotnetMonitor_Authentication__MonitorApiKey__*) and a 1 s counter interval; the test app runs
`hot-threads 1` (~70% of its command thread in TestApp.Hot.SpinHotLoop, one more thread in
TestApp.Deep from a lambda, for the thread select and the frame names). Over HTTP: /ui and its files
answer without a token, with the strict Content-Security-Policy, nosniff, no-referrer and
no-store; an unknown /ui file is a 404 problem; the data routes the page uses answer 401 without
the token. Then ui_page.js drives Chromium (see its header: process list, flame graph whose top
frame is SpinHotLoop, its zoom, breadcrumb, search and thread select, demangled names, the
charts' axes and units, downloads, the token in no storage and no URL, the app's command line
holding an <img onerror> shown as text). Last, the
same page against a dotmon started with --no-auth works without a token.

Environment: DOTMON_BIN, DOTMON_TESTAPP_DIR, DOTNET_EXE, UI_NODE_MODULES (the npm packages of
package-lock.json), NODE_EXE, CHROMIUM_EXE; UI_SCREENSHOT (optional: a PNG of the page);
UI_SCREENSHOT_DIR (optional, set by ctest to the build tree's ui-screenshots: ui_page.js saves
ui-flame.png, ui-flame-zoom.png and ui-metrics.png there; `make ui-screenshots` copies them to
docs/img).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from dmtest import FAILS, App, check, close_log, free_port, http_request, start_dotmon, stop  # noqa: E402
from uitest import run_node, status  # noqa: E402

# Would run script if the page inserted the command line as HTML (and the CSP let it).
MARKUP = "<img src=x onerror=\"document.title='pwned'\">"
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


def main():
    tmp = tempfile.mkdtemp(prefix="dotmon-ui-")
    os.chmod(tmp, 0o700)
    app = dm = dm2 = log = None
    try:
        key = json.loads(subprocess.run([os.environ["DOTMON_BIN"], "generatekey", "--output", "machinejson"],
                                        check=True, capture_output=True, text=True).stdout)
        token = key["AuthorizationHeader"].split(" ", 1)[1]
        app = App(tmp, "--env-echo", MARKUP)  # markup in its command line, shown as text
        # hot on the command thread through the profile, and a thread recursing from a lambda
        app.p.stdin.write("hot-threads 1 120000\n")
        app.p.stdin.flush()
        log = open(os.path.join(tmp, "dotmon.log"), "w+")
        port = free_port()
        dm = start_dotmon(tmp, port, log, [app.pid], key=key, env={"DotnetMonitor_GlobalCounter__IntervalSeconds": "1"})

        r, body = http_request(port, "/ui", timeout=30)
        st = r.status
        check(st == 200 and r.getheader("Content-Type", "").startswith("text/html"),
              f"GET /ui without a token: {st} {r.getheader('Content-Type')}, {len(body)} bytes")
        check(r.getheader("Content-Security-Policy") == CSP, f"Content-Security-Policy: {r.getheader('Content-Security-Policy')}")
        check(r.getheader("X-Content-Type-Options") == "nosniff" and r.getheader("Referrer-Policy") == "no-referrer"
              and r.getheader("Cache-Control") == "no-store", "nosniff, no-referrer, no-store")
        check(b"<script>" not in body and b" style=" not in body and b"http" not in body.replace(b"http-equiv", b""),
              "no inline script or style, nothing from another origin")
        sizes = {}
        for f, ct in (("app.js", "text/javascript"), ("names.js", "text/javascript"), ("app.css", "text/css")):
            r, b = http_request(port, "/ui/" + f, timeout=30)
            st = r.status
            sizes[f] = len(b)
            check(st == 200 and r.getheader("Content-Type", "").startswith(ct) and
                  r.getheader("Content-Security-Policy") == CSP, f"GET /ui/{f}: {st} {r.getheader('Content-Type')}")
        print(f"info embedded page: index.html {len(body)} + app.js {sizes['app.js']} + names.js {sizes['names.js']} + "
              f"app.css {sizes['app.css']} = {len(body) + sum(sizes.values())} bytes", flush=True)
        r, b = http_request(port, "/ui/secret.txt", timeout=30)
        st = r.status
        check(st == 404 and r.getheader("Content-Type", "").startswith("application/problem+json"),
              f"GET /ui/secret.txt: {st}")
        for path in ("/processes", f"/profile?pid={app.pid}&kind=cpu&durationSeconds=1&format=flame",
                     f"/livemetrics?pid={app.pid}", f"/gcdump?pid={app.pid}"):
            st = http_request(port, path, timeout=30)[0].status
            check(st == 401, f"GET {path} without the token: {st}")
        if os.environ.get("UI_SCREENSHOT_DIR"):
            os.makedirs(os.environ["UI_SCREENSHOT_DIR"], exist_ok=True)
        run_node("ui_page.js", "with a token", DOTMON_URL=f"http://127.0.0.1:{port}", DOTMON_TOKEN=token,
                 APP_PID=str(app.pid), APP_MARKUP=MARKUP)

        # The same page when auth is off: no token needed.
        log2 = open(os.path.join(tmp, "dotmon-noauth.log"), "w+")
        port2 = free_port()
        dm2 = start_dotmon(tmp, port2, log2, [app.pid])
        run_node("ui_page.js", "no auth", DOTMON_URL=f"http://127.0.0.1:{port2}", DOTMON_TOKEN="",
                 APP_PID=str(app.pid))
        log2.close()
    finally:
        if app is not None:
            app.kill()
        stop(dm)
        stop(dm2)
        close_log(log)
        shutil.rmtree(tmp, ignore_errors=True)
    return status()


if __name__ == "__main__":
    sys.exit(main())
