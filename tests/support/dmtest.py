# SPDX-License-Identifier: MIT
"""Shared pieces of the Python end-to-end tests (tests/metrics, tests/logs, tests/ndjson): the real
.NET test app driven over stdin, free ports, the SDK's root, and a check list.

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
    from dmtest import FAILS, App, check, dotnet_root, free_port
"""

import os
import re
import shutil
import socket
import subprocess
import time

FAILS = []


def check(cond, what):
    """Prints ok/FAIL for one check and records a failure; returns cond."""
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILS.append(what)
    return cond


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def dotnet_root():
    if os.environ.get("DOTNET_ROOT"):
        return os.environ["DOTNET_ROOT"]
    exe = os.environ.get("DOTNET_EXE") or shutil.which("dotnet")
    return os.path.dirname(os.path.realpath(exe)) if exe else ""


class App:
    """tests/app's TestApp (DOTMON_TESTAPP_DIR) in TMPDIR=tmp, with extra arguments; waits for
    its "ready pid=N" line. command() sends one stdin command and returns its ok/error line."""

    def __init__(self, tmp, *extra):
        env = dict(os.environ, TMPDIR=tmp, DOTNET_ROOT=dotnet_root())
        self.p = subprocess.Popen([os.path.join(os.environ["DOTMON_TESTAPP_DIR"], "TestApp"), "--no-stdin-exit",
                                   *extra],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
        self.pid = None
        deadline = time.time() + 60
        while time.time() < deadline:
            line = self.p.stdout.readline()
            m = re.match(r"ready pid=(\d+)", line)
            if m:
                self.pid = int(m.group(1))
                return
            if not line:
                break
        raise RuntimeError("the test app did not get ready")

    def command(self, cmd):
        self.p.stdin.write(cmd + "\n")
        self.p.stdin.flush()
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise RuntimeError(f"the test app ended during {cmd!r}")
            if line.startswith(("ok ", "error ")):
                return line.strip()

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()
