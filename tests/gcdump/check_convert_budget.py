#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`dotmon convert` against a hostile file (issue 28 item 2): before, it grew 1:1 with the file.

gcheap_attack --file writes 160 MiB of a heap walk that never ends (endless pending edges; edgeless
nodes). `dotmon convert --format gcdump` with DOTMON_MEMORY_LIMIT_MB=32 stops with exit 1 and an
error naming the limit and DOTMON_MEMORY_LIMIT_MB, its peak RSS under 48 MB; without the setting
the same file is read whole (the default budget, 2 GiB, is not reached) and fails only for being
unfinished.

Needs DOTMON_BIN and DOTMON_GCHEAP_ATTACK.
"""

import os
import resource
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from dmtest import FAILS, SANITIZED, check  # noqa: E402


def convert(path, env):
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    p = subprocess.run([os.environ["DOTMON_BIN"], "convert", "--format", "gcdump", path, "-o", path + ".gcdump"],
                       capture_output=True, text=True, env=dict(os.environ, **env), timeout=120)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return p.returncode, p.stderr.strip(), peak if peak > before else None


def main():
    tmp = tempfile.mkdtemp(prefix="cvbudget")
    for kind in ("edges", "nodes"):
        path = os.path.join(tmp, f"{kind}.nettrace")
        subprocess.run([os.environ["DOTMON_GCHEAP_ATTACK"], "--file", path, kind, "160"], check=True)
        code, err, peak = convert(path, {"DOTMON_MEMORY_LIMIT_MB": "32"})
        check(code == 1 and "more than 32 MiB (DOTMON_MEMORY_LIMIT_MB)" in err,
              f"{kind}: exit 1 naming the 32 MiB limit ({code}: {err[:300]})")
        if not SANITIZED:
            check(peak is not None and peak < 48 * 1024, f"{kind}: peak RSS {peak} KiB under 48 MiB")
        os.unlink(path)
    path = os.path.join(tmp, "edges-small.nettrace")
    subprocess.run([os.environ["DOTMON_GCHEAP_ATTACK"], "--file", path, "edges", "40"], check=True)
    code, err, _ = convert(path, {"DOTMON_MEMORY_LIMIT_MB": ""})
    check(code == 1 and "ended before the induced GC did" in err,
          f"within the default budget: read whole, unfinished ({code}: {err[:200]})")
    os.unlink(path)
    for f in os.listdir(tmp):
        os.unlink(os.path.join(tmp, f))
    os.rmdir(tmp)
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
