#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Issue 32 items 1, 2, 3, 4, 9 and 13: dotnet-monitor's documented settings at start-up, with one
real TestApp and one dotmon, checked against what dotnet-monitor's own tests assert.

- Item 1 (its DiagnosticPortTests.DefaultDiagnosticPort_NotSupported_ConnectMode):
  Storage:DefaultSharedPath alone keeps connect mode. The app in $TMPDIR is listed, /info says
  Connect, and no dotnet-monitor.sock appears in the shared folder.
- Item 2 (its KestrelTests.UrlBinding_NoOverrideWarning_AspNetCore): `--urls` on the command line,
  DOTNET_Urls set to something invalid and ASPNETCORE_Urls to a `+` URL: dotmon answers on the
  ASPNETCORE_Urls port and not on the command line's.
- Item 3 (its CollectionRuleContainer: a rule's options are validated when the rule runs): a rule
  whose CollectGCDump names an egress provider nobody configured does not stop start-up; the
  action fails when the rule runs, with a message naming the provider, and the agent keeps
  serving.
- Item 4 (its DumpTests: "dotnet-monitor should ensure the folder is created"): a
  Storage:DumpTempFolder that does not exist yet; /dump works and the folder now exists.
- Item 15: the Logging section as dotnet-monitor's users write it: FormatterName systemd gives
  "<severity>category[0] message" lines, and Logging:LogLevel:dotmon.rules=Warning silences that
  category's Information lines while its warnings and other categories' Information stay.
- Items 9 and 13: the FileSystem provider's CopyBufferSize (the documentation's example value),
  GlobalCounter:MaxHistograms, GlobalCounter:MaxTimeSeries and
  DiagnosticPort:DeleteEndpointOnStartup are accepted and are not called unknown settings.
Environment: DOTMON_BIN, DOTMON_TESTAPP_DIR (ctest's).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from dmtest import (App, check, close_log, fetch, free_port, stop, verdict, wait_for,  # noqa: E402
                    wait_log)


def main():
    tmp = tempfile.mkdtemp(prefix="dmstartup")
    os.chmod(tmp, 0o700)
    app = dm = log = None
    try:
        shared = os.path.join(tmp, "shared")
        os.mkdir(shared, 0o700)
        dumps = os.path.join(tmp, "Dumps")  # does not exist: dotmon makes it
        out = os.path.join(tmp, "out")
        app = App(tmp)
        settings = {
            "$schema": "https://aka.ms/dotnet-monitor-schema",
            "Egress": {"FileSystem": {"monitorFile": {"DirectoryPath": out, "CopyBufferSize": 1024}}},
            "GlobalCounter": {"IntervalSeconds": 5, "MaxHistograms": 10, "MaxTimeSeries": 500},
            "DiagnosticPort": {"DeleteEndpointOnStartup": True},
            "Logging": {"LogLevel": {"Default": "Information", "dotmon.rules": "Warning"},
                        "Console": {"FormatterName": "systemd"}, "CaptureScopes": True},
            "CollectionRules": {"NoProvider": {
                "Filters": [{"Key": "ProcessId", "Value": str(app.pid)}],
                "Trigger": {"Type": "Startup"},
                "Actions": [{"Type": "CollectGCDump", "Settings": {"Egress": "notConfigured"}}]}},
        }
        cfg = os.path.join(tmp, "settings.json")
        with open(cfg, "w") as f:
            json.dump(settings, f)
        cli_port, port = free_port(), free_port()
        env = dict(os.environ, TMPDIR=tmp, HOME=tmp,
                   DotnetMonitor_Storage__DefaultSharedPath=shared,
                   DotnetMonitor_Storage__DumpTempFolder=dumps,
                   DOTNET_Urls="dotnet_invalid",
                   ASPNETCORE_Urls=f"http://+:{port}")
        log = open(os.path.join(tmp, "dotmon.log"), "w+")
        dm = subprocess.Popen([os.environ["DOTMON_BIN"], "collect", "--no-auth", "--metrics", "false",
                               "--urls", f"http://127.0.0.1:{cli_port}", "--configuration-file-path", cfg],
                              stdout=subprocess.DEVNULL, stderr=log, env=env)
        url = f"http://127.0.0.1:{port}"
        listed = wait_for(lambda: str(app.pid).encode() in fetch(f"{url}/processes", timeout=5)[2], 60, 0.2)
        check(listed, f"item 2: dotmon answers on ASPNETCORE_Urls' port {port} and lists the app")
        if not listed:
            return verdict("dotnet-monitor start-up")
        st, _, body = fetch(f"http://127.0.0.1:{cli_port}/info", timeout=5)
        check(st == 0, f"item 2: the command line's --urls port is not bound ({st})")

        st, _, body = fetch(f"{url}/info")
        info = json.loads(body) if st == 200 else {}
        check(info.get("diagnosticPortMode") == "Connect",
              f"item 1: DefaultSharedPath alone is connect mode: {info.get('diagnosticPortMode')}")
        check(not os.path.exists(os.path.join(shared, "dotnet-monitor.sock")),
              f"item 1: no dotnet-monitor.sock in the shared folder: {os.listdir(shared)}")

        m = wait_log(log, r"action CollectGCDump failed: [^\"]*notConfigured", 30)
        check(m is not None, "item 3: the rule's action fails when it runs, naming the provider")
        st, _, body = fetch(f"{url}/collectionrules?pid={app.pid}")
        check(st == 200 and "NoProvider" in json.loads(body or b"{}"),
              f"item 3: the rule is listed, the agent serves ({st} {body[:200]!r})")

        check(os.path.isdir(dumps) and (os.stat(dumps).st_mode & 0o777) == 0o700,
              "item 4: the missing Storage:DumpTempFolder was created, mode 0700")
        st, hdrs, n = fetch(f"{url}/dump?pid={app.pid}&type=Mini", timeout=120,
                            dest=os.path.join(tmp, "app.dmp"))
        check(st == 200 and isinstance(n, int) and n > 0, f"item 4: /dump into it answers 200 with a dump ({st}, {n})")

        log.flush()
        log.seek(0)
        text = log.read()
        for key in ("CopyBufferSize", "MaxHistograms", "MaxTimeSeries", "DeleteEndpointOnStartup", "$schema"):
            said = [line for line in text.splitlines() if key in line and "setting" in line]
            check(not said, f"items 9, 13, 14: {key} is not reported as a setting dotmon ignores: {said}")
        lines = [line for line in text.splitlines() if line]
        bad = [line for line in lines if not re.match(r"<[3467]>[A-Za-z.]+\[0\] ", line)]
        check(lines and not bad, f"item 15: every line is systemd's '<n>category[0] message': {bad[:3]}")
        check(any(line.startswith("<6>dotmon[0] ") for line in lines),
              "item 15: other categories' Information lines are written")
        check(not any(line.startswith("<6>dotmon.rules[0]") for line in lines)
              and any(line.startswith("<4>dotmon.rules[0]") for line in lines),
              "item 15: Logging:LogLevel:dotmon.rules=Warning keeps its warnings only")
        check(dm.poll() is None, "the agent is still running")
    finally:
        if app is not None:
            app.kill()
        stop(dm)
        close_log(log)
        shutil.rmtree(tmp, ignore_errors=True)
    return verdict("dotnet-monitor start-up")


if __name__ == "__main__":
    sys.exit(main())
