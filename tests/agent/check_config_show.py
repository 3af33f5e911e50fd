#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Issue 31 item 4, issue 32 item 12: `dotmon config show` has one exit-status rule, the same for
every kind of problem: 1 when `dotmon collect` would refuse to start with the configuration (an
invalid collection rule; an invalid Egress provider), 0 when it would start, warnings included (an
unknown setting is named on stderr; so is a collection rule naming an Egress provider that does not
exist, which dotnet-monitor validates only when the rule runs: issue 32 item 3). For each file, collect with the same
file is run too: it starts exactly when config show says 0. A settings file's top-level "$schema"
(dotnet-monitor's examples carry one) is accepted silently: no warning, not shown as a setting.
Environment: DOTMON_BIN. No .NET needed.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from dmtest import check, free_port, stop, verdict, wait_log  # noqa: E402

BIN = os.environ["DOTMON_BIN"]
SCHEMA = "https://aka.ms/dotnet-monitor-schema"  # what dotnet-monitor's settings examples carry

FILES = {
    # name: (settings, config show's status, what stderr must name)
    "rule naming a missing egress (a warning)": ({
        "CollectionRules": {"Busy": {
            "Trigger": {"Type": "Startup"},
            "Actions": [{"Type": "CollectGCDump", "Settings": {"Egress": "files"}}]}}},
        0, "Egress provider 'files' does not exist"),
    # schema: invalid (an unknown trigger type)
    "invalid rule": ({
        "CollectionRules": {"Busy": {
            "Trigger": {"Type": "NoSuchTrigger"},
            "Actions": [{"Type": "CollectGCDump", "Settings": {"Egress": "files"}}]}}},
        1, "CollectionRules:Busy:Trigger"),
    # schema: invalid (an unknown setting of a FileSystem provider)
    "invalid egress provider": ({"Egress": {"FileSystem": {"files": {"Bogus": "x"}}}},
                                1, "Egress:FileSystem:files"),
    "unknown setting (a warning)": ({"NoSuchSection": {"Key": 1}}, 0, "NoSuchSection:Key"),
    "$schema and a valid rule": ({
        "$schema": SCHEMA,
        "Egress": {"FileSystem": {"files": {"DirectoryPath": "@TMP@/out"}}},
        "CollectionRules": {"Busy": {
            "Trigger": {"Type": "Startup"},
            "Actions": [{"Type": "CollectGCDump", "Settings": {"Egress": "files"}}],
            "Filters": [{"Key": "ProcessName", "Value": "no-such-app"}]}}},
        0, None),
}


def collect_starts(tmp, cfg):
    """Whether collect with cfg gets as far as listening (True) or exits (False)."""
    log = open(os.path.join(tmp, "collect.log"), "w+")
    p = subprocess.Popen([BIN, "collect", "--no-auth", "--metrics", "false", "--urls",
                          f"http://127.0.0.1:{free_port()}", "--configuration-file-path", cfg],
                         stdout=subprocess.DEVNULL, stderr=log, env=dict(os.environ, TMPDIR=tmp, HOME=tmp))
    try:
        m = wait_log(log, r'Now listening on|"LogLevel":"Error"', 30)
        return m is not None and m.group(0).startswith("Now")
    finally:
        stop(p)
        log.close()


def main():
    tmp = tempfile.mkdtemp(prefix="dmconfshow")
    os.chmod(tmp, 0o700)
    try:
        for i, (name, (settings, want, named)) in enumerate(FILES.items()):
            cfg = os.path.join(tmp, f"settings{i}.json")
            with open(cfg, "w") as f:
                f.write(json.dumps(settings).replace("@TMP@", tmp))
            r = subprocess.run([BIN, "config", "show", "--configuration-file-path", cfg], capture_output=True,
                               text=True, timeout=30, env=dict(os.environ, HOME=tmp))
            check(r.returncode == want, f"{name}: config show exits {want} ({r.returncode}: {r.stderr.strip()!r})")
            if named is not None:
                check(named in r.stderr, f"{name}: stderr names {named!r}")
            else:
                check(r.stderr == "", f"{name}: nothing on stderr ({r.stderr.strip()!r})")
            check("$schema" not in r.stdout and "$schema" not in r.stderr, f"{name}: $schema is not a setting")
            starts = collect_starts(tmp, cfg)
            check(starts == (want == 0), f"{name}: collect {'starts' if starts else 'refuses to start'}, "
                                         f"as config show's status says")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return verdict("config show")


if __name__ == "__main__":
    sys.exit(main())
