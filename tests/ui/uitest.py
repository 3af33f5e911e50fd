# SPDX-License-Identifier: MIT
"""Shared by tests/ui's Python drivers: one of the folder's node scripts run in headless Chromium
(its ok/FAIL lines copied and its failures added to dmtest's FAILS), and the exit status."""

import os
import subprocess
import sys
import time

from dmtest import FAILS, check

HERE = os.path.dirname(os.path.abspath(__file__))


def run_node(script, what, **env):
    """Runs tests/ui/script with node (NODE_PATH: UI_NODE_MODULES) and env added."""
    env = dict(os.environ, NODE_PATH=os.environ["UI_NODE_MODULES"], **env)
    t0 = time.monotonic()
    p = subprocess.run([os.environ.get("NODE_EXE") or "node", os.path.join(HERE, script)], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    sys.stdout.write(p.stdout)
    FAILS.extend(line for line in p.stdout.splitlines() if line.startswith("FAIL"))
    check(p.returncode == 0, f"{script} ({what}): exit {p.returncode} in {time.monotonic() - t0:.1f} s")


def status():
    """The exit status of a driver: 1 (and how many failed) when a check failed, else 0."""
    if FAILS:
        print(f"{len(FAILS)} check(s) failed", flush=True)
        return 1
    return 0
