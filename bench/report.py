#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Runs the benchmarks and rewrites their generated blocks in BENCHMARKS.md (`make bench`).

    report.py [--build DIR] [--doc FILE] [--no-write] [NAME ...]   run NAMEs (default: all)
    report.py --list                                               the benches and their slots
    report.py --check                                              every bench has its block,
                                                                   the contents are current
    report.py --toc                                                rewrite the contents only

Each bench is one row of BENCHES below: a name, what it measures, the ctest fixtures it needs
built first (the test app, tracecheck) and its commands. A bench prints its results on standard
output (markdown tables, or plain text) and its progress on standard error; this tool shows both
as they come, keeps standard output, and replaces what lies between

    <!-- bench:NAME begin -->
    <!-- bench:NAME end -->

in the document with one line saying where and when it was measured (commit, UTC date, load
average before and after, cores, CPU, kernel), then the output: table lines as they are, other
lines in a ```text fence. The prose around the markers is left alone. A bench that fails leaves
its block as it was, and the tool exits 1 after the others have run. Each write also rewrites
the document's contents (its ## and ### headings, between <!-- toc begin --> and <!-- toc end -->).

The commit is `git describe --always`, with "+dirty" when files other than BENCHMARKS.md differ
from it (the document itself changes as blocks are written). Python 3 standard library only.
"""

import argparse
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = "BENCHMARKS.md"


@dataclass
class Bench:
    name: str
    what: str
    needs: str = ""  # ctest -R regex of the fixtures to build first ("" for none)
    # Commands, each a list of words; "{build}" is the build folder. Empty: a slot for a bench
    # still to come (skipped, its block keeps what it says).
    cmds: list = field(default_factory=list)
    env: dict = field(default_factory=dict)  # set for its commands, on top of bench_env()


def env_words(name, default):
    return os.environ.get(name, default).split()


def benches():
    """The table of benches, in the document's order. Parameters some Makefile targets take
    (TRACE_ARGS, CONVERT_MODES) come from the environment."""
    return [
        Bench("foundation", "idle RSS, start-up, /processes latency (issue 2)", "build_testapp",
              [["{build}/bench/bench_foundation", "1000"]]),
        Bench("trace", "the /trace relay against socat, every interleaved pair (issues 3, 30)", "",
              [["{build}/bench/bench_trace"] + env_words("TRACE_ARGS", "2G 10")]),
        # The same pairs with each process on a fixed CPU (producer 0; relay and reader 1), so the
        # scheduler's placement does not decide a run: the relay's own cost does.
        Bench("trace-pinned", "the /trace relay against socat, processes pinned to CPUs (issue 30)",
              "", [["{build}/bench/bench_trace", "--pinned"] + env_words("TRACE_ARGS", "2G 10")]),
        # Issue 30 item 1: the relay's way of moving bytes (read + writev, as dotmon does) against
        # splice(2) + tee(2), without dotmon: CPU per GiB of the relaying thread, user and kernel.
        Bench("trace-mechanisms", "copy against splice(2) for the relay, CPU per GiB (issue 30)", "",
              [["{build}/bench/bench_trace", "--mechanisms"] + env_words("MECH_ARGS", "2G 5")]),
        Bench("peers", "a slow client's lost events, CPU and RSS against dotnet-trace (issue 12)",
              "build_testapp|build_tracecheck", [["bench/bench_peers.sh", "3"]], {"PARTS": "trace"}),
        # The case: a ~230 MB core (the app holding 100 MB), 7 interleaved pairs.
        Bench("dump", "Full dumps against dotnet-dump: wall time, CPU per GB (issues 12, 30)",
              "build_testapp", [["bench/bench_peers.sh", "5"]], {"PARTS": "dump", "DUMP_MB": "100"}),
        Bench("container", "the image under podman: size, start-to-ready, idle RSS (issue 14)",
              "build_testapp|container_images",
              [["python3", "bench/bench_container.py", "--repo", ROOT, "--state",
                "{build}/podman", "--dotmon", "{build}/dotmon", "--runs", "10"]]),
        Bench("metrics", "metrics against dotnet-counters; the decoder against TraceEvent (issue 15)",
              "build_testapp|build_tracecheck",
              [["python3", "bench/bench_metrics.py", "--apps", "10", "--seconds", "60"],
               ["bench/bench_decode.sh"]]),
        # Issue 30 item 4: /metrics under wrk at 20 processes once every answer is complete, and
        # dotmon's CPU per process-minute at 0-20 processes; DOTMON_BASE_BIN interleaves an older
        # dotmon in both.
        Bench("metrics-scrape", "/metrics scrape latency at scale, CPU per process-minute (issue 30)",
              "build_testapp",
              [["python3", "bench/bench_metrics.py", "--scrape", "--apps", "20", "--rounds", "6",
                "--wrk-seconds", "5", "--rate", "20", "--rate-seconds", "20", "--floor"],
               ["python3", "bench/bench_metrics.py", "--scale", "0,1,2,5,10,20", "--rounds", "2",
                "--seconds", "20"]]),
        Bench("convert", "dotmon convert against dotnet-trace convert (issues 16, 20)",
              "build_testapp",
              [["bench/bench_convert.sh", m] for m in env_words("CONVERT_MODES", "ndjson speedscope")]),
        Bench("logs", "/logs latency and CPU per 10,000 lines (issue 16)", "build_testapp",
              [["python3", "bench/bench_logs.py", "--rates", "10,1000,10000", "--seconds", "20"]]),
        Bench("rules", "collection rules: CPU on 10 processes, crossing-to-action (issue 17)",
              "build_testapp",
              [["python3", "bench/bench_rules.py", "--apps", "10", "--seconds", "60", "--reps", "5"]]),
        Bench("ring", "the pre-trigger ring: memory, ten busy minutes, the app's cost (issue 18)",
              "build_testapp|build_tracecheck",
              [["python3", "bench/bench_ring.py", "--seconds", "90", "--sizes", "8,32"],
               ["python3", "tests/rules/check_rules_ring_limits.py", "--memory-only",
                "--seconds", "600"],
               ["python3", "bench/bench_ring_app.py", "--rounds", "6", "--work-ms", "4000"]]),
        Bench("gcdump", "GET /gcdump against dotnet-gcdump collect (issue 19)", "build_testapp",
              [["bench/bench_gcdump.sh"]]),
        # Issue 30 item 2: RSS after each kind of request against idle (eight gcdumps, a 2 GB
        # trace, a Full dump, /logs, /livemetrics), two rounds.
        Bench("memory", "RSS after requests and at idle (issue 30)", "build_testapp",
              [["python3", "bench/bench_memory.py", "--rounds", "2"]]),
        # Issue 33: the app's throughput and CPU with no telemetry, with the in-process
        # OpenTelemetry SDK, and with dotmon forwarding its signals, interleaved rounds.
        Bench("otel", "OTLP export: the app's cost, SDK against dotmon; dotmon's CPU, RSS, latency (issue 33)",
              "build_otelapp|otel_dashboard",
              [["python3", "bench/bench_otel.py", "--rounds", "3", "--seconds", "15"],
               ["python3", "bench/bench_otel.py", "--rounds", "3", "--seconds", "15", "--rate", "300"],
               ["python3", "bench/bench_otel.py", "--rounds", "3", "--items", "20000", "--item-rate", "2000",
                "--no-receiver"]]),
        # Issue 35: GET /stacks against dotnet-stack report on a 200-thread app, interleaved.
        Bench("stacks", "GET /stacks against dotnet-stack report, 200 threads (issue 35)", "build_testapp",
              [["python3", "bench/bench_stacks.py", "--threads", "200", "--rounds", "7"]]),
        # Issue 35: the app's throughput with the exceptions history on, off, and under dotnet-trace
        # with the same keyword, while it throws 10,000 exceptions a second.
        Bench("exceptions", "the exceptions history's cost to an app throwing 10,000 and 100,000/s (issue 35)",
              "build_testapp",
              [["python3", "bench/bench_exceptions.py", "--rate", "10000", "--ms", "3000", "--rounds", "5"],
               ["python3", "bench/bench_exceptions.py", "--rate", "100000", "--ms", "3000", "--rounds", "5"]]),
        # Issue 36: the MCP tools against the REST routes they call and Microsoft's tools with
        # their report commands (the way an agent gets the same answer without dotmon's MCP).
        Bench("mcp", "the MCP tools against the REST routes and Microsoft's tools (issue 36)", "build_testapp",
              [["python3", "bench/bench_mcp.py", "--rounds", "3", "--seconds", "3"]]),
        # Issue 34: one node-mode dotmon watching 100 runtimes in mount namespaces of their own,
        # against connect mode on the same runtimes, rounds interleaved.
        Bench("node", "node mode: 100 runtimes, CPU, RSS, latencies against connect mode (issue 34)",
              "build_testapp",
              [["python3", "bench/bench_node.py", "--apps", "100", "--rounds", "2", "--seconds", "30"]]),
    ]


def bench_env(build):
    """What every bench may read: the binaries of the build folder."""
    env = dict(os.environ)
    env.update({
        "DOTMON_BIN": f"{build}/dotmon",
        "DOTMON_TESTAPP_DIR": f"{build}/testapp",
        "DOTMON_TRACECHECK": f"{build}/tracecheck/tracecheck.dll",
        "DOTMON_OTELAPP_DIR": f"{build}/otelapp",
        # tests/otel/CMakeLists.txt restores the dashboard there (its version is that file's).
        "DOTMON_ASPIRE_DASHBOARD": f"{build}/otel-packages/aspire.dashboard.sdk.linux-x64/13.6.5/tools/Aspire.Dashboard",
        "DOTMON_NETTRACE_CHECK": f"{build}/tests/nettrace_check",
        "TRACE_PRODUCER": f"{build}/bench/trace_producer",
        "BENCH_DECODE": f"{build}/bench/bench_decode",
    })
    return env


def git(*args):
    r = subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else ""


def commit_id():
    """`git describe --always`, "+dirty" when the tree differs outside BENCHMARKS.md."""
    desc = git("describe", "--always", "--abbrev=7") or "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".", f":!{DOC}")
    return desc + ("+dirty" if dirty else "")


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def machine():
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{os.cpu_count()} cores ({cpu}), Linux {os.uname().release}"


def shown(word):
    """A word of a command as the header shows it: paths inside the repository relative to it."""
    if os.path.isabs(word) and (word == ROOT or word.startswith(ROOT + os.sep)):
        return os.path.relpath(word, ROOT)
    return word


def header(commit, date, load_before, load_after, seconds, cmds, env):
    pre = "".join(f"{k}={shlex.quote(v)} " for k, v in env.items())
    ran = "; ".join(f"`{pre}{shlex.join(shown(w) for w in c)}`" for c in cmds)
    return (f"_Generated by `make bench` at `{commit}`, {date}, load average {load_before} before "
            f"the run ({load_after} after), {machine()}; {ran}, {seconds:.0f} s._")


def to_markdown(lines):
    """Table lines as they are; runs of other lines in a text fence; blank lines kept between."""
    out, text = [], []

    def flush():
        while text and not text[-1].strip():
            text.pop()
        if text:
            out.extend(["```text", *text, "```"])
        text.clear()

    for line in lines:
        if line.startswith("|"):
            flush()
            out.append(line)
        elif not line.strip() and not text:
            if out and out[-1] != "":
                out.append("")
        else:
            text.append(line)
    flush()
    while out and out[-1] == "":
        out.pop()
    return out


def marker_re(name):
    n = re.escape(name)
    return re.compile(rf"(<!-- bench:{n} begin[^>]*-->\n)(.*?)(<!-- bench:{n} end -->)", re.S)


def rewrite(doc_text, name, body):
    """doc_text with bench NAME's block replaced by body (lines); ValueError when the markers
    are missing or appear more than once."""
    rx = marker_re(name)
    found = rx.findall(doc_text)
    if len(found) != 1:
        raise ValueError(f"{DOC}: {len(found)} blocks <!-- bench:{name} begin --> ... "
                         f"<!-- bench:{name} end --> (want exactly 1)")
    block = "\n".join(body) + "\n"
    return rx.sub(lambda m: m.group(1) + block + m.group(3), doc_text)


TOC_RE = re.compile(r"(<!-- toc begin -->\n)(.*?)(<!-- toc end -->)", re.S)


def anchor(title, seen):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens, "-N"
    after a repeat."""
    a = re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")
    n = seen.get(a, 0)
    seen[a] = n + 1
    return a if n == 0 else f"{a}-{n}"


def toc(doc_text):
    """The contents: every ## and ### heading outside code fences (the title and the contents'
    own heading left out), as a nested list of links."""
    out, seen, fence = [], {}, False
    for line in doc_text.split("\n"):
        if line.startswith("```"):
            fence = not fence
        m = None if fence else re.match(r"(#{1,3}) (.*)", line)
        if not m:
            continue
        level, title = len(m.group(1)), m.group(2).strip()
        a = anchor(title, seen)
        if level >= 2 and title != "Contents":
            out.append(f"{'  ' * (level - 2)}- [{title}](#{a})")
    return out


def rewrite_toc(doc_text):
    """doc_text with its contents (between <!-- toc begin --> and <!-- toc end -->) made current;
    unchanged when it has no such markers."""
    block = "\n".join(toc(doc_text)) + "\n"
    return TOC_RE.sub(lambda m: m.group(1) + block + m.group(3), doc_text, count=1)


def run_bench(b, build, env):
    """Runs b's commands; returns (ok, stdout lines, seconds, commands as run)."""
    cmds = [[w.replace("{build}", build) for w in c] for c in b.cmds]
    env = {**env, **b.env}
    if b.needs:
        subprocess.run(["ctest", "--test-dir", build, "-R", b.needs], cwd=ROOT,
                       stdout=subprocess.DEVNULL, check=False)
    lines, t0 = [], time.monotonic()
    for c in cmds:
        print(f"== bench {b.name}: {shlex.join(c)}", file=sys.stderr, flush=True)
        try:
            p = subprocess.Popen(c, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
        except OSError as e:
            print(f"bench {b.name}: {e}", file=sys.stderr)
            return False, lines, time.monotonic() - t0, cmds
        for line in p.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            lines.append(line.rstrip("\n"))
        if p.wait() != 0:
            print(f"bench {b.name}: {c[0]} exited {p.returncode}", file=sys.stderr)
            return False, lines, time.monotonic() - t0, cmds
        lines.append("")
    return True, lines, time.monotonic() - t0, cmds


def main():
    table = benches()
    by_name = {b.name: b for b in table}
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="benches to run (default: all); see --list")
    ap.add_argument("--build", default="build", help="build folder (default: build)")
    ap.add_argument("--doc", default=os.path.join(ROOT, DOC), help="document to rewrite")
    ap.add_argument("--no-write", action="store_true", help="run and print only")
    ap.add_argument("--list", action="store_true", help="list the benches")
    ap.add_argument("--check", action="store_true",
                    help="check that every bench has one block and the contents are current")
    ap.add_argument("--toc", action="store_true", help="only bring the contents up to date")
    a = ap.parse_args()

    if a.list:
        for b in table:
            print(f"{b.name:15} {'(slot) ' if not b.cmds else ''}{b.what}")
        return 0
    with open(a.doc) as f:
        doc_text = f.read()
    if a.check:
        bad = 0
        for b in table:
            try:
                rewrite(doc_text, b.name, [])
            except ValueError as e:
                print(e, file=sys.stderr)
                bad += 1
        if rewrite_toc(doc_text) != doc_text:
            print(f"{a.doc}: the contents are not current (bench/report.py --toc)", file=sys.stderr)
            bad += 1
        return 1 if bad else 0
    if a.toc:
        with open(a.doc + ".tmp", "w") as f:
            f.write(rewrite_toc(doc_text))
        os.replace(a.doc + ".tmp", a.doc)
        return 0

    names = [n for arg in a.names for n in arg.split()] or [b.name for b in table]
    unknown = [n for n in names if n not in by_name]
    if unknown:
        ap.error(f"unknown bench {', '.join(unknown)} (known: {', '.join(by_name)})")
    if not a.no_write:
        for n in names:  # fail before running anything
            rewrite(doc_text, n, [])
    build = os.path.abspath(a.build)
    env = bench_env(build)
    commit = commit_id()
    failed = []
    for n in names:
        b = by_name[n]
        if not b.cmds:
            print(f"== bench {n}: a slot, no bench yet (bench/report.py's table)", file=sys.stderr)
            continue
        load_before = loadavg()
        date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        ok, lines, seconds, cmds = run_bench(b, build, env)
        if not ok:
            failed.append(n)
            continue
        if a.no_write:
            continue
        body = [header(commit, date, load_before, loadavg(), seconds, cmds, b.env), "", *to_markdown(lines)]
        with open(a.doc) as f:
            doc_text = f.read()
        doc_text = rewrite_toc(rewrite(doc_text, n, body))
        with open(a.doc + ".tmp", "w") as f:
            f.write(doc_text)
        os.replace(a.doc + ".tmp", a.doc)
        print(f"== bench {n}: block rewritten in {a.doc}", file=sys.stderr)
    if failed:
        print(f"failed: {' '.join(failed)} (their blocks are unchanged)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
