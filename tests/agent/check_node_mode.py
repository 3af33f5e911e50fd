#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Issue 34, node mode (DiagnosticPort:ConnectionMode=Node, docs/ipc.md §6), end to end with the real
dotmon and two real TestApps, each pid 1 of its own pid and mount namespace with a private tmpfs
TMPDIR (unshare; one at /tmp, one at a folder of its own, so the TMPDIR of the app's environment is
followed):
  - dotmon, in the host's namespaces with its own TMPDIR, lists both with distinct host pids and
    nsPid 1 (/processes?extras=true);
  - a short trace and a Mini dump of each: the dump (an ELF core) was written in the app's private
    TMPDIR, read through /proc/<pid>/root, and is gone from there afterwards;
  - an app restarted in a new namespace is listed as a new instance (new uid), the old one leaves;
  - an impostor: a namespace whose pid 1 is `sleep` while another process there (pid 2) binds
    /tmp/dotnet-diagnostic-1-<key>-socket: the name and pid 1 match, but pid 1 holds no such
    socket, so it is never listed and its socket is never connected to;
  - swaps by the app's user after it is listed (docs/ipc.md §6.3): an app whose TMPDIR ends in "//"
    (the runtime's path keeps it) is found; its socket file is then replaced by a symlink to a
    decoy socket bound by the test in dotmon's file system, another app's TMPDIR folder by a
    symlink to a folder holding a decoy of its socket's name, and a third app's socket file by a
    decoy socket bound at its name: the three apps leave the list and no decoy ever receives a
    request (a symlink is never followed; a socket at the runtime's name that the runtime did not
    create may be connected to, and is closed before anything is sent);
  - a neighbour: another namespace sharing the network namespace (so /proc/net/unix) listens, several
    times, at the same path string as the first app's socket in its own /tmp, bound after the app's
    (listed first): the app is listed all the same and the neighbour is never connected to;
  - a socket that stops answering while its process lives (the name taken over by a socket bound
    but not listening, refused connects: the app leaves the list) is checked again: once the
    runtime's socket is back under its name, the same instance is listed again;
  - a flood: 4100 socket files named for a pid no process of the folder has, planted after the
    runtime's (a tmpfs lists the newest first), do not count against the walk's per-folder cap of
    4096 names: the app stays listed;
  - without the capability: dotmon as another uid with no capabilities (setpriv) lists neither
    app (root's), counts the processes it may not look into (/info?extras=true) and says so in an
    Error naming CAP_SYS_PTRACE.
Needs root, unshare and setpriv; exits 77 otherwise. Environment: DOTMON_BIN, DOTMON_TESTAPP_DIR.
"""

import os
import shutil
import socket
import subprocess
import sys
import socket
import struct
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from dmtest import (FAILS, App, check, close_log, fetch, free_port, get_json, start_dotmon,  # noqa: E402
                    stop, verdict, wait_for)

NS = ["unshare", "--fork", "--pid", "--mount", "--propagation", "private", "--kill-child", "--mount-proc"]
# A private tmpfs at the app's TMPDIR, then the app (its path and arguments follow) as pid 1.
APP_WRAP = [*NS, "sh", "-c", 'mount -t tmpfs -o mode=1777 tmpfs "$TMPDIR" && exec "$0" "$@"']
# argv: the path to listen at, how many listeners (each but the last unlinked after its bind: they
# stay in the network namespace's /proc/net/unix under that path string). The kernel lists a bound
# socket in the bucket of its file's inode number (mod 256), newest first: 320 files bound after
# the app's share its bucket, whatever its inode, so the neighbour's line comes before the app's.
IMPOSTOR = r"""
import os, select, socket, sys
path, count = sys.argv[1], int(sys.argv[2])
socks = []
for i in range(count):
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)
    s.listen(8)
    socks.append(s)
    if i + 1 < count:
        os.unlink(path)
print("bound", flush=True)
while True:
    for s in select.select(socks, [], [])[0]:  # 320 fds: below select's 1024
        c, _ = s.accept()
        print("connected", flush=True)
        c.close()
"""
# The app's TMPDIR is a folder inside its private tmpfs (BASE), so that it can be swapped.
SUB_WRAP = [*NS, "sh", "-c", 'mount -t tmpfs -o mode=1777 tmpfs "$BASE" && mkdir "$TMPDIR" && exec "$0" "$@"']
RESCAN_MS = 300
LIVENESS_MS = 300
UID = 4342  # the unprivileged dotmon's


def start_impostor(out, path, count):
    """A namespace whose pid 1 is `sleep` and whose pid 2 listens at path (count listeners)."""
    return subprocess.Popen([*NS, "sh", "-c",
                             'mount -t tmpfs tmpfs /tmp && { python3 -c "$1" "$2" "$3" & } && exec sleep 600',
                             "sh", IMPOSTOR, path, str(count)], stdout=out)


def refused_then_back(port, app, log):
    """The app's socket name held by a bound, not listening socket, then by the runtime's again."""
    folder = f"/proc/{app.host}/root{app.tmp}"
    name = [n for n in os.listdir(folder) if n.startswith("dotnet-diagnostic-1-")][0]
    uid = listed(port).get(app.host, {}).get("uid")
    os.link(f"{folder}/{name}", f"{folder}/kept")
    mute = socket.socket(socket.AF_UNIX)
    try:
        mute.bind(f"{folder}/mute")
        os.rename(f"{folder}/mute", f"{folder}/{name}")
        check(wait_for(lambda: app.host not in listed(port), 15),
              f"a refused socket: host pid {app.host} leaves the list")
        time.sleep(4 * RESCAN_MS / 1000)  # several walks, each may check it again (refused)
        check(app.host not in listed(port), f"still refused: host pid {app.host} is not listed")
        os.rename(f"{folder}/kept", f"{folder}/{name}")
        check(wait_for(lambda: listed(port).get(app.host, {}).get("uid") == uid, 20),
              f"the runtime's socket back: host pid {app.host} listed again, same instance ({uid})")
    finally:
        mute.close()


def flooded(port, app):
    """4100 planted names of another pid in the runtime's folder (listed before its own name by a
    tmpfs, newest first): the app stays listed through several walks."""
    folder = f"/proc/{app.host}/root{app.tmp}"
    uid = listed(port).get(app.host, {}).get("uid")
    for i in range(4100):
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(f"{folder}/dotnet-diagnostic-9999999-{i}-socket")
    time.sleep(4 * RESCAN_MS / 1000)
    check(listed(port).get(app.host, {}).get("uid") == uid,
          f"flood: host pid {app.host} still listed past 4100 planted names ({uid})")


def unshare_works():
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("setpriv") is None:
        return False
    r = subprocess.run([*NS, "sh", "-c", "mount -t tmpfs tmpfs /tmp"], capture_output=True)
    return r.returncode == 0


def ns_init(popen, seconds=10):
    """The host pid of the namespace's pid 1: unshare's child."""
    path = f"/proc/{popen.pid}/task/{popen.pid}/children"
    found = []

    def child():
        try:
            with open(path) as f:
                kids = f.read().split()
        except OSError:
            return False
        found[:] = kids
        return len(kids) == 1

    if not wait_for(child, seconds):
        raise RuntimeError(f"no namespace init under {popen.pid}")
    return int(found[0])


def start_app(tmp):
    app = App(tmp, wrap=APP_WRAP)
    app.host = ns_init(app.p)
    app.tmp = tmp
    return app


def listed(port):
    st, procs = get_json(port, "/processes?extras=true")
    return {p["pid"]: p for p in procs} if st == 200 and procs else {}


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def dumps_in(app):
    try:
        return [n for n in os.listdir(f"/proc/{app.host}/root{app.tmp}") if n.startswith("dotmon_")]
    except OSError as e:
        return [f"unreadable: {e}"]


def collect(port, app, label, log):
    st, _, body = fetch(f"http://127.0.0.1:{port}/trace?pid={app.host}&durationSeconds=2", timeout=60)
    check(st == 200 and body[:8] == b"Nettrace", f"{label}: /trace is a nettrace ({st}, {body[:16]!r})")
    st, _, body = fetch(f"http://127.0.0.1:{port}/dump?pid={app.host}&type=Mini", timeout=120)
    check(st == 200 and body[:4] == b"\x7fELF", f"{label}: the Mini dump is an ELF core ({st}, {body[:16]!r})")
    log.flush()
    log.seek(0)
    check(f"/proc/{app.host}/root{app.tmp}/dotmon_" in log.read(),
          f"{label}: the dump was read through /proc/{app.host}/root{app.tmp}")
    check(wait_for(lambda: dumps_in(app) == [], 10),
          f"{label}: no dump left in the app's private TMPDIR ({dumps_in(app)})")


class Decoy:
    """Unix sockets that dotmon (pid) must never talk to: counts the connections they accept from it
    and those that carried a request (another node-mode dotmon on the machine, e.g. a concurrent
    run, is not this test's)."""

    def __init__(self, pid):
        self.pid = pid
        self.accepts = 0
        self.requests = 0
        self.socks = []

    def bind(self, path):
        s = socket.socket(socket.AF_UNIX)
        s.bind(path)
        s.listen(8)
        self.socks.append(s)
        threading.Thread(target=self._serve, args=(s,), daemon=True).start()

    def _serve(self, s):
        while True:
            try:
                c, _ = s.accept()
            except OSError:
                return
            cred = c.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            if struct.unpack("3i", cred)[0] == self.pid:
                self.accepts += 1
                # dotmon may connect (the path is the runtime's) but must send nothing: the
                # listener is not the runtime's own process (SO_PEERCRED's pid).
                c.settimeout(1.0)
                try:
                    if c.recv(1):
                        self.requests += 1
                except OSError:
                    pass
            c.close()

    def close(self):
        for s in self.socks:
            s.close()


def app_sock(app, tmpdir):
    names = [n for n in os.listdir(f"/proc/{app.host}/root{tmpdir}") if n.startswith("dotnet-diagnostic-1-")]
    return names[0] if len(names) == 1 else None


def swaps(port, dm, real, slashed, sub, tmp):
    """The app's user swaps names after the app is listed: nothing is connected to through them."""
    decoy = Decoy(dm.pid)
    try:
        procs = listed(port)
        check(slashed.host in procs, f"the app with TMPDIR {slashed.tmp} is listed ({sorted(procs)})")
        check(sub.host in procs, f"the app with TMPDIR {sub.tmp} is listed ({sorted(procs)})")
        # Its socket file is moved away and another socket bound at its name (same owner).
        name = app_sock(real, real.tmp)
        where = f"/proc/{real.host}/root{real.tmp}/"
        os.rename(f"{where}{name}", f"{where}{name}.moved")
        decoy.bind(f"{where}{name}")
        # Its socket file becomes a symlink to a socket in dotmon's file system.
        name = app_sock(slashed, slashed.tmp)
        where = f"/proc/{slashed.host}/root{slashed.tmp}"
        decoy.bind(os.path.join(tmp, "decoy.sock"))
        os.rename(f"{where}/{name}", f"{where}/{name}.moved")
        os.symlink(os.path.join(tmp, "decoy.sock"), f"{where}/{name}")
        # Its TMPDIR folder becomes a symlink to a folder with a decoy of the socket's name.
        name = app_sock(sub, sub.tmp)
        os.mkdir(os.path.join(tmp, "decoys"))
        decoy.bind(os.path.join(tmp, "decoys", name))
        where = f"/proc/{sub.host}/root{sub.tmp}"
        os.rename(where, where + ".moved")
        os.symlink(os.path.join(tmp, "decoys"), where)
        gone = {real.host, slashed.host, sub.host}
        check(wait_for(lambda: not gone & set(listed(port)), 10),
              f"swapped: the three apps leave the list ({sorted(gone & set(listed(port)))})")
        time.sleep(4 * max(RESCAN_MS, LIVENESS_MS) / 1000)
        check(not gone & set(listed(port)), "swapped: none comes back")
        check(decoy.requests == 0, f"swapped: no decoy received a request ({decoy.requests}; "
                                   f"connections dotmon closed at once: {decoy.accepts})")
    finally:
        decoy.close()


def unprivileged(apps):
    """dotmon in node mode as UID without capabilities: a clear refusal, not a silent empty list."""
    tmp = tempfile.mkdtemp(prefix="dotmon-node-user-")
    os.chmod(tmp, 0o700)
    os.chown(tmp, UID, UID)
    port = free_port()
    dm = None
    try:
        with open(os.path.join(tmp, "dotmon.log"), "w+") as log:
            env = dict(os.environ, TMPDIR=tmp, HOME=tmp, DotnetMonitor_DiagnosticPort__ConnectionMode="Node",
                       DotnetMonitor_Timeouts__DiscoveryRescanMs=str(RESCAN_MS))
            dm = subprocess.Popen(["setpriv", f"--reuid={UID}", f"--regid={UID}", "--clear-groups",
                                   "--inh-caps=-all", "--bounding-set=-all", os.environ["DOTMON_BIN"], "collect",
                                   "--no-auth", "--urls", f"http://127.0.0.1:{port}", "--metrics", "false"],
                                  stdout=subprocess.DEVNULL, stderr=log, env=env)
            node = {}

            def denied():
                st, info = get_json(port, "/info?extras=true", timeout=5) if dm.poll() is None else (0, None)
                node.update((info or {}).get("node", {}))
                return node.get("processesDenied", 0) > 0

            check(wait_for(denied, 30), f"unprivileged: /info counts the processes it may not read ({node})")
            st, procs = get_json(port, "/processes", timeout=5)
            pids = [p["pid"] for p in procs or []]
            check(st == 200 and all(a.host not in pids for a in apps),
                  f"unprivileged: root's apps are not listed ({st}, {pids})")
            check(wait_for(lambda: "CAP_SYS_PTRACE" in read(log.name), 10),
                  "unprivileged: an Error names CAP_SYS_PTRACE")
            if FAILS:
                sys.stderr.write(read(log.name)[-3000:])
    finally:
        stop(dm)
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    if not unshare_works():
        print("skipped: needs root and unshare with pid and mount namespaces")
        return 77
    tmp = tempfile.mkdtemp(prefix="dotmon-node-")
    os.chmod(tmp, 0o700)
    apps, others, impostor, neighbour, dm = [], [], None, None, None
    log = open(os.path.join(tmp, "dotmon.log"), "w+")
    marker = os.path.join(tmp, "impostor.out")
    nmarker = os.path.join(tmp, "neighbour.out")
    try:
        with open(marker, "w") as out:
            impostor = start_impostor(out, "/tmp/dotnet-diagnostic-1-424242-socket", 1)
        fake = ns_init(impostor)
        check(wait_for(lambda: "bound" in read(marker), 10), "the impostor bound its socket")
        # Long enough that /proc/<pid>/root<TMPDIR>/<socket> exceeds sun_path (O_PATH connects).
        own = os.path.join(tmp, "a-private-tmpdir-long-enough-to-pass-sun-path")
        os.mkdir(own)
        apps.append(start_app("/tmp"))
        apps.append(start_app(own))
        socks = [n for n in os.listdir(f"/proc/{apps[1].host}/root{own}") if n.startswith("dotnet-diagnostic-1-")]
        check(len(socks) == 1 and len(f"/proc/{apps[1].host}/root{own}/{socks[0]}") >= 108,
              f"the second app's socket path through /proc does not fit sun_path ({socks})")
        first = [n for n in os.listdir(f"/proc/{apps[0].host}/root/tmp") if n.startswith("dotnet-diagnostic-1-")]
        check(len(first) == 1, f"the first app's socket ({first})")
        with open(nmarker, "w") as out:
            neighbour = start_impostor(out, f"/tmp/{first[0]}", 320)
        check(wait_for(lambda: "bound" in read(nmarker), 10), "the neighbour bound its sockets")
        # Apps whose names get swapped (swaps): TMPDIR with trailing slashes, and a TMPDIR folder.
        os.mkdir(os.path.join(tmp, "slashed"))
        others.append(start_app(os.path.join(tmp, "slashed") + "//"))
        base = os.path.join(tmp, "base")
        os.mkdir(base)
        sub = App(os.path.join(base, "sub"), env={"BASE": base}, wrap=SUB_WRAP)
        sub.host = ns_init(sub.p)
        sub.tmp = os.path.join(base, "sub")
        others.append(sub)
        for a in apps:
            check(a.pid == 1, f"the app is pid 1 in its namespace (said {a.pid}, host pid {a.host})")
        dmtmp = os.path.join(tmp, "dotmon")
        os.mkdir(dmtmp, 0o700)
        port = free_port()
        dm = start_dotmon(dmtmp, port, log, pids=[a.host for a in apps + others], timeout=60,
                          env={"DotnetMonitor_DiagnosticPort__ConnectionMode": "Node",
                               "DotnetMonitor_Timeouts__DiscoveryRescanMs": str(RESCAN_MS),
                               "DotnetMonitor_Timeouts__DiscoveryLivenessMs": str(LIVENESS_MS)})
        procs = listed(port)
        for a in apps:
            p = procs.get(a.host, {})
            check(p.get("nsPid") == 1 and p.get("hostPid") == a.host,
                  f"host pid {a.host} listed with nsPid 1 ({p})")
        check(len({procs.get(a.host, {}).get("uid") for a in apps}) == 2, "two distinct runtime uids")
        info = get_json(port, "/info?extras=true")[1] or {}
        check(info.get("node", {}).get("processesLooked", 0) > 0, f"/info tells the walk ({info.get('node')})")
        for i, a in enumerate(apps):
            collect(port, a, f"app {i} (host pid {a.host}, TMPDIR {a.tmp})", log)

        # Restarted in a new namespace: a new instance; the old one leaves the list.
        old = apps[0]
        old_uid = procs.get(old.host, {}).get("uid")
        old.kill()
        apps[0] = start_app("/tmp")
        new = apps[0]
        check(wait_for(lambda: new.host in listed(port) and old.host not in listed(port), 20),
              f"restart: {new.host} listed, {old.host} gone")
        p = listed(port).get(new.host, {})
        check(p.get("nsPid") == 1 and p.get("uid") not in (None, old_uid),
              f"restart: a new instance ({p}, old uid {old_uid})")

        refused_then_back(port, new, log)
        flooded(port, new)

        # The impostor: several walks later, still neither listed nor connected to.
        time.sleep(4 * RESCAN_MS / 1000)
        check(fake not in listed(port), f"the impostor's pid {fake} is not listed")
        check("connected" not in read(marker), "nobody connected to the impostor's socket")
        check("connected" not in read(nmarker), "nobody connected to the neighbour's sockets")
        swaps(port, dm, apps[0], others[0], others[1], tmp)
        unprivileged(apps)
    finally:
        for a in apps + others:
            a.kill()
        for p in (impostor, neighbour):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
        stop(dm)
        close_log(log)
        shutil.rmtree(tmp, ignore_errors=True)
    return verdict("node_mode")


if __name__ == "__main__":
    sys.exit(main())
