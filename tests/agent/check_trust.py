#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Issue 28 (items 1 and 5), end to end: configuration, egress, dump and listen folders another uid
could write are refused (sshd's StrictModes, common/shdir.h), with the real dotmon and TestApp.

A second uid (4321, setpriv) is the attacker. dotmon runs as root with:
  - HOME a shared 1777 folder where the attacker made .config/dotnet-monitor/settings.json
    (a Startup rule whose Execute writes a marker, and a CollectTrace egressed to the
    attacker's folder): refused, an Error names the file and ".config is owned by uid 4321";
    the rule never runs and nothing reaches the attacker's folder, also after the attacker
    rewrites the file (hot reload: refused again);
  - the key-per-file folder (DOTMON_SHARED_CONFIG_DIR) 0777 with a planted rule in it: refused,
    named ("writable by others"), the rule never runs;
  - its own --configuration-file-path (trusted): a Startup rule runs (the control), and two
    FileSystem egress providers: one through a symlink the attacker planted in a sticky folder,
    one into a folder the attacker owns: /trace?egressProvider= to each ends Failed with the
    component and the reason in the operation's error, and nothing is written through them;
  - Storage:DumpTempFolder a folder the attacker owns: /dump is refused with the reason before
    the runtime is asked (no file there).
Then, without an app: a trusted key-per-file folder laid out as a Kubernetes Secret (`Key ->
..data/Key`, `..data -> ..2024_…`) still loads (`dotmon config show`); an untrusted
--configuration-file-path stops start-up; listen mode refuses a socket folder the attacker owns.

Needs root (chown, setpriv); exits 77 otherwise. Environment: DOTMON_BIN, DOTMON_TESTAPP_DIR.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from dmtest import FAILS, App, check, close_log, fetch, free_port, settle, stop, wait_for  # noqa: E402

UID = 4321
SCRIPT = "#!/bin/sh\nout=$1\nshift\nprintf '%s\\n' \"$*\" >> \"$out\"\n"


def as_attacker(cmd):
    subprocess.run(["setpriv", f"--reuid={UID}", f"--regid={UID}", "--clear-groups", "sh", "-c", cmd],
                   check=True)


def attacker_write(path, text):
    as_attacker(f"cat > '{path}' <<'EOF'\n{text}\nEOF")


def request(url):
    """(status, Location, body text); status 0 when the connection fails."""
    st, headers, body = fetch(url, timeout=30)
    return st, headers.get("Location", "") if st < 400 else "", body.decode()


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return ""


def rule(script, out, word):
    return {"Trigger": {"Type": "Startup"},
            "Actions": [{"Type": "Execute", "Settings": {"Path": script, "Arguments": f"{out} {word}"}}]}


def failed_op(api, pid, provider):
    """/trace to provider: the operation's final status and error message."""
    st, loc, body = request(f"{api}/trace?pid={pid}&durationSeconds=1&profile=Metrics&egressProvider={provider}")
    if st != 202 or "/operations/" not in loc:
        return f"HTTP {st}", body
    url = loc if loc.startswith("http") else api + loc
    op = settle(lambda: json.loads(request(url)[2]),
                lambda o: o.get("status") in ("Succeeded", "Failed", "Cancelled", "Stopped"), 30, 0.2)
    return op.get("status"), ((op.get("error") or {}).get("message") or "")


def main():
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        print("SKIP: needs root and setpriv")
        return 77
    t0 = time.time()
    tmp = tempfile.mkdtemp(prefix="dmtrust")  # 0700, root's: dotmon's TMPDIR, the honest files
    shared = tempfile.mkdtemp(prefix="dmshared")  # a pod's /tmp: 1777
    os.chmod(shared, 0o1777)
    app, dm, log = None, None, None
    try:
        script = os.path.join(tmp, "rec.sh")
        with open(script, "w") as f:
            f.write(SCRIPT)
        os.chmod(script, 0o755)
        out = os.path.join(tmp, "actions.txt")
        loot = os.path.join(shared, "loot")  # the attacker's own folder
        as_attacker(f"mkdir -m 0777 '{loot}'")
        # (a) the planted user settings file, under the shared HOME.
        user_dir = os.path.join(shared, ".config", "dotnet-monitor")
        as_attacker(f"mkdir -p '{user_dir}'")
        planted = os.path.join(user_dir, "settings.json")
        evil = {"Egress": {"FileSystem": {"loot": {"DirectoryPath": loot}}},
                "CollectionRules": {"Planted": {
                    "Trigger": {"Type": "Startup"},
                    "Actions": [{"Type": "Execute", "Settings": {"Path": script, "Arguments": f"{out} planted"}},
                                {"Type": "CollectTrace", "Settings": {"Profile": "Metrics", "Duration": "00:00:01",
                                                                     "Egress": "loot"}}]}}}
        attacker_write(planted, json.dumps(evil))
        # (b) a world-writable key-per-file folder with a rule planted in it.
        kpf = tempfile.mkdtemp(prefix="dmkpf")
        os.chmod(kpf, 0o777)
        for k, v in {"CollectionRules__Kpf__Trigger__Type": "Startup",
                     "CollectionRules__Kpf__Actions__0__Type": "Execute",
                     "CollectionRules__Kpf__Actions__0__Settings__Path": script,
                     "CollectionRules__Kpf__Actions__0__Settings__Arguments": f"{out} kpf"}.items():
            attacker_write(os.path.join(kpf, k), v)
        # (d) egress folders: a symlink the attacker planted in a sticky folder, and their folder.
        victim = os.path.join(tmp, "victim")
        os.mkdir(victim, 0o700)
        link = os.path.join(shared, "out")
        as_attacker(f"ln -s '{victim}' '{link}'")
        theirs = os.path.join(shared, "theirs")
        as_attacker(f"mkdir -m 0700 '{theirs}'")
        cfg = {"Egress": {"FileSystem": {"linked": {"DirectoryPath": link},
                                         "theirs": {"DirectoryPath": theirs},
                                         "mine": {"DirectoryPath": os.path.join(tmp, "mine")}}},
               "Storage": {"DumpTempFolder": theirs},
               "CollectionRules": {"Trusted": rule(script, out, "trusted")}}
        cfg_path = os.path.join(tmp, "settings.json")
        with open(cfg_path, "w") as f:
            json.dump(cfg, f)

        app = App(tmp)
        port = free_port()
        api = f"http://127.0.0.1:{port}"
        log_path = os.path.join(tmp, "dotmon.log")
        log = open(log_path, "w+")
        env = dict(os.environ, TMPDIR=tmp, HOME=shared, DOTMON_SHARED_CONFIG_DIR=kpf)
        env.pop("XDG_CONFIG_HOME", None)
        dm = subprocess.Popen([os.environ["DOTMON_BIN"], "collect", "--no-auth", "--urls", api, "--metrics", "false",
                               "--configuration-file-path", cfg_path], stdout=subprocess.DEVNULL, stderr=log, env=env)
        check(wait_for(lambda: str(app.pid) in request(f"{api}/processes")[2], 30), "dotmon lists the app")
        check(wait_for(lambda: "trusted" in read(out), 15), f"the trusted Startup rule ran (control): {read(out)!r}")
        text = read(log_path)
        check(f"user settings not applied: refused {planted}: folder {shared}/.config is owned by uid {UID}" in text,
              "the planted user settings file is refused at Error, named, with the reason")
        check(f"key-per-file settings not applied: refused {kpf}: folder {kpf} is writable by others" in text,
              "the world-writable key-per-file folder is refused, named, with the reason")

        # (d) egress through the planted link and into the attacker's folder: the reason, no file.
        status, msg = failed_op(api, app.pid, "linked")
        check(status == "Failed" and f"symlink {link} is owned by uid {UID}" in msg,
              f"egress through another uid's symlink fails with the reason: {status} {msg!r}")
        status, msg = failed_op(api, app.pid, "theirs")
        check(status == "Failed" and f"folder {theirs} is owned by uid {UID}" in msg,
              f"egress into another uid's folder fails with the reason: {status} {msg!r}")
        st, _, body = request(f"{api}/trace?pid={app.pid}&durationSeconds=1&profile=Metrics&egressProvider=mine")
        check(st == 202, f"egress to a folder of dotmon's own is accepted ({st})")
        check(wait_for(lambda: len(os.listdir(os.path.join(tmp, "mine"))) == 1 if os.path.isdir(
            os.path.join(tmp, "mine")) else False, 20), "and its trace is written (control)")
        # Storage:DumpTempFolder owned by the attacker: refused before the runtime is asked.
        st, _, body = request(f"{api}/dump?pid={app.pid}&type=Mini")
        check(st == 500 and f"the dump folder is not trusted: {theirs}: folder {theirs} is owned by uid {UID}" in body,
              f"/dump into another uid's folder is refused with the reason ({st} {body[:200]!r})")

        # Hot reload: the attacker rewrites the planted file; refused again, never applied.
        n_before = read(log_path).count("user settings not applied")
        evil["CollectionRules"]["Planted2"] = rule(script, out, "planted2")
        attacker_write(planted, json.dumps(evil))
        check(wait_for(lambda: read(log_path).count("user settings not applied") > n_before, 15),
              "the rewritten planted file is refused again on reload")
        time.sleep(1)
        got = read(out)
        check("planted" not in got and "kpf" not in got, f"no planted rule ever ran: {got!r}")
        check(os.listdir(loot) == [] and os.listdir(victim) == [] and os.listdir(theirs) == [],
              f"nothing written to the attacker's folders ({os.listdir(loot)}, {os.listdir(victim)}, "
              f"{os.listdir(theirs)})")
        stop(dm)
        dm = None

        # (c) a trusted key-per-file folder as Kubernetes mounts a Secret: still loads.
        k8s = tempfile.mkdtemp(prefix="dmk8s")
        os.chmod(k8s, 0o755)
        stamp = os.path.join(k8s, "..2026_11_29_02_00_00.123456789")
        os.mkdir(stamp, 0o755)
        with open(os.path.join(stamp, "Metrics__Enabled"), "w") as f:
            f.write("false\n")
        os.symlink(os.path.basename(stamp), os.path.join(k8s, "..data"))
        os.symlink("..data/Metrics__Enabled", os.path.join(k8s, "Metrics__Enabled"))
        cenv = dict(env, DOTMON_SHARED_CONFIG_DIR=k8s, HOME="/nonexistent")
        r = subprocess.run([os.environ["DOTMON_BIN"], "config", "show"], capture_output=True, text=True,
                           env=cenv, timeout=20)
        check(r.returncode == 0 and '"Metrics:Enabled": "false"' in r.stdout and "not applied" not in r.stderr,
              f"a Kubernetes-style key-per-file folder (..data links) loads: {r.stdout.strip()!r} {r.stderr!r}")
        as_attacker(f"ln -s '{stamp}/Metrics__Enabled' '{shared}/evil'")
        os.symlink(f"{shared}/evil", os.path.join(k8s, "Evil"))
        r = subprocess.run([os.environ["DOTMON_BIN"], "config", "show"], capture_output=True, text=True,
                           env=cenv, timeout=20)
        check(f"symlink {shared}/evil is owned by uid {UID}" in r.stderr and '"Metrics' not in r.stdout,
              f"a key file reached through another uid's link: the folder is refused: {r.stderr.strip()!r}")
        shutil.rmtree(k8s)
        # An explicit --configuration-file-path that another uid can change stops start-up.
        bad = os.path.join(loot, "cfg.json")
        attacker_write(bad, "{}")
        r = subprocess.run([os.environ["DOTMON_BIN"], "collect", "--no-auth", "--urls", f"http://127.0.0.1:{free_port()}",
                            "--configuration-file-path", bad], capture_output=True, text=True, env=env, timeout=20)
        check(r.returncode != 0 and f"refused {bad}: folder {loot} is owned by uid {UID}" in r.stderr,
              f"an untrusted --configuration-file-path stops start-up: rc {r.returncode} {r.stderr.strip()[-200:]!r}")
        # Listen mode: a socket folder the attacker owns.
        r = subprocess.run([os.environ["DOTMON_BIN"], "collect", "--no-auth", "--urls", f"http://127.0.0.1:{free_port()}",
                            "--diagnostic-port", os.path.join(theirs, "dm.sock")], capture_output=True, text=True,
                           env=env, timeout=20)
        check(r.returncode != 0 and f"folder {theirs} is owned by uid {UID}" in r.stderr
              and os.listdir(theirs) == [],
              f"listen mode refuses another uid's socket folder: rc {r.returncode} {r.stderr.strip()[-200:]!r}")
        shutil.rmtree(kpf)
    finally:
        if app is not None:
            app.kill()
        stop(dm)
        close_log(log)
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(shared, ignore_errors=True)
    print(f"{time.time() - t0:.1f} s")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
