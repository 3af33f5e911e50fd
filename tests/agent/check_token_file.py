#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Issue 31 item 3: `make run` tells the user what to do next. The real dotmon with
`collect --temp-apikey --token-file PATH` (what the Makefile's run target passes, checked with
`make -n run`):
  - before any JSON log line, standard output (standard error on the same file, so the order is
    the order they were written) has the key's block, then `dotmon on URL, UI at URL/ui`, where
    the token is and the `export DOTMON_TOKEN=$(cat ~/…)` line; that line, run by a shell with
    the same HOME, yields the token, and the token answers 200 where no token answers 401;
  - the file holds the bare token, mode 0600, its missing folders made 0700; the token is in no
    log line; the file is gone after SIGTERM (and after SIGINT);
  - a symlink planted at the file's name is replaced, its target untouched;
  - a folder others can write, or (as root) one another uid owns, stops start-up with the reason
    and writes nothing; --token-file without --temp-apikey is a usage error (status 2).
Environment: DOTMON_BIN. Argument: the source tree (for `make -n run`).
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from dmtest import check, fetch, free_port, stop, verdict, wait_log  # noqa: E402

BIN = os.environ["DOTMON_BIN"]
OTHER_UID = 4321


def start(home, token_file, out_path, port, extra=()):
    """dotmon with stdout and stderr on one file (out_path); (Popen, the file)."""
    out = open(out_path, "w+")
    env = dict(os.environ, HOME=home, TMPDIR=home)
    p = subprocess.Popen([BIN, "collect", "--temp-apikey", "--token-file", token_file, "--urls",
                          f"http://127.0.0.1:{port}", "--metrics", "false", *extra],
                         stdout=out, stderr=subprocess.STDOUT, env=env, stdin=subprocess.DEVNULL)
    return p, out


def read(path):
    with open(path) as f:
        return f.read()


def mode(path):
    return os.lstat(path).st_mode & 0o7777


def main_case(tmp):
    home = os.path.join(tmp, "home")
    os.mkdir(home, 0o700)
    token_file = os.path.join(home, ".local", "state", "dotmon", "token")
    port = free_port()
    p, out = start(home, token_file, os.path.join(tmp, "main.out"), port)
    try:
        ready = wait_log(out, r"Now listening on: http://127\.0\.0\.1:\d+", 30)
        check(ready is not None, "dotmon started with --temp-apikey --token-file")
        if ready is None:
            return
        lines = read(out.name).splitlines()
        first_log = next((i for i, ln in enumerate(lines) if ln.startswith("{")), len(lines))
        head = lines[:first_log]
        check(len(head) >= 5 and head[0].startswith("Generated one-time-use API key"),
              f"the key's block comes first, before any log line: {head[:2]}")
        m = re.fullmatch(r"Authorization: Bearer (\S+)", head[1] if len(head) > 1 else "")
        token = m.group(1) if m else ""
        want = [f"dotmon on http://127.0.0.1:{port}, UI at http://127.0.0.1:{port}/ui",
                f"API token in {token_file} (mode 0600); in another shell:",
                "  export DOTMON_TOKEN=$(cat ~/.local/state/dotmon/token)"]
        check(head[2:5] == want, f"then the next steps, before any log line: {head[2:5]}")
        check(os.path.isfile(token_file) and read(token_file) == token and token != "",
              "the file holds the bare token")
        check(mode(token_file) == 0o600, f"the file is 0600 ({oct(mode(token_file))})")
        for d in (".local", ".local/state", ".local/state/dotmon"):
            check(mode(os.path.join(home, d)) == 0o700, f"~/{d} made 0700")
        got = subprocess.run(["bash", "-c", head[4] + '\nprintf %s "$DOTMON_TOKEN"'],
                             env=dict(os.environ, HOME=home), capture_output=True, text=True)
        check(got.returncode == 0 and got.stdout == token, "the export line, pasted, sets the token")
        url = f"http://127.0.0.1:{port}/processes"
        check(fetch(url, token=read(token_file))[0] == 200, "the file's token answers 200")
        check(fetch(url)[0] == 401, "no token answers 401")
        logs = [ln for ln in read(out.name).splitlines() if ln.startswith("{")]
        check(all(token not in ln for ln in logs), "the token is in no log line")
    finally:
        stop(p)
        out.close()
    check(p.returncode == 0, f"SIGTERM: dotmon exits 0 ({p.returncode})")
    check(not os.path.lexists(token_file), "SIGTERM: the token file is removed")
    check(os.listdir(os.path.dirname(token_file)) == [], "nothing else is left in its folder")


def planted_link(tmp):
    home = os.path.join(tmp, "home2")
    folder = os.path.join(home, "state")
    os.makedirs(folder, 0o700)
    os.chmod(home, 0o700)
    victim = os.path.join(tmp, "victim.txt")
    with open(victim, "w") as f:
        f.write("keep me")
    token_file = os.path.join(folder, "token")
    os.symlink(victim, token_file)
    port = free_port()
    p, out = start(home, token_file, os.path.join(tmp, "link.out"), port)
    try:
        ok = wait_log(out, r"Now listening on", 30) is not None
        check(ok, "dotmon starts with a symlink at the token file's name")
        check(not os.path.islink(token_file) and os.path.isfile(token_file),
              "the symlink is replaced by a regular file")
        check(read(victim) == "keep me", "the link's target is untouched")
    finally:
        if p.poll() is None:
            p.send_signal(2)  # SIGINT, as Ctrl-C after `make run`
        try:
            p.wait(15)
        except subprocess.TimeoutExpired:
            stop(p)
        out.close()
    check(p.returncode == 0 and not os.path.lexists(token_file),
          f"SIGINT: exit 0 ({p.returncode}) and the token file is removed")
    check(read(victim) == "keep me", "the link's target is still untouched")


def refused(tmp, name, folder, why_pattern):
    token_file = os.path.join(folder, "token")
    out = os.path.join(tmp, name + ".out")
    p, f = start(tmp, token_file, out, free_port())
    try:
        rc = p.wait(30)
    except subprocess.TimeoutExpired:
        stop(p)
        rc = None
    f.close()
    text = read(out)
    check(rc == 1, f"{name}: start-up stops (status {rc})")
    check(re.search(why_pattern, text) is not None, f"{name}: the reason is logged: {text[-300:]!r}")
    check(not os.path.lexists(token_file), f"{name}: no token file")
    check("Bearer" not in text, f"{name}: no token printed")


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else None
    tmp = tempfile.mkdtemp(prefix="dmtoken")
    os.chmod(tmp, 0o700)
    try:
        main_case(tmp)
        planted_link(tmp)

        open_dir = os.path.join(tmp, "open")
        os.mkdir(open_dir)
        os.chmod(open_dir, 0o777)
        refused(tmp, "a folder others can write", open_dir, r"writable by others")
        if os.geteuid() == 0:
            theirs = os.path.join(tmp, "theirs")
            os.mkdir(theirs, 0o700)
            os.chown(theirs, OTHER_UID, OTHER_UID)
            refused(tmp, "a folder another uid owns", theirs, rf"owned by uid {OTHER_UID}")
        else:
            print("skip a folder another uid owns (needs root for chown)")

        r = subprocess.run([BIN, "collect", "--token-file", os.path.join(tmp, "t")],
                           capture_output=True, text=True, timeout=30)
        check(r.returncode == 2 and "--temp-apikey" in r.stderr,
              f"--token-file without --temp-apikey: status 2 naming --temp-apikey ({r.returncode})")

        if src is not None and shutil.which("make"):
            r = subprocess.run(["make", "-n", "-C", src, "run", "HOME=/home/newcomer"],
                               capture_output=True, text=True, timeout=60)
            check("--temp-apikey --token-file '/home/newcomer/.local/state/dotmon/token'" in r.stdout,
                  "make run passes --token-file ~/.local/state/dotmon/token")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return verdict("token file")


if __name__ == "__main__":
    sys.exit(main())
