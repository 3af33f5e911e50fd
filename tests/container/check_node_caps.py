#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Node mode's privileges (docs/node.md, "Privileges"), measured against the kernel: the
capabilities docs/node.md documents are enough, each of them is needed, and the documented
alternatives behave as the page says.

The real .NET test app runs as uid 1654 in a mount namespace of its own, its TMPDIR a tmpfs
(mode 1777, root's, as an image's /tmp) that only its namespace sees. A probe does, from outside,
what node mode does to it: read /proc/<pid>/environ and the links of /proc/<pid>/fd, list its
TMPDIR through /proc/<pid>/root, connect to its diagnostic socket and get a ProcessInfo answer,
read a 0600 file of the app's uid there and delete it the way dotmon deletes files in shared
folders (common/shdir.h: a private 0700 folder, rename, unlink). The probe runs under setpriv with each privilege set:
  - uid 0 with exactly the documented capabilities: every step succeeds;
  - uid 0 without one of them (for each): some step fails;
  - uid 0 with no capability, and a non-root uid with the capabilities in its bounding set only
    (what Kubernetes gives a non-root runAsUser): environ and /proc/<pid>/root are refused;
  - the app's own uid with no capability: every step succeeds.
And a real dump the runtime writes (GenerateCoreDump2, Mini) is a regular file of the app's uid,
mode 0600: the file the documented capabilities must let dotmon read.

Needs root, unshare and setpriv (util-linux), and the test app (DOTMON_TESTAPP_DIR); exits 77
(skipped) without them. Does not run dotmon: node discovery is checked by its own tests.

  check_node_caps.py              the test
  check_node_caps.py probe PID    one probe run (JSON on stdout); what the test runs under setpriv
"""

import errno
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from dmtest import App, check, verdict  # noqa: E402

SKIP = 77
APP_UID = 1654
OTHER_UID = 1000
DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "node.md")
CAPS_LINE = "Capabilities node mode needs (uid 0):"   # check_container.py's NODE_CAPS_LINE
STEPS = ("environ", "fd_links", "root_tmpdir", "connect", "dump_read", "dump_delete")
PROBE_FILE = "dump.probe"


# ---------------------------------------------------------------------------------------------
# The probe (runs under setpriv)
# ---------------------------------------------------------------------------------------------

def ipc_request(path, cmdset, cmdid, payload=b""):
    """One diagnostic IPC request (docs/ipc.md): True when the runtime answers OK."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(30)
        s.connect(path)
        s.sendall(b"DOTNET_IPC_V1\0" + struct.pack("<HBBH", 20 + len(payload), cmdset, cmdid, 0) + payload)
        head = b""
        while len(head) < 20:
            chunk = s.recv(20 - len(head))
            if not chunk:
                break
            head += chunk
        return len(head) == 20 and head[:14] == b"DOTNET_IPC_V1\0" and head[16] == 0xFF and head[17] == 0x00
    finally:
        s.close()


def step(results, name, fn):
    try:
        fn()
        results[name] = "ok"
        return True
    except OSError as e:
        results[name] = errno.errorcode.get(e.errno, str(e.errno))
    except AssertionError as e:
        results[name] = f"failed: {e}"
    return False


def probe(pid):
    results = {}
    env = {}

    def environ():
        with open(f"/proc/{pid}/environ", "rb") as f:
            for entry in f.read(1 << 20).split(b"\0"):
                k, _, v = entry.partition(b"=")
                env[k.decode(errors="replace")] = v.decode(errors="replace")
    step(results, "environ", environ)

    def fd_links():
        # Where node mode checks that the process itself holds the listening socket (docs/ipc.md).
        links = [os.readlink(f"/proc/{pid}/fd/{n}") for n in os.listdir(f"/proc/{pid}/fd")]
        assert any(x.startswith("socket:[") for x in links), "no socket among the descriptors"
    step(results, "fd_links", fd_links)
    # Without the environment, the test's own knowledge of the app's TMPDIR (argv[3]).
    tmpdir = env.get("TMPDIR") or sys.argv[3]
    root_dir = f"/proc/{pid}/root{tmpdir}"
    sock = []

    def root_tmpdir():
        names = os.listdir(root_dir)
        sock.extend(n for n in names if re.match(rf"dotnet-diagnostic-{pid}-\d+-socket$", n))
        assert sock, f"no diagnostic socket among {names}"
    step(results, "root_tmpdir", root_tmpdir)

    def connect():
        assert sock, "no socket found"
        assert ipc_request(os.path.join(root_dir, sock[0]), 0x04, 0x00), "ProcessInfo not answered OK"
    step(results, "connect", connect)

    def dump_read():
        fd = os.open(os.path.join(root_dir, PROBE_FILE), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        try:
            assert os.read(fd, 4096), "empty"
        finally:
            os.close(fd)
    step(results, "dump_read", dump_read)

    def dump_delete():
        dfd = os.open(root_dir, os.O_RDONLY | os.O_DIRECTORY)
        priv = f".dotmon-probe-{os.getpid()}"
        try:
            os.mkdir(priv, 0o700, dir_fd=dfd)
            try:
                os.rename(PROBE_FILE, f"{priv}/x", src_dir_fd=dfd, dst_dir_fd=dfd)
                os.unlink(f"{priv}/x", dir_fd=dfd)
            finally:
                os.rmdir(priv, dir_fd=dfd)
        finally:
            os.close(dfd)
    step(results, "dump_delete", dump_delete)
    print(json.dumps(results))
    return 0


# ---------------------------------------------------------------------------------------------
# The test
# ---------------------------------------------------------------------------------------------

def documented_caps():
    with open(DOC, encoding="utf-8") as f:
        line = next((x for x in f if x.startswith(CAPS_LINE)), "")
    return sorted(set(re.findall(r"`(?:CAP_)?([A-Z_]+)`", line[len(CAPS_LINE):])))


def setpriv_args(uid, caps, ambient):
    """setpriv's options for uid with caps: for uid 0 the bounding set is what execve grants;
    for another uid, ambient capabilities when `ambient`, else the bounding set only."""
    plus = "".join(f",+{c.lower()}" for c in caps)
    if uid == 0:
        return ["--inh-caps=-all", "--ambient-caps=-all", f"--bounding-set=-all{plus}"]
    ids = [f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    if ambient:
        return ids + [f"--inh-caps=-all{plus}", f"--ambient-caps=-all{plus}", f"--bounding-set=-all{plus}"]
    return ids + ["--inh-caps=-all", f"--bounding-set=-all{plus}"]


def run_probe(setpriv, pid, tmpdir, uid, caps, ambient=False):
    """Puts a fresh 0600 file of the app's uid in its TMPDIR, then probes under the privileges."""
    f = f"/proc/{pid}/root{tmpdir}/{PROBE_FILE}"
    fd = os.open(f, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    os.write(fd, b"\x7fELF" + os.urandom(4092))
    os.fchown(fd, APP_UID, APP_UID)
    os.close(fd)
    try:
        r = subprocess.run([setpriv] + setpriv_args(uid, caps, ambient) +
                           [sys.executable, os.path.abspath(__file__), "probe", str(pid), tmpdir],
                           capture_output=True, text=True, timeout=60, cwd="/")
        if r.returncode != 0:
            return {"probe": f"exit {r.returncode}: {r.stderr.strip()[-300:]}"}
        return json.loads(r.stdout)
    finally:
        try:
            os.unlink(f)
        except FileNotFoundError:
            pass


def real_dump(pid, tmpdir):
    """Asks the runtime for a Mini dump in its TMPDIR; (uid, mode) of the file it wrote."""
    root_dir = f"/proc/{pid}/root{tmpdir}"
    sock = next(n for n in os.listdir(root_dir) if n.startswith(f"dotnet-diagnostic-{pid}-"))
    name = f"{tmpdir}/real.dmp"
    utf16 = (name + "\0").encode("utf-16-le")
    payload = struct.pack("<I", len(name) + 1) + utf16 + struct.pack("<II", 1, 0)   # Mini, no flags
    ok = ipc_request(os.path.join(root_dir, sock), 0x01, 0x03, payload)
    path = os.path.join(root_dir, "real.dmp")
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return ok, None
    os.unlink(path)
    return ok, st


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "probe":
        return probe(int(sys.argv[2]))
    unshare, setpriv = shutil.which("unshare"), shutil.which("setpriv")
    if os.geteuid() != 0 or unshare is None or setpriv is None:
        print("SKIPPED: needs root, unshare and setpriv (util-linux)")
        return SKIP
    if not os.environ.get("DOTMON_TESTAPP_DIR"):
        print("SKIPPED: no test app (DOTMON_TESTAPP_DIR)")
        return SKIP
    caps = documented_caps()
    if not check(caps, f"docs/node.md names the capabilities on its line {CAPS_LINE!r}: {caps}"):
        return verdict("node_caps")

    work = tempfile.mkdtemp(prefix="dotmon-nodecaps-")
    app = None
    try:
        os.chmod(work, 0o755)
        # The app's files where its uid can read them; its TMPDIR a mount point that only its own
        # mount namespace fills (a tmpfs of mode 1777): /proc/<pid>/root is the only way in.
        app_dir = os.path.join(work, "app")
        shutil.copytree(os.environ["DOTMON_TESTAPP_DIR"], app_dir)
        subprocess.run(["chmod", "-R", "a+rX", app_dir], check=True)
        tmpdir = os.path.join(work, "apptmp")
        os.mkdir(tmpdir, 0o755)
        # dmtest.App starts $DOTMON_TESTAPP_DIR/TestApp: here a script that starts the real one in
        # its own mount namespace (its TMPDIR, App's, mounted there) and as APP_UID.
        wrapper_dir = os.path.join(work, "wrapper")
        os.mkdir(wrapper_dir)
        with open(os.path.join(wrapper_dir, "TestApp"), "w", encoding="utf-8") as f:
            f.write(f"#!/bin/sh\nexec {unshare} --mount --propagation private --fork sh -c "
                    f"'mount -t tmpfs -o mode=1777 dotmon-nodecaps \"$TMPDIR\" && exec {setpriv} --reuid {APP_UID} "
                    f"--regid {APP_UID} --clear-groups {app_dir}/TestApp \"$@\"' sh \"$@\"\n")
        os.chmod(os.path.join(wrapper_dir, "TestApp"), 0o755)
        os.environ["DOTMON_TESTAPP_DIR"] = wrapper_dir
        app = App(tmpdir)
        pid = app.pid
        check(os.listdir(tmpdir) == [], f"the app's TMPDIR {tmpdir} is empty from outside its mount namespace")
        check(os.stat(f"/proc/{pid}").st_uid == APP_UID, f"the app (pid {pid}) runs as uid {APP_UID}")

        ok, st = real_dump(pid, tmpdir)
        check(ok and st is not None, "the runtime wrote a Mini dump in its TMPDIR (GenerateCoreDump2)")
        if st is not None:
            check(st.st_uid == APP_UID and (st.st_mode & 0o7777) == 0o600 and (st.st_mode & 0o170000) == 0o100000,
                  f"the dump is a regular file of uid {APP_UID}, mode 0600 (uid {st.st_uid}, mode {st.st_mode:o})")

        def all_ok(r):
            return all(r.get(s) == "ok" for s in STEPS) and "probe" not in r

        r = run_probe(setpriv, pid, tmpdir, 0, caps)
        check(all_ok(r), f"uid 0 with {'+'.join(caps)}: every step succeeds: {r}")
        for c in caps:
            fewer = [x for x in caps if x != c]
            r = run_probe(setpriv, pid, tmpdir, 0, fewer)
            check("probe" not in r and not all_ok(r), f"uid 0 without {c} ({'+'.join(fewer) or 'nothing'}): some step fails: {r}")
        r = run_probe(setpriv, pid, tmpdir, 0, [])
        check(r.get("environ") not in (None, "ok") and r.get("root_tmpdir") not in (None, "ok"),
              f"uid 0 with no capability: environ and the app's TMPDIR are refused: {r}")
        r = run_probe(setpriv, pid, tmpdir, OTHER_UID, caps, ambient=False)
        check(r.get("environ") not in (None, "ok") and r.get("root_tmpdir") not in (None, "ok"),
              f"uid {OTHER_UID} with {'+'.join(caps)} in the bounding set only (Kubernetes, non-root): refused: {r}")
        r = run_probe(setpriv, pid, tmpdir, APP_UID, [])
        check(all_ok(r), f"the app's own uid {APP_UID}, no capability: every step succeeds: {r}")
    finally:
        if app is not None:
            # unshare's child changes uid, which clears its parent-death signal: stop it by pid,
            # then let unshare reap it and exit.
            try:
                os.kill(app.pid, signal.SIGKILL)
                app.p.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
            app.kill()
        shutil.rmtree(work, ignore_errors=True)
    return verdict("node_caps")


if __name__ == "__main__":
    sys.exit(main())
