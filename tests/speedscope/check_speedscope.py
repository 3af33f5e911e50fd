#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""CPU profiles as speedscope JSON, end to end (issue 20).

The real test app runs `hot <ms>` (on its command thread ~70% of the time in
TestApp.Hot.SpinHotLoop, the rest in TestApp.Hot.SpinWarmLoop) while dotmon traces it with
GET /trace?pid=..&profile=cpu-sampling&durationSeconds=4. Then `dotmon convert FILE --format
speedscope`: exit 0, valid JSON with $schema, exporter, name, shared.frames and one sampled profile
per thread (as many weights as samples, frame indices in range, unit milliseconds); on the thread
that ran `hot`, SpinHotLoop is the top exclusive frame by weight (the runtime's suspension frames
and TraceEvent's pseudo frames at the leaf set aside: see SUSPENSION) with 60-80% of the weight.
Microsoft's `dotnet-trace convert --format Speedscope` of the same file (installed into
DOTMON_TOOLS_DIR; that part is skipped when it cannot be) must name the hot thread's frames as dotmon does
and put the same method on top, with a share within 5 points of ours; `dotnet-trace report FILE
topN` must give SpinHotLoop's and SpinWarmLoop's inclusive and exclusive shares of all samples
within 5 points of the same figures from dotmon's file. Both files are valid against speedscope's own JSON schema (ajv,
schema/validate.js; skipped when the npm packages are not in SPEEDSCOPE_SCHEMA_DIR). A truncated
copy of the trace exits 1 and writes nothing.

Environment: DOTMON_BIN, DOTMON_TESTAPP_DIR, DOTNET_EXE, DOTMON_TOOLS_DIR, SPEEDSCOPE_SCHEMA_DIR,
SPEEDSCOPE_VALIDATE_JS, NODE_EXE. With --fuzz DIR...: only `dotmon convert --format speedscope`
over every file of the folders (never a signal, exit 0 or 1, and with 0 a JSON document with
$schema, shared.frames and profiles; with 1 nothing written).
"""

import glob
import json
import os
import re
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from dmtest import FAILS, Watched, check, dotnet_tool  # noqa: E402

HOT = "TestApp.Hot.SpinHotLoop"
DOTNET_TRACE_VERSION = "10.0.750501"  # the dotnet-gcdump of tests/gcdump's release
# Leaf frames that say how a sample was taken, not where the time went: a thread is sampled where
# it stops for the runtime's suspension, in a tight loop at its GC poll (Thread.PollGC and its
# worker), and TraceEvent adds a pseudo frame CPU_TIME or UNMANAGED_CODE_TIME under every sample.
# The exclusive frame of a sample is its deepest frame that is none of these.
SUSPENSION = ("System.Threading.Thread.PollGC", "System.Threading.Thread.<PollGC>", "CPU_TIME",
              "UNMANAGED_CODE_TIME")


def leaf(names, stack):
    """The exclusive frame's name of a stack of frame indices (outermost first), or None."""
    for i in reversed(stack):
        n = names[i]
        if not any(x in n for x in SUSPENSION):
            return n
    return None
SCHEMA = "https://www.speedscope.app/file-format-schema.json"


def exclusive_sampled(doc, prof):
    """{frame name: weight} of the leaf frames of a sampled profile, and the total weight."""
    names = [f["name"] for f in doc["shared"]["frames"]]
    out, total = {}, 0.0
    for s, w in zip(prof["samples"], prof["weights"]):
        n = leaf(names, s)
        if n is not None:
            out[n] = out.get(n, 0.0) + w
            total += w
    return out, total


def exclusive_evented(doc, prof):
    """The same for an evented profile: the time between two events goes to the open leaf."""
    names = [f["name"] for f in doc["shared"]["frames"]]
    out, total, stack, last = {}, 0.0, [], None
    for e in prof["events"]:
        n = leaf(names, stack)
        if n is not None and last is not None:
            d = e["at"] - last
            out[n] = out.get(n, 0.0) + d
            total += d
        last = e["at"]
        if e["type"] == "O":
            stack.append(e["frame"])
        elif stack:
            stack.pop()
    return out, total


def hot_thread(doc, exclusive):
    """(share of the top frame, its name, share of HOT) on the profile where HOT weighs most."""
    best = None
    for prof in doc["profiles"]:
        ex, total = exclusive(doc, prof)
        hot = sum(w for n, w in ex.items() if HOT in n)
        if total > 0 and (best is None or hot > best[0]):
            best = (hot, ex, total)
    if best is None or best[0] == 0:
        return None
    hot, ex, total = best
    top = max(ex, key=ex.get)
    return top, 100.0 * hot / total, sorted(ex.items(), key=lambda kv: -kv[1])[:5], total


def check_doc(doc):
    check(doc.get("$schema") == SCHEMA, "$schema")
    check(doc.get("exporter", "").startswith("dotmon"), "exporter")
    check(isinstance(doc.get("name"), str), "name")
    frames = doc.get("shared", {}).get("frames")
    check(isinstance(frames, list) and frames and all(isinstance(f.get("name"), str) for f in frames),
          "shared.frames: a list of {name}")
    profs = doc.get("profiles", [])
    check(len(profs) > 0, f"profiles: {len(profs)}")
    ok = True
    for p in profs:
        ok &= p.get("type") == "sampled" and p.get("unit") == "milliseconds"
        ok &= len(p["samples"]) == len(p["weights"]) and p["startValue"] <= p["endValue"]
        ok &= all(0 <= i < len(frames) for s in p["samples"] for i in s)
        ok &= all(w > 0 for w in p["weights"])
    check(ok, "every profile sampled, milliseconds, a weight per sample, frame indices in range")


def dotnet_trace():
    """Microsoft's dotnet-trace in DOTMON_TOOLS_DIR (installed there if need be), or None."""
    return dotnet_tool("dotnet-trace", DOTNET_TRACE_VERSION)


def schema_check(files):
    """speedscope's schema over files with ajv (schema/validate.js), or a skip line."""
    d = os.environ.get("SPEEDSCOPE_SCHEMA_DIR", "")
    node, js = os.environ.get("NODE_EXE", ""), os.environ.get("SPEEDSCOPE_VALIDATE_JS", "")
    if not (d and node and js and os.path.isdir(os.path.join(d, "node_modules", "speedscope"))):
        print("skip speedscope's schema: the npm packages are not installed", flush=True)
        return
    p = subprocess.run([node, js, *files], cwd=d, capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, NODE_PATH=os.path.join(d, "node_modules")))
    check(p.returncode == 0, f"speedscope's schema (ajv): {(p.stdout + p.stderr).strip()[:600]}")


def topn_basis(doc):
    """dotmon's speedscope document on `dotnet-trace report topN`'s basis: every sample of every
    thread, the raw leaf exclusive. {frame name: (inclusive %, exclusive %)}."""
    names = [f["name"] for f in doc["shared"]["frames"]]
    total, inc, exc = 0.0, {}, {}
    for p in doc["profiles"]:
        for stack, weight in zip(p["samples"], p["weights"]):
            total += weight
            if stack:
                exc[names[stack[-1]]] = exc.get(names[stack[-1]], 0.0) + weight
            for n in {names[i] for i in stack}:
                inc[n] = inc.get(n, 0.0) + weight
    return {n: (100.0 * inc[n] / total, 100.0 * exc.get(n, 0.0) / total) for n in inc} if total else {}


def report_topn(exe, trace, doc):
    """Microsoft's `dotnet-trace report FILE topN` on the same file: the hot method's inclusive and
    exclusive shares (of all threads' samples, as topN counts them) within 5 points of the same
    figures computed from dotmon's file (the runtime's waiting threads take most samples there, so
    the hot method's shares are small on this basis; /profile's own answer sets waits apart)."""
    p = subprocess.run([exe, "report", trace, "topN", "-n", "12"], capture_output=True, text=True, timeout=300)
    rows = {}
    for line in p.stdout.splitlines():
        m = re.match(r"^\s*\d+\.\s+(.*?)\s+([\d.]+)%\s+([\d.]+)%\s*$", line)
        if m:
            rows[m.group(1)] = (float(m.group(2)), float(m.group(3)))
    print("info dotnet-trace report topN:\n" + p.stdout.strip()[-1500:], flush=True)
    ours = topn_basis(doc)
    for method in ("Hot.SpinHotLoop(", "Hot.SpinWarmLoop("):
        theirs = next((v for k, v in rows.items() if method in k), None)
        mine = next((v for k, v in ours.items() if method in k), None)
        if not check(p.returncode == 0 and theirs is not None and mine is not None,
                     f"topN lists {method}.. ({theirs}) and dotmon's file has it ({mine})"):
            continue
        check(abs(mine[0] - theirs[0]) <= 5.0 and abs(mine[1] - theirs[1]) <= 5.0,
              f"{method}..: inclusive/exclusive dotmon {mine[0]:.2f}/{mine[1]:.2f}% vs dotnet-trace report "
              f"topN {theirs[0]:.2f}/{theirs[1]:.2f}% (within 5 points)")


def main():
    w = Watched("dotmon-speedscope-")
    try:
        tmp, app = w.tmp, w.app
        trace = os.path.join(tmp, "cpu.nettrace")
        app.p.stdin.write("hot 9000\n")  # runs on, on the command thread, while we trace
        app.p.stdin.flush()
        time.sleep(0.5)
        url = f"http://127.0.0.1:{w.port}/trace?pid={app.pid}&profile=cpu-sampling&durationSeconds=4"
        with urllib.request.urlopen(url, timeout=60) as r, open(trace, "wb") as f:
            f.write(r.read())
        line = app.p.stdout.readline().strip()
        check(line.startswith("ok hot"), f"the app: {line}")
        size = os.path.getsize(trace)

        out = os.path.join(tmp, "dotmon.speedscope.json")
        t0 = time.monotonic()
        p = subprocess.run([os.environ["DOTMON_BIN"], "convert", trace, "--format", "speedscope", "-o", out],
                           capture_output=True, text=True, timeout=120)
        dt = time.monotonic() - t0
        check(p.returncode == 0, f"dotmon convert --format speedscope exits 0 ({p.stderr.strip()[:300]})")
        print(f"info convert: {size} bytes of nettrace in {dt:.3f} s", flush=True)
        with open(out, encoding="utf-8") as f:
            doc = json.load(f)
        check_doc(doc)
        ours = hot_thread(doc, exclusive_sampled)
        check(ours is not None, f"a profile with {HOT}")
        if ours is None:
            return
        top, share, head, total = ours
        print(f"info dotmon: top {head}, {total:.0f} ms", flush=True)
        check(HOT in top, f"dotmon: top exclusive frame is {HOT} ({top})")
        check(60.0 <= share <= 80.0, f"dotmon: {HOT} has {share:.1f}% of its thread's weight (60-80)")

        trunc = os.path.join(tmp, "cut.nettrace")
        with open(trace, "rb") as f, open(trunc, "wb") as g:
            g.write(f.read()[: size // 2])
        p = subprocess.run([os.environ["DOTMON_BIN"], "convert", trunc, "--format", "speedscope"],
                           capture_output=True, timeout=120)
        check(p.returncode == 1 and p.stdout == b"", "a truncated trace: exit 1, nothing written")

        exe = dotnet_trace()
        if exe is None:
            print("skip dotnet-trace could not be installed: no comparison", flush=True)
            schema_check([out])
            return
        ms_out = os.path.join(tmp, "ms.speedscope.json")
        p = subprocess.run([exe, "convert", "--format", "Speedscope", "-o", ms_out, trace],
                           capture_output=True, text=True, timeout=300)
        files = glob.glob(os.path.join(tmp, "ms*.json"))
        check(p.returncode == 0 and files, f"dotnet-trace convert ({p.stdout.strip()[-300:]})")
        schema_check([out, *files])
        if not files:
            return
        with open(files[0], encoding="utf-8") as f:
            ms_doc = json.load(f)
        # The hot thread's frames are named alike. Elsewhere dotmon may name a few frames more:
        # TraceEvent resolves an address with the code ranges known at the sample's time, and
        # drops the frames of methods jitted while the session starts (the EventSource's own
        # enabling) that dotmon names from the rundown.
        theirs_names = {f["name"] for f in ms_doc["shared"]["frames"]}
        names = [f["name"] for f in doc["shared"]["frames"]]
        hot_names = {names[i] for p in doc["profiles"] for s in p["samples"] for i in s
                     if any(HOT in names[j] for j in s)}
        missing = hot_names - theirs_names
        check(not missing, f"the hot thread's {len(hot_names)} frame names are dotnet-trace's too "
              f"(not: {sorted(missing)[:5]})")
        print(f"info frame names only dotmon gives: {sorted(set(names) - theirs_names)[:10]}", flush=True)
        theirs = hot_thread(ms_doc, exclusive_evented)
        check(theirs is not None, f"dotnet-trace: a profile with {HOT}")
        if theirs is None:
            return
        ttop, tshare, thead, ttotal = theirs
        print(f"info dotnet-trace: top {thead}, {ttotal:.0f} ms", flush=True)
        check(HOT in ttop, f"dotnet-trace: top exclusive frame is {HOT} ({ttop})")
        check(abs(share - tshare) <= 5.0, f"{HOT}: dotmon {share:.1f}% vs dotnet-trace {tshare:.1f}% (within 5)")
        report_topn(exe, trace, doc)
    finally:
        w.close()


def fuzz(dirs):
    """convert over every file of dirs: exit 0 with a document, or 1 with nothing written."""
    n = 0
    for d in dirs:
        for name in sorted(os.listdir(d)):
            path = os.path.join(d, name)
            if not os.path.isfile(path):
                continue
            n += 1
            p = subprocess.run([os.environ["DOTMON_BIN"], "convert", path, "--format", "speedscope"],
                               capture_output=True, timeout=60)
            if p.returncode == 0:
                try:
                    doc = json.loads(p.stdout.decode("utf-8"))
                    ok = doc.get("$schema") == SCHEMA and "frames" in doc["shared"] and "profiles" in doc
                except (ValueError, KeyError, UnicodeDecodeError):
                    ok = False
                check(ok, f"{name}: exit 0 and a speedscope document")
            else:
                check(p.returncode == 1 and p.stdout == b"", f"{name}: exit {p.returncode}, nothing written")
    check(n > 0, f"{n} files converted")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--fuzz":
        fuzz(sys.argv[2:])
    else:
        main()
    if FAILS:
        print(f"{len(FAILS)} check(s) failed", flush=True)
        sys.exit(1)
