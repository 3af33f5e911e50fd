#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Execute's arguments stay whole, and its child gets a clean environment (issue 28), end to end.

The real test app runs with a hostile command line (`--exec=/bin/sh`, "a b", `$(Process.Name)`,
a quote) and a hostile environment variable (blanks, quotes, `$(Process.CommandLine)`); dotmon
runs with an API key, an S3 provider's SecretAccessKey, AWS_* and OTEL_* secrets in its
environment. A Startup rule reads the variable (GetEnvironmentVariable) and runs a script with
Arguments `"fixed arg" $(Process.Name) "$(Process.CommandLine)" $(Actions.g.Value)
--cl=$(Process.CommandLine)`; the script writes its argv, its environment and its open
descriptors to files. Asserted: exactly the 5 configured arguments, each value whole and never
expanded again; the environment is PATH and LANG only; no descriptor of dotmon's (socket, pipe,
epoll, eventfd, inotify) reached the child.

Environment: DOTMON_BIN, DOTMON_TESTAPP_DIR, DOTNET_EXE/DOTNET_ROOT.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from dmtest import FAILS, App, check, free_port, http_get, start_dotmon, stop, wait_for  # noqa: E402
import dmtest  # noqa: E402

SCRIPT = """#!/bin/sh
out=$1
shift
for a in "$@"; do printf '%s\\0' "$a"; done > "$out.argv.tmp"
env -0 > "$out.env"
ls -l /proc/$$/fd/ > "$out.fd"
mv "$out.argv.tmp" "$out.argv"
"""

HOSTILE_ENV = 'x $(Process.CommandLine) "y z" $(Actions.g.Value)'
SECRETS = {
    "DotnetMonitor_Egress__S3Storage__s3__BucketName": "b",
    "DotnetMonitor_Egress__S3Storage__s3__Endpoint": "http://127.0.0.1:9",
    "DotnetMonitor_Egress__S3Storage__s3__AccessKeyId": "AKIDEXAMPLE",
    "DotnetMonitor_Egress__S3Storage__s3__SecretAccessKey": "s3-secret-Wq1",
    "AWS_SECRET_ACCESS_KEY": "aws-secret-Wq2",
    "AWS_SESSION_TOKEN": "aws-token-Wq3",
    "OTEL_EXPORTER_OTLP_HEADERS": "api-key=otel-secret-Wq4",
    "LANG": "C.UTF-8",
}


def main():
    tmp = tempfile.mkdtemp(prefix="dotmon-exec-")
    os.chmod(tmp, 0o700)
    script = os.path.join(tmp, "probe.sh")
    with open(script, "w") as f:
        f.write(SCRIPT)
    os.chmod(script, 0o755)
    out = os.path.join(tmp, "out")
    key = json.loads(subprocess.run([os.environ["DOTMON_BIN"], "generatekey", "-o", "machinejson"],
                                    capture_output=True, text=True, check=True).stdout)
    rule = "DotnetMonitor_CollectionRules__R__"
    env = dict(SECRETS, **{
        rule + "Trigger__Type": "Startup",
        rule + "Actions__0__Name": "g",
        rule + "Actions__0__Type": "GetEnvironmentVariable",
        rule + "Actions__0__Settings__Name": "DOTMON_HOSTILE",
        rule + "Actions__1__Type": "Execute",
        rule + "Actions__1__Settings__Path": script,
        rule + "Actions__1__Settings__Arguments":
            f'{out} "fixed arg" $(Process.Name) "$(Process.CommandLine)" $(Actions.g.Value) '
            "--cl=$(Process.CommandLine)",
    })
    os.environ["DOTMON_HOSTILE"] = HOSTILE_ENV
    app = App(tmp, "--exec=/bin/sh", "a b", "$(Process.Name)", 'q"uote')
    del os.environ["DOTMON_HOSTILE"]
    log = open(os.path.join(tmp, "dotmon.log"), "w+")
    dm = None
    try:
        port = free_port()
        t0 = time.time()
        dm = start_dotmon(tmp, port, log, [app.pid], key=key, env=env)
        wait_for(lambda: os.path.exists(out + ".argv"), 20)
        check(os.path.exists(out + ".argv"), f"the Execute action ran ({time.time() - t0:.1f} s)")
        st, _, body = http_get(port, f"/process?pid={app.pid}", {"Authorization": key["AuthorizationHeader"]})
        proc = json.loads(body) if st == 200 else {}
        cl, name = proc.get("commandLine", ""), proc.get("name", "")
        check("--exec=/bin/sh a b $(Process.Name)" in cl, f"the app's command line as the runtime says: {cl!r}")
        with open(out + ".argv", "rb") as f:
            argv = f.read().decode().split("\0")[:-1]
        want = ["fixed arg", name, cl, HOSTILE_ENV, "--cl=" + cl]
        check(argv == want, f"argv is exactly the 5 configured arguments, values whole, not expanded again: "
                            f"{argv!r} (want {want!r})")
        with open(out + ".env", "rb") as f:
            child_env = dict(e.split("=", 1) for e in f.read().decode().split("\0") if "=" in e)
        names = set(child_env) - {"PWD", "SHLVL", "_"}  # the shell's own
        check(names == {"PATH", "LANG"} and child_env.get("LANG") == "C.UTF-8",
              f"the child's environment is PATH and LANG: {sorted(child_env)}")
        blob = json.dumps(child_env)
        leaked = [v for v in list(SECRETS.values())[3:7] + [key["Subject"]] if v in blob]
        check(not leaked, f"no secret of dotmon's in the child's environment: {leaked}")
        with open(out + ".fd") as f:
            fds = {int(l.split(" -> ")[0].split()[-1]): l.split(" -> ", 1)[1].strip() for l in f if " -> " in l}
        # stdio (dotmon's stdout is /dev/null, which the shell also saves as fd 10+), the script
        ours = {"/dev/null", script, out + ".fd"}
        foreign = {n: t for n, t in fds.items() if n > 2 and t not in ours}
        check(len(fds) >= 3 and not foreign, f"no descriptor of dotmon's in the child: {fds}")
    finally:
        app.kill()
        stop(dm)
        log.seek(0)
        text = log.read()
        check(dmtest.sanitizer_report(text) is None, "no sanitizer report")
        if FAILS:
            sys.stderr.write(text[-4000:])
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
