#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The examples of README.md and docs/*.md, run (issue 31): every ```sh block runs against a real
dotmon and a real .NET app, every ```json block parses, and every `settings` one loads through
`dotmon config show`. The README runs first, verbatim and in order, as a newcomer would paste it:
in a fresh HOME and a fresh copy of the repository, its `dotnet new console` app built and started
by its own blocks, `make run` run from the Makefile's own recipe (on the test's ports, with the
built binary: the recipe's prerequisites, which install packages and build, are not run). Then
every other file's sh blocks, each file in a fresh shell with DOTMON_TOKEN exported and the
README's app still running. Around them, what the walk-through promises: make run's token file
and printed lines, `hello` alone and the default process, /ui, and a clean stop on Ctrl-C.

What a fence's info string and the HTML comment on the line right before it mean (the shared
conventions; docs/contributing.md, "The examples of README.md and docs/"):

    ```sh      run with bash -e, after 52323/52325 (and any other 523NN) become the test's ports;
               a comment `# {…}` or `# […]` right after a command is the shape of that command's
               output (same JSON type and keys; values and `…` elisions are not compared); every
               curl must see a 2xx or 3xx status unless the marker says another one.
    ```json    parses as JSON; with `settings`, `dotmon config show` loads it with no error.
    <!-- example: skip (reason) -->   not run; the reason is required.
    <!-- example: background -->     (sh) started and kept running for the rest of the file.
    <!-- example: settings -->       (json) loaded as a settings file.
    <!-- example: status NNN -->     (sh) every curl in the block must see status NNN.

Modes: no argument runs everything (needs DOTMON_BIN and the .NET SDK); --self-test checks the
parser on a Markdown sample in this file (no dotmon, no .NET); --lint checks the markers of the
real files only (for .ci/run's house rules). A failure names file:line, the block, the command,
its output (cut) and what was expected.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from dmtest import FAILS, check, dotnet_root, fetch, free_port, wait_for  # noqa: E402

# The checkout (its Makefile's run target, its files for the newcomer's copy), and the one whose
# README.md and docs/ are run: the same, unless DOTMON_DOCS_ROOT names another (to try its docs).
SRC = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DOCS = os.path.realpath(os.environ.get("DOTMON_DOCS_ROOT") or SRC)
DOC_PORT, DOC_METRICS_PORT = "52323", "52325"
# Any other port 52300-52399 an example names (a second dotmon) gets a free port of its own too.
DOC_PORTS = re.compile(r"(?<![0-9])523[0-9][0-9](?![0-9])")
# Commands that need what a test does not have; a block using one must carry skip (reason).
NEEDS_OUTSIDE = re.compile(r"(^\s*|[;&|(]\s*|\$\(\s*)(kubectl|helm|kind|docker|podman|buildah|aws|az|gcloud)(?=\s|$)"
                           r"|\bmake (image|test|fuzz)", re.M)
RUN_LANGS = {"sh"}
SHELL_LIKE = {"bash", "shell", "zsh", "shell-session"}
MARKER = re.compile(r"^\s*<!--\s*example:\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^`\s]*)(.*)$")
# Top-level sections of dotmon's settings: a json block made of them is a settings example.
SETTINGS_SECTIONS = {"Urls", "Authentication", "CollectionRules", "CollectionRuleDefaults", "CorsConfiguration",
                     "DefaultProcess",
                     "DiagnosticPort", "Dump", "Egress", "GCDump", "GlobalCounter", "Kestrel", "Logging", "Memory",
                     "Metrics", "Operations", "RequestLimits", "Storage", "Templates", "Timeouts", "Trace"}
BLOCK_SECONDS = 120  # one block's limit (the walk-through's build on a loaded machine)
BACKGROUND_SECONDS = 120  # a background block's app listed (the walk-through's build included)


class Block:
    """One fenced block: file, line (the opening fence's, 1-based), lang (the info string's first
    word), marker ('' or skip/background/settings/status), arg (the marker's reason or status),
    text (the content, the fence's indentation removed) and first (the content's first line)."""

    def __init__(self, file, line, lang, marker, arg, text, first):
        self.file, self.line, self.lang, self.marker, self.arg = file, line, lang, marker, arg
        self.text, self.first = text, first

    def where(self):
        return f"{self.file}:{self.line}"


def parse_marker(body):
    """'skip (reason)' -> ('skip', reason); 'status 401' -> ('status', '401'); the others bare.
    Returns (kind, arg, problem or None)."""
    m = re.fullmatch(r"skip\s*\((.*)\)", body, re.S)
    if m:
        reason = m.group(1).strip()
        return "skip", reason, None if reason else "skip needs a reason: <!-- example: skip (why) -->"
    if body.startswith("skip"):
        return "skip", "", "skip needs a reason in parentheses: <!-- example: skip (why) -->"
    m = re.fullmatch(r"status\s+([1-5]\d\d)", body)
    if m:
        return "status", m.group(1), None
    if body in ("background", "settings"):
        return body, "", None
    return "", "", f"unknown example marker {body!r} (skip (reason), background, settings, status NNN)"


def parse_markdown(text, name):
    """The fenced blocks of a Markdown text and the problems of its markers: (blocks, problems),
    problems as 'file:line: what'."""
    blocks, problems = [], []
    lines = text.split("\n")
    i, pending = 0, None  # pending: (line number, kind, arg) of a marker waiting for its fence
    while i < len(lines):
        line = lines[i]
        mk = MARKER.match(line)
        fm = FENCE.match(line)
        if mk:
            if pending:
                problems.append(f"{name}:{pending[0]}: example marker not followed by a fence")
            kind, arg, problem = parse_marker(mk.group(1))
            if problem:
                problems.append(f"{name}:{i + 1}: {problem}")
            pending = (i + 1, kind, arg)
            i += 1
            continue
        if not fm:
            if pending and line.strip():
                problems.append(f"{name}:{pending[0]}: example marker not on the line right before a fence")
                pending = None
            i += 1
            continue
        indent, fence, lang = len(fm.group(1)), fm.group(2), fm.group(3).lower()
        start, body = i + 1, []
        i += 1
        closed = False
        while i < len(lines):
            cl = lines[i]
            if re.match(r"^\s*" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}\s*$", cl):
                closed = True
                i += 1
                break
            body.append(cl[indent:] if cl[:indent].strip() == "" else cl.lstrip())
            i += 1
        if not closed:
            problems.append(f"{name}:{start}: fence never closed")
        kind, arg = (pending[1], pending[2]) if pending else ("", "")
        if pending and pending[0] != start - 1:
            problems.append(f"{name}:{pending[0]}: example marker not on the line right before a fence")
            kind, arg = "", ""
        pending = None
        b = Block(name, start, lang, kind, arg, "\n".join(body) + "\n", start + 1)
        if lang in SHELL_LIKE:
            problems.append(f"{b.where()}: ```{lang} is neither run nor shown: use ```sh (run) or ```console (shown)")
        if kind in ("background", "status") and lang not in RUN_LANGS:
            problems.append(f"{b.where()}: marker {kind} applies to ```sh blocks only")
        if kind == "settings" and lang != "json":
            problems.append(f"{b.where()}: marker settings applies to ```json blocks only")
        if lang in RUN_LANGS and kind != "skip" and NEEDS_OUTSIDE.search("\n".join(body)):
            problems.append(f"{b.where()}: runs {NEEDS_OUTSIDE.search(chr(10).join(body)).group(0).strip(' ;&|($')!r}, "
                            "which a test cannot: <!-- example: skip (reason) -->")
        if lang == "json" and kind == "" and looks_like_settings(b.text):
            problems.append(f"{b.where()}: a json block of settings sections: mark it "
                            "<!-- example: settings --> (or skip (reason))")
        if kind == "skip" and lang not in RUN_LANGS | {"json"}:
            problems.append(f"{b.where()}: marker skip on a ```{lang or '(none)'} block, which is not run anyway")
        blocks.append(b)
    if pending:
        problems.append(f"{name}:{pending[0]}: example marker not followed by a fence")
    return blocks, problems


def looks_like_settings(text):
    try:
        v = json.loads(text)
    except ValueError:
        return False
    return isinstance(v, dict) and bool(v) and set(v) <= SETTINGS_SECTIONS | {"$schema"}


# ---- the shape of an expected output: JSON where `…` stands for anything (a value, more members)

ELIDED = object()
MORE = "\u2026"  # the key an object or list holds when `…` stood for more members or elements


class ShapeError(ValueError):
    pass


def parse_shape(s):
    """JSON with `…` elisions -> Python values: ELIDED for an elided value, and for an elided run of
    members or elements a dict key MORE / a trailing ELIDED list element."""
    pos = [0]

    def ws():
        while pos[0] < len(s) and s[pos[0]] in " \t\r\n":
            pos[0] += 1

    def peek():
        ws()
        return s[pos[0]] if pos[0] < len(s) else ""

    def expect(c):
        if peek() != c:
            raise ShapeError(f"expected {c!r} at {pos[0]} in {s[:80]!r}")
        pos[0] += 1

    def string():
        m = re.compile(r'"(?:[^"\\]|\\.)*"').match(s, pos[0])
        if not m:
            raise ShapeError(f"bad string at {pos[0]}")
        pos[0] = m.end()
        return json.loads(m.group(0))

    def members(is_obj):
        """The members of an object or the elements of a list, after its opening bracket."""
        out, close = ({}, "}") if is_obj else ([], "]")
        if peek() == close:
            pos[0] += 1
            return out
        while True:
            if is_obj and peek() == MORE:
                pos[0] += 1
                out[MORE] = True
            elif is_obj:
                k = string()
                expect(":")
                out[k] = value()
            else:
                out.append(value())
            if peek() != ",":
                expect(close)
                return out
            pos[0] += 1

    def value():
        c = peek()
        if c == MORE:
            pos[0] += 1
            return ELIDED
        if c in "{[":
            pos[0] += 1
            return members(c == "{")
        if c == '"':
            return string()
        m = re.compile(r"-?\d+(\.\d+)?([eE][-+]?\d+)?|true|false|null").match(s, pos[0])
        if not m:
            raise ShapeError(f"unexpected {s[pos[0]:pos[0] + 20]!r}")
        pos[0] = m.end()
        return json.loads(m.group(0))

    v = value()
    if peek():
        raise ShapeError(f"text after the value: {s[pos[0]:pos[0] + 20]!r}")
    return v


def compare_shape(want, got, path="$"):
    """The differences (a list of strings) between an expected shape and an actual JSON value:
    same type of container, same keys (unless `…` allows more); values are not compared."""
    if want is ELIDED:
        return []
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return [f"{path}: expected an object, got {type(got).__name__}"]
        out = []
        keys = [k for k in want if k != MORE]
        for k in keys:
            if k not in got:
                out.append(f"{path}: key {k!r} missing")
            else:
                out += compare_shape(want[k], got[k], f"{path}.{k}")
        if MORE not in want:
            extra = [k for k in got if k not in want]
            if extra:
                out.append(f"{path}: keys not in the example: {', '.join(map(repr, extra))}")
        return out
    if isinstance(want, list):
        if not isinstance(got, list):
            return [f"{path}: expected an array, got {type(got).__name__}"]
        elems = [w for w in want if w is not ELIDED]
        if elems and not got:
            return [f"{path}: expected at least {len(elems)} element(s), got an empty array"]
        out = []
        for i, g in enumerate(got):
            if elems:
                out += compare_shape(elems[min(i, len(elems) - 1)], g, f"{path}[{i}]")
        return out
    if isinstance(got, (dict, list)):
        return [f"{path}: expected a {type(want).__name__}, got {type(got).__name__}"]
    return []


def parse_output(text):
    """A command's output as JSON values: one document, or one per line (NDJSON, JSON sequences)."""
    text = text.replace("\x1e", "\n").strip()
    if not text:
        return []
    try:
        return [json.loads(text)]
    except ValueError:
        pass
    return [json.loads(line) for line in text.splitlines() if line.strip()]


# ---- a sh block's commands and their expected outputs

def complete(chunk):
    """Whether bash reads chunk as complete commands (bash -n: no 'unexpected end of file')."""
    r = subprocess.run(["bash", "-n"], input=chunk, capture_output=True, text=True)
    return "end of file" not in r.stderr and "unexpected EOF" not in r.stderr


def split_commands(text):
    """A sh block -> [(first line index, command text, shape text or None)]: whole commands (bash
    decides where one ends), each with the `# {…}`/`# […]` comment lines right after it."""
    lines = text.rstrip("\n").split("\n")
    cmds, i = [], 0
    while i < len(lines):
        if not lines[i].strip() or lines[i].lstrip().startswith("#"):
            i += 1
            continue
        start, chunk = i, lines[i]
        i += 1
        while not complete(chunk + "\n") and i < len(lines):
            chunk += "\n" + lines[i]
            i += 1
        shape = None
        if i < len(lines) and re.match(r"^\s*# [{\[]", lines[i]):
            parts = [lines[i].lstrip()[2:]]
            i += 1
            while not balanced(" ".join(parts)) and i < len(lines) and lines[i].lstrip().startswith("#"):
                parts.append(lines[i].lstrip()[1:])
                i += 1
            shape = " ".join(parts)
        cmds.append((start, chunk, shape))
    return cmds


def balanced(s):
    depth, in_str, esc = 0, False, False
    for c in s:
        if in_str:
            esc, in_str = (not esc and c == "\\"), in_str and (esc or c != '"')
        elif c == '"':
            in_str = True
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
    return depth <= 0


def instrument(text):
    """The block as run: every command with an expected shape has its standard output kept in
    "$__dm_out/N" (and shown). Returns (script, [(N, first line index, command, shape)])."""
    cmds = split_commands(text)
    lines = text.rstrip("\n").split("\n")
    out, shaped, at = [], [], 0
    for n, (start, cmd, shape) in enumerate(cmds):
        out.extend(lines[at:start])
        ncmd = cmd.count("\n") + 1
        if shape is None:
            out.append(cmd)
        else:
            out.append("{ " + cmd + "\n} >\"$__dm_out/" + str(n) + "\"; cat \"$__dm_out/" + str(n) + "\"")
            shaped.append((n, start, cmd, shape))
        at = start + ncmd
    out.extend(lines[at:])
    return "\n".join(out) + "\n", shaped


# ---- running blocks

# Defined in every block's shell: `make run` starts dotmon as the Makefile's run target does (its
# recipe only; no prerequisite) on the test's ports and waits until it answers; any other make
# target is refused. curl reports each transfer's status on standard error for the status check.
SHELL_PRELUDE = r'''
make() {
  if [ "$*" != run ]; then echo "check_docs: 'make $*' is not run by the examples test: mark the block skip (reason)" >&2; return 97; fi
  setsid bash -c "$__dm_make_run" >"$__dm_state/make-run.out" 2>"$__dm_state/make-run.err" </dev/null &
  echo $! >"$__dm_state/make-run.pid"
  local i
  for i in $(seq 1 $(( 300 * ${DOTMON_TEST_TIMEOUT_MULTIPLIER:-1} ))); do
    command curl -s -o /dev/null "http://127.0.0.1:$__dm_port/info" && { cat "$__dm_state/make-run.out"; return 0; }
    kill -0 "$(cat "$__dm_state/make-run.pid")" 2>/dev/null || break
    sleep 0.1
  done
  echo "check_docs: make run: dotmon did not answer on port $__dm_port" >&2; cat "$__dm_state/make-run.err" >&2; return 1
}
curl() { command curl -w '%{stderr}__dm_status %{http_code}\n' "$@"; }
export -f make curl
'''

# Variables of bash itself, not carried from one block to the next.
BASH_OWN = re.compile(r"^(BASH\w*|FUNCNAME|PIPESTATUS|_|SHLVL|PWD|OLDPWD|SHELLOPTS|BASHOPTS|EUID|UID|PPID|"
                      r"HOSTNAME|HOSTTYPE|MACHTYPE|OSTYPE|GROUPS|DIRSTACK|LINENO|RANDOM|SRANDOM|SECONDS|"
                      r"EPOCH\w*|COLUMNS|LINES|HISTCMD|COMP_\w*|OPTIND|OPTARG|OPTERR|IFS|PS\d|__dm_\w*)$")


BASH_OWN_ERE = BASH_OWN.pattern.replace("\\w", "[A-Za-z0-9_]").replace("\\d", "[0-9]")


class Session:
    """One file's shell state: each block runs in its own bash -e, starting from the variables and
    folder the previous block of the file left (as pasting them into one terminal would)."""

    def __init__(self, ctx, name, cwd):
        self.ctx, self.name = ctx, name
        self.dir = tempfile.mkdtemp(prefix="sess-", dir=ctx.tmp)
        self.vars = os.path.join(self.dir, "vars.sh")
        self.cwdf = os.path.join(self.dir, "cwd")
        with open(self.vars, "w") as f:
            f.write("")
        with open(self.cwdf, "w") as f:
            f.write(cwd)
        self.background = []

    def script(self, body):
        save = ("__dm_save() { local __dm_n; for __dm_n in $(compgen -v); do [[ $__dm_n =~ " + BASH_OWN_ERE +
                " ]] || declare -p \"$__dm_n\" 2>/dev/null; done >\"$__dm_sess/vars.sh.new\"; "
                "mv \"$__dm_sess/vars.sh.new\" \"$__dm_sess/vars.sh\"; pwd >\"$__dm_sess/cwd\"; }\n")
        return (SHELL_PRELUDE + f'__dm_sess={sh_quote(self.dir)}\n' + save +
                f'. {sh_quote(self.vars)} 2>/dev/null\ncd "$(cat {sh_quote(self.cwdf)})"\n'
                "trap '__dm_save' EXIT\nset -e\n" + body)

    def run(self, block, body, background=False):
        """Runs one block's (instrumented) body; returns (rc, stdout, stderr) or, in the background,
        the Popen."""
        path = os.path.join(self.dir, f"block-{block.line}.sh")
        with open(path, "w") as f:
            f.write(self.script(body))
        outp, errp = path + ".out", path + ".err"
        with open(outp, "w") as out, open(errp, "w") as err:
            p = subprocess.Popen(["bash", path], stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=self.ctx.tmp,
                                 env=self.ctx.env, start_new_session=True)
        if background:
            p.outp, p.errp = outp, errp
            self.background.append(p)
            return p
        try:
            rc = p.wait(BLOCK_SECONDS * self.ctx.mult)
        except subprocess.TimeoutExpired:
            rc = "timeout"
        kill_group(p)
        return rc, read(outp), read(errp)

    def close(self):
        for p in self.background:
            kill_group(p)


def kill_group(p):
    """SIGKILL to what a block left running in its process group (its own jobs)."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        pass


def read(path, limit=None):
    try:
        with open(path, errors="replace") as f:
            s = f.read()
    except OSError:
        return ""
    return s if limit is None else s[-limit:]


def sh_quote(s):
    return "'" + s.replace("'", "'\\''") + "'"


def cut(s, n=1500):
    s = s.strip("\n")
    return s if len(s) <= n else s[:n // 2] + f"\n[… {len(s) - n} characters cut …]\n" + s[-n // 2:]


def statuses(stderr):
    return re.findall(r"__dm_status (\d{3})$", stderr, re.M)


PROGRESS = re.compile(r"^\s*(% Total|Dload|[\d.:kMG -]+$)")


def clean_err(stderr):
    """Standard error without the status lines and curl's progress meter."""
    return "\n".join(line for line in stderr.splitlines()
                     if "__dm_status " not in line and not PROGRESS.match(line))


def fail_block(block, what, cmd=None, out="", err=""):
    msg = f"{block.where()}: {what}"
    detail = [f"--- block ({block.lang}, line {block.line}):", cut(block.text, 1200)]
    if cmd:
        detail += ["--- command:", cmd]
    if out.strip():
        detail += ["--- output:", cut(out)]
    if err.strip():
        detail += ["--- standard error:", cut(err)]
    print("\n".join(detail), flush=True)
    check(False, msg)


class Context:
    """The test's world: a private TMPDIR (the apps' diagnostic sockets, dotmon's), a fresh HOME,
    a copy of the repository (the newcomer's clone) with build/ pointing at the built dotmon, and
    the test's own ports."""

    def __init__(self):
        self.mult = int(os.environ.get("DOTMON_TEST_TIMEOUT_MULTIPLIER", "1") or 1)
        self.tmp = tempfile.mkdtemp(prefix="dotmon-docs-")
        os.chmod(self.tmp, 0o700)
        self.home = os.path.join(self.tmp, "home")
        os.mkdir(self.home)
        self.clone = os.path.join(self.tmp, "dotmon")
        copy_tracked(SRC, self.clone)
        bin_dir = os.path.dirname(os.path.realpath(os.environ["DOTMON_BIN"]))
        if not os.path.exists(os.path.join(self.clone, "build")):
            os.symlink(bin_dir, os.path.join(self.clone, "build"))
        self.port, self.mport = str(free_port()), str(free_port())
        self.extra_ports = {}
        self.state = os.path.join(self.tmp, "state")
        os.mkdir(self.state)
        path = os.environ.get("PATH", "/usr/bin:/bin")
        dn = os.environ.get("DOTNET_EXE") or shutil.which("dotnet")
        if dn and os.path.dirname(dn) not in path.split(":"):
            path = os.path.dirname(dn) + ":" + path
        keep = ("LANG", "LC_ALL", "TERM", "USER", "LOGNAME", "DOTMON_TEST_TIMEOUT_MULTIPLIER", "ASAN_OPTIONS",
                "UBSAN_OPTIONS", "NUGET_CERT_REVOCATION_MODE")
        self.env = {k: os.environ[k] for k in keep if k in os.environ}
        self.env.update(HOME=self.home, TMPDIR=self.tmp, PATH=path, DOTNET_CLI_TELEMETRY_OPTOUT="1",
                        DOTNET_NOLOGO="1", __dm_port=self.port, __dm_state=self.state,
                        __dm_make_run=make_run_command(bin_dir, self.port, self.mport))
        if dotnet_root():
            self.env["DOTNET_ROOT"] = dotnet_root()

    def ports(self, text):
        """The text with the examples' ports replaced by the test's: 52323 and 52325 by dotmon's
        (make run), any other 523NN by one free port each."""
        def one(m):
            if m.group(0) == DOC_PORT:
                return self.port
            if m.group(0) == DOC_METRICS_PORT:
                return self.mport
            return self.extra_ports.setdefault(m.group(0), str(free_port()))
        return DOC_PORTS.sub(one, text)

    def token(self):
        """DOTMON_TOKEN once the README exported it; before, the token file make run writes."""
        token_file = os.path.join(self.home, ".local", "state", "dotmon", "token")
        return self.env.get("DOTMON_TOKEN") or read(token_file).strip()

    def dotmon_pid(self):
        try:
            return int(read(os.path.join(self.state, "make-run.pid")).strip())
        except ValueError:
            return None

    def processes(self):
        st, _, body = fetch(f"http://127.0.0.1:{self.port}/processes", token=self.token() or None, timeout=5)
        try:
            return json.loads(body) if st == 200 else None
        except ValueError:
            return None

    def cleanup(self):
        """Stops dotmon (make run) with SIGINT, as the README's Ctrl-C does, and checks that it
        ended cleanly (sanitizer reports included) and took its token file away, then kills every .NET runtime whose diagnostic socket is in
        the test's TMPDIR (the apps, and the SDK's build servers)."""
        pid = self.dotmon_pid()
        if pid:
            group = descendants(pid)
            try:
                os.killpg(pid, signal.SIGINT)
            except (ProcessLookupError, PermissionError):
                pass
            gone = wait_for(lambda: not any(os.path.exists(f"/proc/{p}") and not zombie(p) for p in group), 15)
            check(gone, "dotmon (make run) stopped within 15 s of Ctrl-C (SIGINT)")
            token = os.path.join(self.home, ".local", "state", "dotmon", "token")
            check(not gone or not os.path.exists(token), "dotmon removed its token file when it stopped")
            err = read(os.path.join(self.state, "make-run.err"))
            report = re.search(r"(ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:).*", err)
            check(report is None, f"dotmon's log has no sanitizer report ({report.group(0) if report else ''})")
            if not gone:
                os.killpg(pid, signal.SIGKILL)
        for pid in runtimes(self.tmp):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def zombie(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def runtimes(tmp):
    """Pids of the .NET runtimes whose diagnostic socket is in the folder tmp."""
    out = set()
    for f in os.listdir(tmp):
        m = re.match(r"dotnet-diagnostic-(\d+)-", f)
        if m and os.path.exists(f"/proc/{m.group(1)}"):
            out.add(int(m.group(1)))
    return sorted(out)


def copy_tracked(src, dst):
    """The files git tracks in src, as they are in its work tree (edits not yet committed included):
    the newcomer's fresh clone."""
    files = subprocess.run(["git", "-C", src, "ls-files", "-z"], capture_output=True, check=True).stdout
    for rel in files.decode().split("\0"):
        if not rel or not os.path.lexists(os.path.join(src, rel)):
            continue
        os.makedirs(os.path.dirname(os.path.join(dst, rel)), exist_ok=True)
        shutil.copy2(os.path.join(src, rel), os.path.join(dst, rel), follow_symlinks=False)


def make_run_command(bin_dir, port, mport):
    """The Makefile's `run` recipe as a command: make itself runs it (-o build-bin: the binary is
    there, nothing is installed or built) with BUILD at the built dotmon's folder and URLS on the
    test's port; the metrics URL moves to the test's other port through dotmon's settings variables
    (the recipe does not name it)."""
    rel = os.path.relpath(bin_dir, SRC)
    return (f"export DotnetMonitor_Metrics__Endpoints=http://127.0.0.1:{mport}; "
            f"exec make -s -C {sh_quote(SRC)} -o build-bin run BUILD={sh_quote(rel)} "
            f"URLS=http://127.0.0.1:{port}")


def descendants(pid):
    """pid and every process below it (from /proc)."""
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        out.add(p)
        todo += children.get(p, [])
    return out


def is_app(pid):
    """A runtime that is not the SDK's own (dotnet build, MSBuild nodes, the compiler server)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().decode(errors="replace").split("\0")
    except OSError:
        return False
    if "/sdk/" in " ".join(argv):
        return False
    if os.path.basename(argv[0]) == "dotnet" and (len(argv) < 2 or not argv[1].endswith(".dll")):
        return False
    return True


def answers(port):
    try:
        socket.create_connection(("127.0.0.1", int(port)), timeout=1).close()
        return True
    except OSError:
        return False


def wait_background(ctx, block, p):
    """After a background block starts: the .NET app it runs is up (listed by dotmon when dotmon
    runs), and a second dotmon it starts answers on its own port (an example's 523NN other than
    52323 and 52325; such a block may start no app: 10 s after its ports answer it is ready), or
    the block ended with status 0 (it started something that stays: dotmon)."""
    found, since = [], []
    own = [ctx.extra_ports[x] for x in ctx.extra_ports if x in block.text]

    def ready():
        if p.poll() is not None:
            return True
        if own and not all(answers(port) for port in own):
            return False
        if own and not since:
            since.append(time.time())
        apps = [pid for pid in runtimes(ctx.tmp) if pid in descendants(p.pid) and is_app(pid)]
        if apps and ctx.dotmon_pid() and ctx.token():
            listed = ctx.processes() or []
            apps = [pid for pid in apps if any(x.get("pid") == pid for x in listed)]
        if apps or (own and time.time() - since[0] > 10 * ctx.mult):
            found.extend([f"dotmon on port {port}" for port in own] + apps)
            return True
        return False

    wait_for(ready, BACKGROUND_SECONDS, 0.25)
    if found:
        print(f"ok   {block.where()}: background block runs {found}", flush=True)
        return
    if p.poll() == 0:
        print(f"ok   {block.where()}: background block ended (status 0)", flush=True)
        return
    what = (f"background block ended with status {p.returncode}" if p.poll() is not None else
            f"background block started no .NET app that dotmon lists within {BACKGROUND_SECONDS} s")
    fail_block(block, what, out=read(p.outp), err=clean_err(read(p.errp)))


def settle_listed(ctx, pids):
    """After a file's background blocks are stopped: dotmon lists the README's processes again,
    and only them (within 15 s), so the next file starts from the same state."""
    def same():
        return sorted(x.get("pid") for x in (ctx.processes() or [])) == pids
    check(wait_for(same, 15, 0.2), f"dotmon lists only the README's processes again ({pids})")


def run_sh(ctx, sess, block):
    body, shaped = instrument(ctx.ports(block.text))
    if block.marker == "background":
        p = sess.run(block, body, background=True)
        wait_background(ctx, block, p)
        return
    outdir = os.path.join(sess.dir, f"out-{block.line}")
    os.mkdir(outdir)
    t0 = time.time()
    rc, out, err = sess.run(block, f"__dm_out={sh_quote(outdir)}\n" + body)
    secs = time.time() - t0
    TIMES.append((secs, block.where()))
    if rc != 0:
        fail_block(block, f"exited with status {rc} (expected 0)", out=out, err=clean_err(err))
        return
    bad = False
    want = block.arg if block.marker == "status" else None
    for code in statuses(err):
        ok = code == want if want else code.startswith(("2", "3"))
        if not ok:
            fail_block(block, f"a curl saw HTTP status {code}, expected {want or '2xx/3xx'}"
                       f"{'' if want else ' (a block answering an error says so: <!-- example: status NNN -->)'}",
                       out=out, err=clean_err(err))
            bad = True
            break
    if want and not statuses(err):
        fail_block(block, f"marker status {want}, but no curl reported a status", out=out, err=clean_err(err))
        bad = True
    for n, start, cmd, shape in shaped:
        got = read(os.path.join(outdir, str(n)))
        try:
            want_shape = parse_shape(shape)
        except ShapeError as e:
            fail_block(block, f"line {block.first + start}: the expected output does not parse ({e})", cmd, got)
            bad = True
            continue
        try:
            values = parse_output(got)
        except ValueError:
            fail_block(block, f"line {block.first + start}: the output is not JSON; expected {cut(shape, 200)}", cmd,
                       got)
            bad = True
            continue
        if not values:
            fail_block(block, f"line {block.first + start}: no output; expected {cut(shape, 200)}", cmd, got)
            bad = True
            continue
        diffs = compare_shape(want_shape, values[0])
        if diffs:
            fail_block(block, f"line {block.first + start}: output's shape differs from the example: "
                       + "; ".join(diffs[:6]), cmd, got)
            bad = True
    if not bad:
        checked = f", {len(shaped)} output(s) checked" if shaped else ""
        print(f"ok   {block.where()}: sh ran ({secs:.1f} s{checked})", flush=True)


TIMES = []  # (seconds, file:line) of each sh block run


def run_json(ctx, block):
    try:
        json.loads(block.text)
    except ValueError as e:
        fail_block(block, f"does not parse as JSON: {e}")
        return
    if block.marker != "settings":
        check(True, f"{block.where()}: json parses")
        return
    path = os.path.join(ctx.tmp, f"settings-{os.path.basename(block.file)}-{block.line}.json")
    with open(path, "w") as f:
        f.write(block.text)
    env = {k: v for k, v in ctx.env.items() if not k.startswith("__dm_")}
    r = subprocess.run([os.environ["DOTMON_BIN"], "config", "show", "--configuration-file-path", path],
                       capture_output=True, text=True, env=env, timeout=60 * ctx.mult)
    errors = [line for line in r.stderr.splitlines() if re.search(r"\berror\b", line, re.I)]
    if r.returncode != 0 or errors:
        fail_block(block, f"dotmon config show exited {r.returncode} (expected 0 and no error)",
                   "dotmon config show --configuration-file-path FILE", r.stdout, r.stderr)
    else:
        check(True, f"{block.where()}: settings load (dotmon config show)")


def export_token(ctx, sess):
    """DOTMON_TOKEN as the README's shell left it (the next files' shells start with it)."""
    vars_sh = read(sess.vars)
    m = re.search(r"^declare -[-a-zA-Z]* DOTMON_TOKEN=\"([^\"]*)\"", vars_sh, re.M)
    if m and m.group(1):
        ctx.env["DOTMON_TOKEN"] = m.group(1)
        return True
    return False


def check_token_file(ctx):
    """Once `make run` has started: its token file ~/.local/state/dotmon/token (in the test's
    HOME), mode 0600 in a folder 0700, holding the bare token dotmon accepts."""
    folder = os.path.join(ctx.home, ".local", "state", "dotmon")
    path = os.path.join(folder, "token")
    if not check(os.path.exists(path), "make run wrote its token file ~/.local/state/dotmon/token"):
        return
    check(os.stat(path).st_mode & 0o777 == 0o600, "make run's token file is mode 0600")
    check(os.stat(folder).st_mode & 0o777 == 0o700, "make run's token folder is mode 0700")
    st, _, _ = fetch(f"http://127.0.0.1:{ctx.port}/processes", token=read(path).strip(), timeout=10)
    check(st == 200, f"the token file's token is accepted (GET /processes: {st})")


def check_printed(ctx, blocks):
    """The lines the README shows as make run's output (a ```text block opening with "dotmon on
    http") are what make run printed (the token file's folder and the ports aside)."""
    shown = [b for b in blocks if b.lang in ("text", "console") and b.text.startswith("dotmon on http")]
    if not shown:
        return

    def norm(t):
        return re.sub(r"(?<![~\w])/\S*(/\.local/state/dotmon/token)", r"HOME\1", t)
    printed = set(norm(read(os.path.join(ctx.state, "make-run.out"))).splitlines())
    missing = [line for line in norm(ctx.ports(shown[0].text)).splitlines() if line.strip() and line not in printed]
    if missing:
        fail_block(shown[0], "make run did not print these lines: " + " | ".join(missing),
                   out=read(os.path.join(ctx.state, "make-run.out")))
    else:
        check(True, f"{shown[0].where()}: make run printed what the README shows")


def run_file(ctx, name, blocks, sess):
    for b in blocks:
        if b.marker == "skip":
            print(f"skip {b.where()}: {b.arg}", flush=True)
            continue
        if b.lang == "json":
            run_json(ctx, b)
        elif b.lang in RUN_LANGS:
            had_dotmon = ctx.dotmon_pid() is not None
            run_sh(ctx, sess, b)
            if not had_dotmon and ctx.dotmon_pid() is not None:
                check_token_file(ctx)
                check_printed(ctx, blocks)


def doc_files(root=DOCS):
    docs = os.path.join(root, "docs")
    names = sorted(f for f in os.listdir(docs) if f.endswith(".md"))
    return ["README.md"] + [f"docs/{f}" for f in names]


def load_all(root=DOCS):
    files, problems = [], []
    for name in doc_files(root):
        with open(os.path.join(root, name), encoding="utf-8") as f:
            blocks, probs = parse_markdown(f.read(), name)
        files.append((name, blocks))
        problems += probs
    return files, problems


def counts(files):
    c = {"sh run": 0, "sh background": 0, "sh skipped": 0, "json": 0, "json settings": 0, "json skipped": 0}
    for _, blocks in files:
        for b in blocks:
            if b.lang in RUN_LANGS:
                kind = {"skip": "sh skipped", "background": "sh background"}.get(b.marker, "sh run")
                c[kind] += 1
            elif b.lang == "json":
                c["json skipped" if b.marker == "skip" else "json settings" if b.marker == "settings" else "json"] += 1
    return c


def lint(root=DOCS):
    files, problems = load_all(root)
    for p in problems:
        print(p)
    print("examples: " + ", ".join(f"{k} {v}" for k, v in counts(files).items()))
    return 1 if problems else 0


def main():
    if not os.environ.get("DOTMON_BIN"):
        print("DOTMON_BIN is not set (run through ctest)")
        return 1
    if not (os.environ.get("DOTNET_EXE") or shutil.which("dotnet")):
        print("skipped: no .NET SDK")
        return 77
    t0 = time.time()
    files, problems = load_all()
    for p in problems:
        check(False, p)
    print("examples: " + ", ".join(f"{k} {v}" for k, v in counts(files).items()), flush=True)
    ctx = Context()
    sessions = []
    try:
        for name, blocks in files:
            sess = Session(ctx, name, ctx.clone)
            sessions.append(sess)
            run_file(ctx, name, blocks, sess)
            if name == "README.md":
                export_token(ctx, sess)
                check(bool(ctx.token()), "the README's shell exported DOTMON_TOKEN")
                st, hdrs, _ = fetch(f"http://127.0.0.1:{ctx.port}/ui", timeout=10)
                check(st == 200 and "text/html" in hdrs.get("Content-Type", ""),
                      f"the README's /ui page answers (GET /ui: {st} {hdrs.get('Content-Type', '')})")
                listed = ctx.processes() or []
                # As a newcomer's would: the app alone, the default process (the SDK's build
                # servers, .NET processes too, would be listed beside it and leave no default).
                readme_pids = sorted(x.get("pid") for x in listed)
                check([(x.get("name"), x.get("isDefault")) for x in listed] == [("hello", True)],
                      f"after README.md dotmon lists the app `hello` alone, as the default process "
                      f"(lists {[(x.get('name'), x.get('isDefault')) for x in listed]})")
            else:
                if sess.background:
                    sess.close()
                    settle_listed(ctx, readme_pids)
    finally:
        for s in sessions:
            s.close()
        ctx.cleanup()
        if not FAILS:
            shutil.rmtree(ctx.tmp, ignore_errors=True)
        else:
            print(f"(the test's folder is kept: {ctx.tmp}; dotmon's log: state/make-run.err)")
    slow = ", ".join(f"{w} {t:.1f} s" for t, w in sorted(TIMES, reverse=True)[:5])
    print(f"examples test: {time.time() - t0:.1f} s, {len(FAILS)} failure(s); slowest blocks: {slow}")
    return 1 if FAILS else 0


# ---- --self-test: the parser on a sample

SAMPLE = '''# Sample

```sh
curl -H "Authorization: Bearer $DOTMON_TOKEN" http://127.0.0.1:52323/processes
# [{"pid":1,"uid":"…","name":"hello",…}]
x=$(echo '{"a":
1}')   # a command over two lines
echo "$x"
# {"a":1}
```

<!-- example: skip (needs a Kubernetes cluster) -->
```sh
kubectl apply -f pod.yaml
```

<!-- example: settings -->
```json
{"Egress": {}}
```

<!-- example: skip () -->
```sh
true
```

<!-- example: status 401 -->
```json
{}
```

<!-- example: wibble -->
```text
x
```

<!-- example: background -->

```sh
./out/hello
```

  ```sh
  echo indented
  ```

```bash
echo no
```

```sh
x=1; kubectl get pods
```

```json
{"Egress": {}}
```
'''


def self_test():
    blocks, problems = parse_markdown(SAMPLE, "sample.md")
    check([b.lang for b in blocks] == ["sh", "sh", "json", "sh", "json", "text", "sh", "sh", "bash", "sh", "json"],
          f"fences and their languages ({[b.lang for b in blocks]})")
    check((blocks[0].line, blocks[0].first) == (3, 4), f"line numbers ({blocks[0].line}, {blocks[0].first})")
    check((blocks[1].marker, blocks[1].arg) == ("skip", "needs a Kubernetes cluster"), "skip and its reason")
    check(blocks[2].marker == "settings", "settings marker")
    check(blocks[6].marker == "", "a marker separated from its fence by a blank line does not apply")
    check(blocks[7].text == "echo indented\n", f"an indented fence's content ({blocks[7].text!r})")
    want = {"sample.md:22: skip needs a reason: <!-- example: skip (why) -->",
            "sample.md:28: marker status applies to ```sh blocks only",
            "sample.md:32: unknown example marker 'wibble' (skip (reason), background, settings, status NNN)",
            "sample.md:37: example marker not on the line right before a fence",
            "sample.md:47: ```bash is neither run nor shown: use ```sh (run) or ```console (shown)",
            "sample.md:51: runs 'kubectl', which a test cannot: <!-- example: skip (reason) -->",
            "sample.md:55: a json block of settings sections: mark it <!-- example: settings --> (or skip (reason))"}
    check(set(problems) == want, f"marker problems: {sorted(set(problems) ^ want)} differ")
    cmds = split_commands(blocks[0].text)
    check(len(cmds) == 3, f"three commands in the first block ({len(cmds)})")
    check(cmds[1][1].count("\n") == 1 and cmds[1][2] is None, "a command over two lines is one command")
    check(cmds[0][2] == '[{"pid":1,"uid":"…","name":"hello",…}]' and cmds[2][2] == '{"a":1}',
          f"each command's expected output ({cmds[0][2]!r}, {cmds[2][2]!r})")
    multi = split_commands('curl x\n# {"pid":1,\n#  "name":"hello"}\n# a note\necho y\n')
    check(len(multi) == 2 and multi[0][2].split() == ['{"pid":1,', '"name":"hello"}'],
          f"a shape over two lines ({multi})")
    script, shaped = instrument(blocks[0].text)
    check([s[0] for s in shaped] == [0, 2] and script.count('>"$__dm_out/') == 2, "the shaped commands are kept")
    check(not complete("echo '{\n") and complete("echo hi\n"), "bash decides where a command ends")
    shape = parse_shape('[{"pid":4242,"uid":"5b0c…","name":"hello",…}]')
    check(compare_shape(shape, [{"pid": 1, "uid": "x", "name": "a", "isDefault": True}]) == [],
          "`…` allows more keys, values are not compared")
    check(compare_shape(shape, []) != [], "an empty array does not match a non-empty example")
    exact = parse_shape('{"pid":1,"name":"x","env":{…},"list":[…]}')
    check(compare_shape(exact, {"pid": 2, "name": "y", "env": {"A": "1"}, "list": [1, 2]}) == [], "elided values")
    check(any("missing" in d for d in compare_shape(exact, {"pid": 2, "env": {}, "list": []})), "a missing key")
    check(any("not in the example" in d for d in compare_shape(exact, {"pid": 2, "name": "", "env": {}, "list": [],
                                                                       "extra": 1})), "an extra key")
    check(compare_shape(exact, [1]) != [], "an array where an object is expected")
    check(parse_output('\x1e{"a":1}\n\x1e{"a":2}\n') == [{"a": 1}, {"a": 2}], "JSON sequences and NDJSON")
    try:
        parse_shape('{"a":1} trailing')
        check(False, "text after the shape is refused")
    except ShapeError:
        check(True, "text after the shape is refused")
    check(statuses("x\n__dm_status 401\nno newline__dm_status 200\n") == ["401", "200"],
          "curl statuses from stderr")
    check(re.fullmatch(BASH_OWN_ERE, "BASH_VERSINFO") and "\\" not in BASH_OWN_ERE, "bash's own variables (ERE)")
    class Ports:
        port, mport, extra_ports = "1001", "1002", {}
    mapped = Context.ports(Ports, "a 52323 b 52325 c 52330 d 52330 e 152323 f 5232")
    check(re.fullmatch(r"a 1001 b 1002 c (\d+) d \1 e 152323 f 5232", mapped) is not None, f"ports ({mapped})")
    # Two blocks of one file share variables (a value over two lines too) and the folder.
    tmp = tempfile.mkdtemp(prefix="docs-selftest-")
    try:
        os.mkdir(os.path.join(tmp, "sub"))

        class Ctx:
            pass
        ctx = Ctx()
        ctx.tmp, ctx.mult, ctx.env = tmp, 1, dict(os.environ, __dm_state=tmp, __dm_port="1")
        sess = Session(ctx, "sample.md", tmp)
        b = Block("sample.md", 1, "sh", "", "", "", 2)
        rc, _, err = sess.run(b, 'X="a b\nc"; export Y=1; cd sub\n')
        rc2, out, err2 = sess.run(b, 'echo "$X|$Y|$(basename "$PWD")"\nfalse\necho never\n')
        check(rc == 0 and out == "a b\nc|1|sub\n" and rc2 == 1,
              f"state carried from block to block, bash -e ({rc}, {rc2}, {out!r}, {err}{err2})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if FAILS else 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(self_test())
    if sys.argv[1:2] == ["--lint"]:
        sys.exit(lint(*sys.argv[2:3]))
    sys.exit(main())
