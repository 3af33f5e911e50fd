#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""dotmon's speedscope output in speedscope's own viewer (issue 20: "loads in speedscope's own viewer
in headless Chromium without errors, showing the hot method").

A real cpu-sampling trace of the test app's `hot` command (GET /trace?profile=cpu-sampling, 3 s),
`dotmon convert --format speedscope`, then the viewer the npm package speedscope ships
(dist/release) and the file served on loopback by a plain HTTP server in a thread, opened as
index.html#profileURL=… by speedscope_viewer.js in headless Chromium (see its header).

Environment: DOTMON_BIN, DOTMON_TESTAPP_DIR, DOTNET_EXE, UI_NODE_MODULES, NODE_EXE, CHROMIUM_EXE;
SS_SCREENSHOT (optional: a PNG of the Sandwich view).
"""

import functools
import http.server
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from dmtest import Watched, check  # noqa: E402
from uitest import run_node, status  # noqa: E402


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def main():
    modules = os.environ["UI_NODE_MODULES"]
    release = os.path.join(modules, "speedscope", "dist", "release")
    if not check(os.path.isfile(os.path.join(release, "index.html")), f"speedscope's viewer in {release}"):
        return 1
    w = Watched("dotmon-ssview-")
    srv = None
    try:
        w.app.p.stdin.write("hot 60000\n")
        w.app.p.stdin.flush()
        time.sleep(0.5)
        trace = os.path.join(w.tmp, "hot.nettrace")
        url = f"http://127.0.0.1:{w.port}/trace?pid={w.app.pid}&profile=cpu-sampling&durationSeconds=3"
        with urllib.request.urlopen(url, timeout=60) as r, open(trace, "wb") as f:
            shutil.copyfileobj(r, f)
        site = os.path.join(w.tmp, "site")
        shutil.copytree(release, site)
        out = os.path.join(site, "hot.speedscope.json")
        p = subprocess.run([os.environ["DOTMON_BIN"], "convert", trace, "--format", "speedscope", "-o", out],
                           capture_output=True, text=True, timeout=60)
        check(p.returncode == 0 and os.path.getsize(out) > 0,
              f"dotmon convert --format speedscope: exit {p.returncode}, {os.path.getsize(out) if os.path.exists(out) else 0} bytes")

        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=site))
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{srv.server_address[1]}"
        run_node("speedscope_viewer.js", "dotmon's speedscope file",
                 VIEWER_URL=f"{base}/index.html#profileURL={base}/hot.speedscope.json")
    finally:
        if srv is not None:
            srv.shutdown()
        w.close()
    return status()


if __name__ == "__main__":
    sys.exit(main())
