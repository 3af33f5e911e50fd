# SPDX-License-Identifier: MIT
"""Shared pieces of the Python end-to-end tests (tests/metrics, tests/logs, tests/ndjson, ...) and
of the Python benchmarks (bench/*.py): the real .NET test app driven over stdin, dotmon started and
stopped (alone, or with the app in a private folder: Watched), free ports, the SDK's root, a
check list, HTTP (http_get, fetch, get_json), waits on a condition (wait_for, settle,
wait_listed, wait_log: tests wait for what they need, never a fixed time), a memory cgroup to run
dotmon in (memory_cgroup, join_cgroup, remove_cgroup), and what tests read of a running dotmon:
its runtime sessions (runtime_sessions), a /proc/PID/status figure (status_kib) and whether it runs
under ASan (sanitized).

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
    from dmtest import FAILS, App, Watched, check, dotnet_root, free_port, start_dotmon, stop
"""

import email.message
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

FAILS = []
# Every wait below is this many times longer (slow machines; the C tests read the same variable).
MULT = int(os.environ.get("DOTMON_TEST_TIMEOUT_MULTIPLIER", "1") or 1)
# dotmon is a sanitizer build (tests/CMakeLists.txt sets DOTMON_SANITIZED): RSS figures are ASan's,
# so RSS bounds are not checked; ctest checks them in the normal build (label perf).
SANITIZED = bool(os.environ.get("DOTMON_SANITIZED"))


def check(cond, what):
    """Prints ok/FAIL for one check and records a failure; returns cond."""
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILS.append(what)
    return cond


def verdict(name):
    """The exit status of a test made of check() calls: prints how many failed (or that none did)
    under name, and returns 1 if any did, else 0 (for sys.exit)."""
    print(f"{name}: {len(FAILS)} check(s) failed" if FAILS else f"{name}: every check passed", flush=True)
    return 1 if FAILS else 0


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def start_dotmon(tmp, port, log, pids=(), timeout=30, args=(), key=None, env=None, metrics_port=None):
    """DOTMON_BIN collect --no-auth on 127.0.0.1:port without metrics (and args), TMPDIR=tmp,
    standard error to log; returns its Popen once /processes answers and lists every pid of pids.
    With key (what `dotmon generatekey --output machinejson` prints) authentication is on with that
    key instead of --no-auth; env adds environment variables. With metrics_port, continuous
    metrics are on (every process's metrics session) and the metrics URL is 127.0.0.1:metrics_port."""
    env = dict(os.environ, TMPDIR=tmp, **(env or {}))
    headers = {}
    if key is not None:
        env["DotnetMonitor_Authentication__MonitorApiKey__Subject"] = key["Subject"]
        env["DotnetMonitor_Authentication__MonitorApiKey__PublicKey"] = key["PublicKey"]
        headers["Authorization"] = key["AuthorizationHeader"]
    dm = subprocess.Popen([os.environ["DOTMON_BIN"], "collect", *(() if key else ("--no-auth",)), "--urls",
                           f"http://127.0.0.1:{port}",
                           *(("--metrics", "false") if metrics_port is None else
                             ("--metricUrls", f"http://127.0.0.1:{metrics_port}")), *args], stdout=subprocess.DEVNULL,
                          stderr=log, env=env)
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/processes", headers=headers)
            body = c.getresponse().read()
            c.close()
            if all(str(p).encode() in body for p in pids):
                return dm
        except OSError:
            pass
        time.sleep(0.2)
    stop(dm, 0)
    raise RuntimeError(f"dotmon did not list {list(pids)} on /processes within {timeout} s")


def stop(p, timeout=15):
    """SIGTERM to a process that still runs, SIGKILL if it has not ended after timeout seconds."""
    if p is None or p.poll() is not None:
        return
    p.terminate()
    try:
        p.wait(timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def runtime_sessions(port, started=False):
    """dotmon's gauge dotmon_runtime_sessions (the EventPipe sessions it holds in runtimes, asked
    for or running), or with started dotmon_runtime_sessions_started (those the runtime has
    acknowledged: events from then on are collected), from GET /metrics/dotmon on 127.0.0.1:port
    (dotmon's own families, there whether or not metrics are on; no token: --no-auth), or -1 when
    it cannot be read."""
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("GET", "/metrics/dotmon")
        body = c.getresponse().read().decode()
        c.close()
    except (OSError, http.client.HTTPException):
        return -1
    name = "dotmon_runtime_sessions_started" if started else "dotmon_runtime_sessions"
    m = re.search(rf"^{name} (\S+)", body, re.M)
    return int(float(m.group(1))) if m else -1


def wait_for(cond, seconds, every=0.1):
    """Polls cond() every `every` s until it is true, for up to seconds (times
    DOTMON_TEST_TIMEOUT_MULTIPLIER); returns whether it became true (cond() once more at the end)."""
    deadline = time.time() + seconds * MULT
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(every)
    return bool(cond())


def settle(fn, want, seconds=15, every=0.1):
    """Polls fn() until its value is want (or, when want is a function, until want(value) holds),
    for up to seconds (scaled); returns the last value."""
    done = want if callable(want) else (lambda v: v == want)
    deadline = time.time() + seconds * MULT
    v = fn()
    while not done(v) and time.time() < deadline:
        time.sleep(every)
        v = fn()
    return v


def fetch(url, method="GET", headers=None, data=None, timeout=30, token=None, dest=None):
    """One request with urllib (redirects are not followed by dotmon's answers anyway): (status,
    headers, body bytes); an HTTP error status is an answer like any other, and a connection that
    fails gives status 0, empty headers and the error text as the body. token adds the header
    Authorization: Bearer token; with dest, a 2xx body is written to the file dest as it comes and
    the number of bytes written stands for the body."""
    headers = dict(headers or {}, **({"Authorization": f"Bearer {token}"} if token else {}))
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            if dest is None:
                return r.status, r.headers, r.read()
            n = 0
            with open(dest, "wb") as f:
                for chunk in iter(lambda: r.read(1 << 16), b""):
                    f.write(chunk)
                    n += len(chunk)
            return r.status, r.headers, n
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()
    except (OSError, http.client.HTTPException) as e:
        return 0, email.message.Message(), str(e).encode()


def get_json(port, path, timeout=30):
    """GET path on 127.0.0.1:port: (status, the parsed JSON body or None)."""
    st, _, body = fetch(f"http://127.0.0.1:{port}{path}", timeout=timeout)
    try:
        return st, json.loads(body) if body else None
    except ValueError:
        return st, None


def wait_listed(port, pid, seconds=30):
    """True once dotmon's /processes on 127.0.0.1:port lists pid (within seconds, scaled)."""
    return wait_for(lambda: str(pid).encode() in fetch(f"http://127.0.0.1:{port}/processes", timeout=5)[2],
                    seconds, 0.2)


def http_request(port, path, method="GET", headers=None, body=None, timeout=60):
    """One request to 127.0.0.1:port on its own connection: (the response, read: status,
    getheader(), getheaders()), body bytes). A connection that fails raises OSError."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        return r, r.read()
    finally:
        c.close()


def http_get(port, path, headers=None, timeout=60):
    """GET path on 127.0.0.1:port: (status, Content-Type, body bytes)."""
    r, body = http_request(port, path, headers=headers, timeout=timeout)
    return r.status, r.getheader("Content-Type", ""), body


def http_try_get(port, path, timeout=60):
    """http_get, with status 0 and the error as the body when the connection fails (dotmon died)."""
    try:
        return http_get(port, path, timeout=timeout)
    except (OSError, http.client.HTTPException) as e:
        return 0, "", str(e).encode()


PROM_LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)( (-?\d+))?$')
PROM_PID = re.compile(r'(?:^|[{ ,])pid="(\d+)"')


def prom_by_pid(text):
    """A /metrics body read line by line: ({pid: {family: sample lines}} of the runtimes' lines
    (dotmon's own dotmon_* left out), the family names of its HELP lines, the lines that do not
    parse)."""
    by_pid, families, bad = {}, set(), []
    for line in text.splitlines():
        if line.startswith("# HELP "):
            families.add(line.split(" ")[2])
            continue
        if not line or line.startswith("#"):
            continue
        m = PROM_LINE.match(line)
        if not m:
            bad.append(line)
            continue
        p = PROM_PID.search(m.group(2) or "")
        if p and not m.group(1).startswith("dotmon_"):
            fams = by_pid.setdefault(p.group(1), {})
            fams[m.group(1)] = fams.get(m.group(1), 0) + 1
    return by_pid, families, bad


def close_log(log):
    """Closes dotmon's log (a w+ file; None is fine), first copying its last 4,000 characters to
    standard error when a check failed."""
    if log is None:
        return
    if FAILS:
        log.flush()
        log.seek(0)
        sys.stderr.write(log.read()[-4000:])
    log.close()


def wait_log(log, pattern, seconds):
    """The first match of the regular expression pattern in dotmon's log (an open file, flushed
    and read again by name) once it appears, within seconds (scaled); None if it never does."""
    found = []

    def seen():
        log.flush()
        with open(log.name) as f:
            m = re.search(pattern, f.read())
        if m:
            found.append(m)
        return m is not None

    return found[0] if wait_for(seen, seconds) else None


def memory_cgroup(prefix, limit, v1_only=False):
    """A memory cgroup PREFIX-PID limited to limit bytes (v1 under /sys/fs/cgroup/memory; else,
    unless v1_only, v2 under /sys/fs/cgroup) that a child process can enter: its path, or None
    (reason printed) when not root or no hierarchy allows it. remove_cgroup() removes it."""
    if os.geteuid() != 0:
        return None
    name = f"{prefix}-{os.getpid()}"
    v1 = "/sys/fs/cgroup/memory"
    if os.path.isdir(v1):
        path, limit_file = os.path.join(v1, name), "memory.limit_in_bytes"
    elif not v1_only and os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        path, limit_file = os.path.join("/sys/fs/cgroup", name), "memory.max"
    else:
        print("no memory cgroup hierarchy")
        return None
    try:
        os.mkdir(path)
    except OSError as e:
        print(f"no memory cgroup: {e}")
        return None
    try:
        with open(os.path.join(path, limit_file), "w") as f:
            f.write(str(limit))
        # A delegated hierarchy may refuse a process moving itself in.
        subprocess.run(["true"], preexec_fn=lambda: join_cgroup(path), check=True)
        return path
    except (OSError, subprocess.SubprocessError) as e:
        print(f"cannot use the memory cgroup: {e}")
    remove_cgroup(path)
    return None


def join_cgroup(path, pid=None):
    """Moves pid (default: this process; so a subprocess preexec_fn puts the child in before it
    execs) into the cgroup at path."""
    with open(os.path.join(path, "cgroup.procs"), "w") as f:
        f.write(str(os.getpid() if pid is None else pid))


def remove_cgroup(path):
    """Removes the (empty) cgroup at path, waiting up to 5 s for its last process to be reaped."""
    def removed():
        try:
            os.rmdir(path)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            return False

    if path is not None:
        wait_for(removed, 5)


def no_runtime_session(port, timeout=20):
    """True once dotmon holds no EventPipe session in any runtime (within timeout s, scaled)."""
    return wait_for(lambda: runtime_sessions(port) == 0, timeout, 0.2)


# A sanitizer's report in dotmon's log: ASan's and LSan's errors (LSan's at exit), any sanitizer's
# summary line, UBSan's "runtime error:".
SANITIZER_REPORT = re.compile(r"ERROR: \w+Sanitizer|SUMMARY: \w+Sanitizer|runtime error:")


def sanitizer_report(text):
    """The first sanitizer report in text (dotmon's log), or None."""
    m = SANITIZER_REPORT.search(text)
    return m.group(0) if m else None


def stop_clean(dm, log_path, what):
    """dotmon stopped cleanly: SIGTERM if it still runs, then exit status 0 within 15 s (under ASan:
    no leak) and no sanitizer report in its log (log_path)."""
    if dm is None:
        check(False, f"{what}: dotmon was started")
        return
    if dm.poll() is None:
        dm.terminate()
        try:
            dm.wait(15)
        except subprocess.TimeoutExpired:
            pass
    with open(log_path, errors="replace") as f:
        bad = sanitizer_report(f.read())
    check(dm.returncode == 0 and bad is None,
          f"{what}: dotmon stopped cleanly (status {dm.returncode}" + (f", {bad})" if bad else ")"))


def status_kib(pid, key="VmRSS"):
    """A figure in KiB of /proc/PID/status (VmRSS, VmHWM, ...), or 0 once the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def sanitized(pid):
    """True when the process has ASan's runtime mapped (a build-asan dotmon)."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            return "libasan" in f.read()
    except OSError:
        return False


def dotnet_root():
    if os.environ.get("DOTNET_ROOT"):
        return os.environ["DOTNET_ROOT"]
    exe = os.environ.get("DOTNET_EXE") or shutil.which("dotnet")
    return os.path.dirname(os.path.realpath(exe)) if exe else ""


def dotnet_tool(name, version):
    """Microsoft's .NET tool name (a NuGet tool package: dotnet-trace, dotnet-stack, ...) at
    version, in DOTMON_TOOLS_DIR (installed there the first time); its path, or None when it is
    not there and cannot be installed (no .NET SDK, offline)."""
    d = os.environ.get("DOTMON_TOOLS_DIR", "")
    exe = os.path.join(d, name)
    dotnet = os.environ.get("DOTNET_EXE") or shutil.which("dotnet")
    if d and not os.access(exe, os.X_OK) and dotnet:
        subprocess.run([dotnet, "tool", "install", "--tool-path", d, name, "--version", version],
                       capture_output=True, timeout=300)
    return exe if d and os.access(exe, os.X_OK) else None


class App:
    """tests/app's TestApp (DOTMON_TESTAPP_DIR) in TMPDIR=tmp, with extra arguments (env: variables
    to set, a value None removes one); waits for its "ready pid=N" line. command() sends one stdin
    command and returns its ok/error line. wrap: a command line that runs the app (its path and
    arguments follow wrap), e.g. unshare."""

    def __init__(self, tmp, *extra, env=None, wrap=()):
        env = dict(os.environ, TMPDIR=tmp, DOTNET_ROOT=dotnet_root(), **(env or {}))
        env = {k: v for k, v in env.items() if v is not None}
        self.p = subprocess.Popen([*wrap, os.path.join(os.environ["DOTMON_TESTAPP_DIR"], "TestApp"),
                                   "--no-stdin-exit", *extra],
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


class Watched:
    """A private TMPDIR (mode 0700) holding the test app (App with app_args) and dotmon watching
    it (start_dotmon on a free port, its standard error in TMPDIR/dotmon.log; env: variables for
    dotmon, or a function of TMPDIR returning them; metrics_port: continuous metrics on, served
    there): tmp, app, port, log, dm. close() kills the app, stops dotmon (SIGKILL after stop_timeout s), writes the log's
    tail to standard error when FAILS holds a failure, and removes the folder."""

    def __init__(self, prefix, app_args=(), timeout=30, stop_timeout=15, env=None, metrics_port=None):
        self.tmp = tempfile.mkdtemp(prefix=prefix)
        os.chmod(self.tmp, 0o700)
        self.app, self.dm, self.log, self.stop_timeout = None, None, None, stop_timeout
        self.port = free_port()
        try:
            self.app = App(self.tmp, *app_args)
            self.log = open(os.path.join(self.tmp, "dotmon.log"), "w+")
            self.dm = start_dotmon(self.tmp, self.port, self.log, [self.app.pid], timeout,
                                   env=env(self.tmp) if callable(env) else env, metrics_port=metrics_port)
        except BaseException:
            self.close()
            raise

    def close(self):
        if self.app is not None:
            self.app.kill()
        stop(self.dm, self.stop_timeout)
        close_log(self.log)
        shutil.rmtree(self.tmp, ignore_errors=True)
