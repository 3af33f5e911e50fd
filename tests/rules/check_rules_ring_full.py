#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A ring filled to its cap is written out whole, at the store's pace (issue 28 item 6).

The bug: a ring rule's trigger wrote every kept block into the egress target in one go, ignoring
egress_full; a FileSystem target fails past 16 MiB queued ("the producer did not pause at
egress_full: size over limit"), an S3 one past two parts and a MiB. So a full ring of more than that
lost its trace at the moment it mattered.

The real .NET test app; two ring rules on it, one egressing to FileSystem, one to S3Storage
(s3rver, read back with awscli), both RingBufferSizeMB RING_MB (32),
PreTriggerSeconds 120 (the size decides), providers: the runtime's GC keyword at Verbose and the
app's EventSource DotMon-TestApp. The app writes Blob events of 2 KB (`events`) until both rings
report they are at their cap and discarding; then, with no Blob written any more, three induced
gen2 GCs fire both rules (GCCount). Asserted for each store:
  - the operation Succeeded, its "ring" results: bytesAtTrigger > 17 MiB (above what either
    store queues: FileSystem 16 MiB, S3 two 5 MiB parts and a MiB; a full ring holds 70-100 % of
    its cap at any moment, whole regions going at once), the drain
    paused for the store at least once (pauses >= 1: the ring waited for the store's ready and went
    on), drained;
  - the file (FileSystem: from DirectoryPath; S3: get-object) is a COMPLETE nettrace (the C
    checker) that TraceEvent (tracecheck) reads without error, holding at least as many events as
    the ring held at the trigger, and Blob events (all written before the trigger) worth more than
    half the ring.
Before the trigger, GET /trace/snapshot of each full ring to its store (egressProvider): the whole
ring is written in one call, more than either store queues; both uploads Succeed and the stored
snapshots are COMPLETE nettraces (the C checker).
Prints the ring size at the trigger, file size, events read back and trigger-to-stored time.

Environment: DOTMON_BIN, DOTMON_TESTAPP_DIR, DOTNET_EXE/DOTNET_ROOT, DOTMON_NETTRACE_CHECK,
DOTMON_TRACECHECK, S3RVER_DIR, S3RVER_JS, NODE_EXE, AWS_EXE.
"""

import json
import os
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "egress"))
sys.dont_write_bytecode = True
from check_rules_run import get, nettrace_verdict, start, stop_dotmon, wait_for, wait_listed  # noqa: E402
from check_rules_gc import log_text  # noqa: E402
from check_rules_ring import tracecheck  # noqa: E402
from dmtest import FAILS, App, check, fetch, free_port  # noqa: E402
from s3env import Server, aws, no_orphans  # noqa: E402

RING_MB = 32
BUCKET = "ring"
RUNTIME = "Microsoft-Windows-DotNETRuntime"
APP = "DotMon-TestApp"
BLOB_CHARS = 1000  # UTF-16: about 2 KB per event


def rule(egress):
    return {"Filters": [{"Key": "ProcessName", "Value": "TestApp"}],
            "Trigger": {"Type": "GCCount", "Settings": {"Count": 3, "Reasons": ["Induced"],
                                                        "SlidingWindowDuration": "00:00:05"}},
            "Actions": [{"Name": "t", "Type": "CollectTrace",
                         "Settings": {"Providers": [{"Name": RUNTIME, "Keywords": "0x1", "EventLevel": "Verbose"},
                                                    {"Name": APP, "EventLevel": "Verbose"}],
                                      "PreTriggerSeconds": 120, "PostTriggerSeconds": 1,
                                      "RingBufferSizeMB": RING_MB, "Egress": egress}}]}


def ring_of(api, name, pid):
    st, _, body = get(f"{api}/collectionrules/{name}?pid={pid}")
    return json.loads(body).get("ring", {}) if st == 200 else {}


def op_details(api, op_id):
    """The operation's status (GET /operations/{id}) with its details (…/details) merged in."""
    st, _, body = get(f"{api}/operations/{op_id}")
    d = json.loads(body) if st == 200 else {"status": f"HTTP {st} {body[:200]}"}
    st, _, body = get(f"{api}/operations/{op_id}/details")
    d.update(json.loads(body) if st == 200 else {})
    return d


def read_back(what, path, ring, took):
    size = os.path.getsize(path)
    v = nettrace_verdict(path)
    check(v.get("verdict") == "COMPLETE", f"{what}: the file of {size} bytes is a COMPLETE nettrace: {v}")
    te = tracecheck(path)
    if te is None:
        check(False, "DOTMON_TRACECHECK (the TraceEvent reader) is built by the tracecheck fixture")
        return
    blobs = te.get("providers", {}).get(APP, 0)
    check(te.get("ok") is True and te.get("events", 0) >= ring.get("eventsAtTrigger", 1 << 62),
          f"{what}: TraceEvent reads it whole, with every event the ring held at the trigger "
          f"({ {k: te.get(k) for k in ('ok', 'events', 'lost', 'error')} }, ring {ring})")
    # Every Blob was written before the trigger: they are the seconds before it.
    check(blobs * 2 * BLOB_CHARS > ring.get("bytesAtTrigger", 0) // 2,
          f"{what}: {blobs} Blob events from before the trigger, over half the ring's bytes")
    print(f"{what}: ring {ring.get('bytesAtTrigger', 0) / 1048576:.1f} MiB / {ring.get('eventsAtTrigger')} events "
          f"at the trigger, drained in {ring.get('drainMs')} ms with {ring.get('pauses')} pauses; file "
          f"{size / 1048576:.1f} MiB, TraceEvent read {te.get('events')} events ({blobs} Blob); stored "
          f"{took:.1f} s after the trigger", flush=True)


def snapshots(api, pid, tmp, files, ep):
    """GET /trace/snapshot of each full ring to its store: the whole ring is written at once, so
    the artifact holds what the store cannot take yet and hands it over at the store's pace."""
    ids = {}
    for rule_name, provider in (("RingFiles", "files"), ("RingS3", "s3")):
        st, hdr, body = get_raw(f"{api}/trace/snapshot?pid={pid}&rule={rule_name}&egressProvider={provider}")
        loc = hdr.get("Location") or ""
        check(st == 202 and "/operations/" in loc, f"snapshot of {rule_name} to {provider}: 202 ({st} {body[:300]})")
        ids[provider] = loc.rsplit("/", 1)[-1]

    def done():
        return all(op_details(api, i).get("status") not in ("Starting", "Running", "Stopping") for i in ids.values())

    check(wait_for(done, 30), "both snapshots' uploads ended")
    for provider, op_id in ids.items():
        d = op_details(api, op_id)
        name = d.get("artifactName", "?")
        ring_bytes = d.get("trace", {}).get("ringBytes", 0)
        check(d.get("status") == "Succeeded" and ring_bytes > 17 << 20,
              f"snapshot to {provider}: Succeeded, a ring of {ring_bytes} bytes (> 17 MiB): {json.dumps(d)[:600]}")
        path = os.path.join(files, name)
        if provider == "s3":
            path = os.path.join(tmp, "snap.nettrace")
            rc, _, err = aws(ep, "s3api", "get-object", "--bucket", BUCKET, "--key", name, path)
            check(rc == 0, f"snapshot to S3: awscli reads it back ({err[-300:]})")
        v = nettrace_verdict(path) if os.path.isfile(path) else {}
        check(v.get("verdict") == "COMPLETE" and v.get("events", 0) > 0,
              f"snapshot to {provider}: a COMPLETE nettrace: { {k: v.get(k) for k in ('verdict', 'bytes', 'events')} }")
        print(f"snapshot to {provider}: ring {ring_bytes / 1048576:.1f} MiB, file {v.get('bytes', 0) / 1048576:.1f} MiB, "
              f"{v.get('events')} events", flush=True)
        if provider == "s3" and os.path.isfile(path):
            os.unlink(path)
    return set(ids.values())


def get_raw(url):
    """(status, headers, body text)."""
    st, headers, body = fetch(url)
    return st, headers, body.decode(errors="replace")


def main():
    for env in ("S3RVER_DIR", "S3RVER_JS", "DOTMON_TRACECHECK"):
        if not os.environ.get(env):
            print(f"skipped: {env} not set")
            return 77
    with tempfile.TemporaryDirectory(prefix="dmringfull") as tmp:
        os.chmod(tmp, 0o700)
        run(tmp)
    print(f"{len(FAILS)} failure(s)")
    return 1 if FAILS else 0


def run(tmp):
    files = os.path.join(tmp, "files")
    srv = Server(tmp, "s3")
    ep = f"http://127.0.0.1:{srv.port}"
    rc, _, err = aws(ep, "s3api", "create-bucket", "--bucket", BUCKET)
    check(rc == 0, f"create the bucket with awscli ({err})")
    cfg = {"Egress": {"FileSystem": {"files": {"DirectoryPath": files}},
                      "S3Storage": {"s3": {"BucketName": BUCKET, "Endpoint": ep, "ForcePathStyle": "true",
                                           "AccessKeyId": "S3RVER", "SecretAccessKey": "S3RVER"}}},
           "CollectionRules": {"RingFiles": rule("files"), "RingS3": rule("s3")}}
    app = App(tmp)
    port = free_port()
    api = f"http://127.0.0.1:{port}"
    log = open(os.path.join(tmp, "dotmon.log"), "w+")
    dm = start(tmp, cfg, port, log)
    stop_fill = threading.Event()

    def fill():
        try:
            while not stop_fill.is_set():
                app.command(f"events 4000 {BLOB_CHARS} 1 40")
        except (RuntimeError, OSError, ValueError):
            pass

    filler = threading.Thread(target=fill, daemon=True)
    try:
        pid = app.pid
        check(wait_listed(port, pid), f"dotmon lists the app {pid}")
        for name in ("RingFiles", "RingS3"):
            check(wait_for(lambda: f"collection rule {name} of process {pid}: ring session started" in log_text(log),
                           20), f"{name}: the ring session started")
        t0 = time.time()
        filler.start()
        limit = RING_MB << 20

        def full(name):
            r = ring_of(api, name, pid)
            return r.get("bytes", 0) >= limit * 0.9 and r.get("blocksDiscarded", 0) > 0

        check(wait_for(lambda: full("RingFiles") and full("RingS3"), 40),
              f"both rings at their cap and discarding ({ring_of(api, 'RingFiles', pid)}, {ring_of(api, 'RingS3', pid)})")
        stop_fill.set()
        filler.join(30)
        print(f"rings full after {time.time() - t0:.1f} s", flush=True)
        snaps = snapshots(api, pid, tmp, files, ep)
        t_trig = time.time()
        reply = app.command("collect 3 2")
        check(reply.startswith("ok collect n=3"), f"collect: {reply}")

        def actions():
            st, _, body = get(f"{api}/operations")
            return [o for o in (json.loads(body) if st == 200 else []) if o.get("operationId") not in snaps]

        def settled():
            ops = actions()
            return len(ops) >= 2 and all(o.get("status") not in ("Starting", "Running", "Stopping") for o in ops)

        check(wait_for(settled, 60), f"both actions' operations ended: {get(f'{api}/operations')[2][:600]}")
        took = time.time() - t_trig
        for o in actions():
            d = op_details(api, o.get("operationId", "x"))
            ring = d.get("trace", {}).get("ring", {})
            loc = d.get("resourceLocation") or ""
            s3 = d.get("egressProviderName") == "s3"
            what = "S3" if s3 else "FileSystem"
            check(d.get("status") == "Succeeded", f"{what}: the trace operation Succeeded: {json.dumps(d)[:800]}")
            # Above what either store queues (FileSystem 16 MiB, S3 two 5 MiB parts and a MiB).
            check(ring.get("bytesAtTrigger", 0) > 17 << 20 and ring.get("pauses", 0) >= 1 and
                  ring.get("drained") is True,
                  f"{what}: the full ring went out in steps, pausing for the store: {ring}")
            if s3:
                got = os.path.join(tmp, "got.nettrace")
                rc, _, err = aws(ep, "s3api", "get-object", "--bucket", BUCKET, "--key", d.get("artifactName", "?"), got)
                if check(rc == 0, f"S3: awscli reads the object back ({err[-300:]})"):
                    read_back(what, got, ring, took)
                    os.unlink(got)
                ok, why = no_orphans(ep, BUCKET)
                check(ok, f"S3: no multipart upload left ({why})")
            elif check(os.path.isfile(loc), f"FileSystem: the file is there ({loc})"):
                read_back(what, loc, ring, took)
        text = log_text(log)
        check("did not pause" not in text and "trigger failed" not in text, "no backpressure failure in the log")
    finally:
        stop_fill.set()
        app.kill()
        filler.join(5)
        stop_dotmon(dm, log, 8000)
        srv.stop()
    check(dm.returncode == 0, f"dotmon stopped cleanly ({dm.returncode})")


if __name__ == "__main__":
    sys.exit(main())
