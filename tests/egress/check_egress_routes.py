#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""egressProvider on /trace, /dump, /logs and /livemetrics, end to end (issue 17).

The real dotmon and the real .NET test app in a private TMPDIR, with two egress providers
configured: FileSystem `files` (a folder dotmon makes) and S3Storage `s3` (s3rver from npm,
tests/egress/s3rver/server.js, which re-checks every SigV4 signature and injects faults; its
secret through Egress:Properties), and `s3bad` with a wrong secret. What landed is judged by
readers that share no code with dotmon: the stored bytes are hashed here and compared with the
SHA-256 dotmon reports in the operation's details, traces are read by the C checker
(nettrace_check) and by TraceEvent (tracecheck), dumps must be ELF core files whose program
headers all lie inside the object, objects are read back with Debian's awscli, and multipart
uploads left behind are listed with `aws s3api list-multipart-uploads`.

  - a trace to FileSystem: 202 with Location and no body, the operation Succeeded (201) with
    resourceLocation = the file, 0600, a complete nettrace for both readers;
  - a Mini dump to FileSystem and a WithHeap dump (> 16 MiB: multipart) to S3: ELF cores of the
    reported size and hash; a second dump while one uploads gets 429 (egress counts); the dump
    file the runtime wrote is gone afterwards;
  - logs and live metrics with durationSeconds to FileSystem: the records are in the files;
  - an unknown provider: 400 problem+json naming the configured ones, on all four routes;
  - DELETE of a dump while its parts upload: Cancelled, no object, no multipart upload, no file;
    three endless traces to FileSystem make a fourth (in the response) 429, and DELETE of each:
    Cancelled, nothing left in the folder;
  - DELETE ?stop=true of an endless trace to S3: Succeeded, the object a complete nettrace;
  - a store that fails mid-upload (part 3 always 500) and a wrong secret: Failed with the
    store's message, nothing left;
  - a runtime killed mid-trace: Failed (TraceTruncated) with what was received kept;
  - with an API key from configuration (so dotmon watches its file), a provider added to the file
    is usable without a restart; an invalid Egress section is named and changes nothing;
  - `config show` redacts SecretAccessKey, SessionToken and Egress:Properties; an invalid Egress
    section is named by config show (status 1) and refused by collect;
  - a trace to a provider with PreSignedUrlExpiry and a SessionToken: resourceLocation is a
    working pre-signed URL holding the token; dotmon's log shows it with X-Amz-Signature and
    X-Amz-Security-Token REDACTED;
  - SIGTERM while a dump's parts upload: dotmon exits 0 in time, no multipart upload or dump file
    left; no secret in its log.
  - dotnet-monitor's documented S3 form (issue 32 item 8: lower-case keys, copyBufferSize 1024,
    useKmsEncryption with kmsEncryptionKey, awsProfileName/awsProfilePath): a trace Succeeded,
    its create request carried and signed the SSE-KMS headers (s3rver's request log), signed with
    the profile's keys; a profile that is not in the file: Failed at the action with the reason,
    dotmon keeps serving; no profile secret in its log.

Environment: DOTMON_BIN, DOTMON_TESTAPP_DIR, DOTNET_EXE, DOTMON_NETTRACE_CHECK, DOTMON_TRACECHECK,
S3RVER_DIR, S3RVER_JS, NODE_EXE, AWS_EXE.
"""
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from dmtest import (MULT, FAILS, App, check, free_port, http_request, settle, start_dotmon, stop,  # noqa: E402
                    wait_for, wait_log)
import dmtest  # noqa: E402
from s3env import AWS, NODE, Server, absent, aws, multipart_uploads, no_orphans  # noqa: E402

MIB = 1024 * 1024
WRONG_SECRET = "not-the-secret-4711"
BUCKET = "artifacts"


class Api:
    def __init__(self, port, auth=None):
        self.port = port
        self.auth = auth  # an Authorization header's value, or None (--no-auth)

    def request(self, method, path, headers=None):
        headers = dict(headers or {}, **({"Authorization": self.auth} if self.auth is not None else {}))
        r, body = http_request(self.port, path, method, headers=headers, timeout=120)
        return r.status, {k.lower(): v for k, v in r.getheaders()}, body

    def json(self, path):
        status, _, body = self.request("GET", path)
        return status, json.loads(body) if body else None

    def start(self, path, headers=None, what=None):
        """An egress request: 202, Location to the operation, no body. Returns the id or None."""
        what = what or path.split("?")[0]
        status, hdrs, body = self.request("GET", path, headers)
        loc = hdrs.get("location", "")
        ok = check(status == 202 and body == b"" and loc.startswith(f"http://127.0.0.1:{self.port}/operations/"),
                   f"{what}: 202 Accepted, Location {loc!r}, empty body ({status} {body[:300]!r})")
        return loc.rsplit("/", 1)[-1] if ok else None

    def wait(self, op_id, timeout=120, states=("Succeeded", "Failed", "Cancelled")):
        """(HTTP status, OperationStatus, details) once the operation is in one of states."""
        status, st = settle(lambda: self.json(f"/operations/{op_id}"),
                            lambda a: a[1] is not None and a[1].get("status") in states, timeout)
        _, details = self.json(f"/operations/{op_id}/details")
        return status, st, details


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(MIB), b""):
            h.update(block)
    return h.hexdigest()


def elf_core(path):
    """(True, why) when path is a 64-bit ELF core file whose program headers all lie inside it."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        ehdr = f.read(64)
        if len(ehdr) < 64 or ehdr[:4] != b"\x7fELF" or ehdr[4] != 2:
            return False, f"not ELF64: {ehdr[:8]!r}"
        e_type, = struct.unpack_from("<H", ehdr, 16)
        e_phoff, e_shoff = struct.unpack_from("<QQ", ehdr, 32)
        e_phentsize, e_phnum = struct.unpack_from("<HH", ehdr, 54)
        if e_type != 4:
            return False, f"e_type {e_type}, not ET_CORE"
        if e_phnum == 0xFFFF:  # PN_XNUM: the count is section 0's sh_info
            f.seek(e_shoff + 44)
            e_phnum, = struct.unpack("<I", f.read(4))
        end = 0
        loads = 0
        for i in range(e_phnum):
            f.seek(e_phoff + i * e_phentsize)
            p_type, _, p_offset, _, _, p_filesz = struct.unpack("<IIQQQQ", f.read(40))
            end = max(end, p_offset + p_filesz)
            loads += p_type == 1
    return end <= size and loads > 0, f"{e_phnum} program headers ({loads} PT_LOAD) end at {end}, file {size}"


def nettrace_verdict(path):
    p = subprocess.run([os.environ["DOTMON_NETTRACE_CHECK"], path], capture_output=True, text=True, timeout=300)
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"verdict": "unreadable", "stderr": p.stderr[-500:]}


def tracecheck(path):
    p = subprocess.run([os.environ["DOTNET_EXE"], os.environ["DOTMON_TRACECHECK"], path], capture_output=True,
                       text=True, timeout=300)
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"ok": False, "stderr": p.stderr[-500:]}


def stored_matches(what, path, details):
    """The stored bytes (a local file) against the operation's egress figures."""
    eg = (details or {}).get("egress") or {}
    size = os.path.getsize(path)
    check(eg.get("bytes") == size, f"{what}: egress.bytes {eg.get('bytes')} = stored size {size}")
    check(eg.get("sha256") == sha256(path), f"{what}: the stored bytes hash to egress.sha256")


def left_dumps(work):
    return [n for n in os.listdir(work) if n.startswith("dotmon_") and n.endswith(".dmp")]


def no_dump_left(what, work):
    wait_for(lambda: not left_dumps(work), 10)
    check(not left_dumps(work), f"{what}: the dump file the runtime wrote is deleted ({left_dumps(work)})")


# ---- cases --------------------------------------------------------------------------------------

def trace_to_files(api, app, out):
    op = api.start(f"/trace?pid={app.pid}&durationSeconds=3&profile=gc-verbose&egressProvider=files",
                   what="trace to FileSystem")
    if op is None:
        return
    _, st = api.json(f"/operations/{op}")
    check(st.get("egressProviderName") == "files", f"trace: egressProviderName while running ({st})")
    for _ in range(3):
        app.command("gc")
        time.sleep(0.3)
    status, st, d = api.wait(op)
    loc = st.get("resourceLocation") or ""
    check(status == 201 and st["status"] == "Succeeded", f"trace to FileSystem: Succeeded, 201 ({status} {st})")
    check(loc == os.path.join(out, d.get("artifactName", "?")) and os.path.isfile(loc),
          f"trace: resourceLocation is the file named artifactName ({loc})")
    if not os.path.isfile(loc):
        return
    check(os.stat(loc).st_mode & 0o777 == 0o600, f"trace: file mode {oct(os.stat(loc).st_mode & 0o777)} is 0600")
    v = nettrace_verdict(loc)
    check(v.get("verdict") == "COMPLETE" and v.get("gcStart", 0) > 0,
          f"trace: the C checker reads a complete nettrace with GCs ({ {k: v.get(k) for k in ('verdict', 'events', 'gcStart')} })")
    te = tracecheck(loc)
    check(te.get("ok") is True and te.get("events", 0) == v.get("events"),
          f"trace: TraceEvent reads it too, same event count ({te.get('events')} vs {v.get('events')})")
    check(d.get("trace", {}).get("bytes") == os.path.getsize(loc), "trace: trace.bytes = the file's size")
    stored_matches("trace", loc, d)


def logs_to_files(api, app):
    marker = f"egress-{os.getpid()}-{int(time.time())}"
    op = api.start(f"/logs?pid={app.pid}&durationSeconds=5&egressProvider=files",
                   headers={"Accept": "application/x-ndjson"}, what="logs to FileSystem")
    if op is None:
        return
    api.wait(op, 30, states=("Running", "Succeeded", "Failed", "Cancelled"))
    time.sleep(0.5)
    for i in range(3):
        app.command(f"log Information {marker}-{i}")
    status, st, d = api.wait(op)
    loc = st.get("resourceLocation") or ""
    check(st["status"] == "Succeeded" and os.path.isfile(loc), f"logs: Succeeded with the file ({st})")
    if not os.path.isfile(loc):
        return
    with open(loc) as f:
        recs = [json.loads(line) for line in f if line.strip()]
    mine = [r for r in recs if marker in json.dumps(r)]
    check(len(mine) == 3 and all(r.get("LogLevel") == "Information" for r in mine),
          f"logs: the file holds the 3 records as NDJSON ({len(mine)} of {len(recs)})")
    check(d.get("logs", {}).get("records") == len(recs), f"logs: logs.records = {len(recs)} lines")
    stored_matches("logs", loc, d)


def livemetrics_to_files(api, app):
    op = api.start(f"/livemetrics?pid={app.pid}&durationSeconds=4&egressProvider=files",
                   what="livemetrics to FileSystem")
    if op is None:
        return
    status, st, d = api.wait(op)
    loc = st.get("resourceLocation") or ""
    check(st["status"] == "Succeeded" and os.path.isfile(loc), f"livemetrics: Succeeded with the file ({st})")
    if not os.path.isfile(loc):
        return
    with open(loc, "rb") as f:
        text = f.read().decode()
    parts = [p for p in text.split("\x1e") if p]
    recs = []
    for p in parts:
        try:
            recs.append(json.loads(p))
        except ValueError:
            pass
    check(len(recs) > 0 and len(recs) == len(parts) and all("value" in r and "name" in r for r in recs),
          f"livemetrics: the file holds json-seq records ({len(recs)} of {len(parts)})")
    check(d.get("livemetrics", {}).get("records") == len(recs), "livemetrics: livemetrics.records = records in the file")


def unknown_provider(api, app):
    for route in ("trace", "dump", "logs", "livemetrics"):
        status, hdrs, body = api.request("GET", f"/{route}?pid={app.pid}&egressProvider=nope")
        detail = json.loads(body).get("detail", "") if body else ""
        check(status == 400 and hdrs.get("content-type", "").startswith("application/problem+json")
              and "'nope'" in detail and all(n in detail for n in ("files", "s3", "s3bad")),
              f"/{route} with an unknown provider: 400 problem+json naming the configured ones ({status} {detail})")
    _, ops = api.json("/operations")
    check(all(o["egressProviderName"] != "nope" for o in ops), "unknown provider: no operation was made")


def dump_to_files(api, app, work, out):
    op = api.start(f"/dump?pid={app.pid}&type=Mini&egressProvider=files", what="Mini dump to FileSystem")
    if op is None:
        return
    status, st, d = api.wait(op)
    loc = st.get("resourceLocation") or ""
    check(status == 201 and st["status"] == "Succeeded" and os.path.isfile(loc),
          f"Mini dump to FileSystem: Succeeded with the file ({st})")
    if not os.path.isfile(loc):
        return
    check(os.path.basename(loc).startswith("core_"), f"dump: dotnet-monitor's name ({os.path.basename(loc)})")
    check(os.stat(loc).st_mode & 0o777 == 0o600, "dump: file mode 0600")
    ok, why = elf_core(loc)
    check(ok, f"Mini dump: an ELF core, whole ({why})")
    check(d.get("dump", {}).get("size") == os.path.getsize(loc), "dump: dump.size = the file's size")
    stored_matches("Mini dump", loc, d)
    no_dump_left("Mini dump", work)


def s3_dump(api, app, heap_mb, what):
    """The app's heap grown by heap_mb MiB, then a WithHeap dump to S3: the operation's id, or
    None. A runtime still writing a cancelled dump answers 429 until it is done: wait for it."""
    app.command(f"alloc {heap_mb}")
    path = f"/dump?pid={app.pid}&type=WithHeap&egressProvider=s3"
    # The provider is checked after the runtime: a 400 for an unknown one says the runtime is free.
    wait_for(lambda: api.request("GET", path.replace("egressProvider=s3", "egressProvider=nope"))[0] == 400,
             120, 0.5)
    return api.start(path, what=what)


def dump_to_s3(api, app, work, ep):
    op = s3_dump(api, app, 48, "WithHeap dump to S3")
    if op is None:
        return
    # Egress operations count against the limit (RequestLimits:Dump:MaxConcurrency, 1).
    status, _, body = api.request("GET", f"/dump?pid={app.pid}&type=Mini")
    check(status == 429, f"another dump of the runtime while the egress dump runs: 429 ({status} {body[:200]!r})")
    status, st, d = api.wait(op, 300)
    name = d.get("artifactName", "?")
    check(st["status"] == "Succeeded" and st.get("resourceLocation") == f"{ep}/{BUCKET}/{name}",
          f"WithHeap dump to S3: Succeeded, resourceLocation the object's URL ({st})")
    rc, outj, err = aws(ep, "s3api", "head-object", "--bucket", BUCKET, "--key", name)
    length = json.loads(outj)["ContentLength"] if rc == 0 else -1
    eg = d.get("egress") or {}
    check(length > 16 * MIB and length == eg.get("bytes") == d.get("dump", {}).get("size"),
          f"S3 dump: object of {length} bytes > 16 MiB = egress.bytes = dump.size ({eg}, {d.get('dump')})")
    got = os.path.join(work, "got.dmp")
    rc, _, err = aws(ep, "s3api", "get-object", "--bucket", BUCKET, "--key", name, got)
    if check(rc == 0, f"S3 dump: awscli reads the object back ({err[-300:]})"):
        check(sha256(got) == eg.get("sha256"), "S3 dump: the object hashes to egress.sha256")
        ok, why = elf_core(got)
        check(ok, f"S3 dump: an ELF core, whole ({why})")
        os.unlink(got)
    ok, why = no_orphans(ep, BUCKET)
    check(ok, f"S3 dump: no multipart upload left ({why})")
    no_dump_left("S3 dump", work)


def cancel_s3_dump(api, app, work, ep):
    op = s3_dump(api, app, 600, "big dump to S3 (to cancel)")
    if op is None:
        return
    seen = {"uploading": False}

    def under_way_or_ended():
        seen["uploading"] = bool(multipart_uploads(ep, BUCKET))
        return seen["uploading"] or api.json(f"/operations/{op}")[1]["status"] not in ("Starting", "Running", "Stopping")

    wait_for(under_way_or_ended, 60, 0.05)
    uploading = seen["uploading"]
    check(uploading, "big dump to S3: its multipart upload is under way")
    status, _, body = api.request("DELETE", f"/operations/{op}")
    check(status == 200, f"DELETE mid-upload: 200 ({status} {body[:200]!r})")
    status, st, d = api.wait(op, 60)
    name = d.get("artifactName", "?")
    check(st["status"] == "Cancelled", f"DELETE mid-upload: Cancelled ({st})")
    ok, why = no_orphans(ep, BUCKET)
    check(ok, f"DELETE mid-upload: no multipart upload left ({why})")
    check(absent(ep, BUCKET, name), "DELETE mid-upload: no object")
    no_dump_left("cancelled dump", work)
    app.command("free")
    app.command("gc")


def failing_store(api, app, work, ep, srv):
    srv.fault(3, "500", 1000)
    op = s3_dump(api, app, 48, "dump to a failing S3")
    if op is not None:
        status, st, d = api.wait(op, 300)
        err = st.get("error") or {}
        check(st["status"] == "Failed" and err.get("code") == "EgressFailed"
              and "InternalError" in err.get("message", "") and "injected failure of part 3" in err.get("message", ""),
              f"a store failing mid-upload: Failed with the store's message ({st})")
        check(st.get("resourceLocation") is None, "failing store: no resourceLocation")
        ok, why = no_orphans(ep, BUCKET)
        check(ok, f"failing store: the multipart upload was aborted ({why})")
        check(absent(ep, BUCKET, d.get("artifactName", "?")), "failing store: no object")
        no_dump_left("failing store", work)
    srv.fault(3, "500", 0)
    app.command("free")
    op = api.start(f"/trace?pid={app.pid}&durationSeconds=1&profile=gc-collect&egressProvider=s3bad",
                   what="trace to S3 with a wrong secret")
    if op is not None:
        status, st, d = api.wait(op)
        msg = (st.get("error") or {}).get("message", "")
        check(st["status"] == "Failed" and "SignatureDoesNotMatch" in msg and WRONG_SECRET not in msg,
              f"a wrong secret: Failed with S3's SignatureDoesNotMatch, the secret not shown ({st})")
        ok, why = no_orphans(ep, BUCKET)
        check(ok, f"wrong secret: nothing left ({why})")


PROFILE_TOKEN = "profile-session-token-4242"
KMS_KEY = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"


def documented_s3(api, app, ep, srv):
    """dotnet-monitor's documented S3 settings (s3doc, s3noprofile in main's settings)."""
    op = api.start(f"/trace?pid={app.pid}&durationSeconds=1&profile=gc-collect&egressProvider=s3doc",
                   what="trace to S3 in dotnet-monitor's documented form")
    if op is not None:
        status, st, d = api.wait(op)
        name = d.get("artifactName", "?")
        reqs = srv.requests(name)
        creates = [q for q in reqs if q["method"] == "PUT" and "partNumber=" not in q["url"]
                   or q["url"].endswith("?uploads=")]
        check(status == 201 and st["status"] == "Succeeded" and len(creates) == 1
              and creates[0]["sse"] == "aws:kms" and creates[0]["kmsKeyId"] == KMS_KEY
              and "x-amz-server-side-encryption" in creates[0]["signedHeaders"]
              and all(q["accessKeyId"] == "S3RVER" and q["securityToken"] for q in reqs),
              f"documented S3 form: Succeeded, SSE-KMS sent and signed, the profile's keys ({st} {reqs})")
    op = api.start(f"/trace?pid={app.pid}&durationSeconds=1&profile=gc-collect&egressProvider=s3noprofile",
                   what="trace to S3 with a profile that is not there")
    if op is not None:
        status, st, d = api.wait(op)
        msg = (st.get("error") or {}).get("message", "")
        check(st["status"] == "Failed" and "AWS profile absent not found" in msg,
              f"missing profile: Failed at the action, in words ({st})")
        status, _ = api.json("/processes")
        check(status == 200, f"missing profile: dotmon keeps serving ({status})")


SESSION_TOKEN = "session-token-0815+/="
SIGNATURES = []  # the pre-signed URLs' signatures: never in dotmon's log


def presigned_s3(api, app):
    """A pre-signed URL with a session token: whole in resourceLocation (it works), redacted in the log."""
    op = api.start(f"/trace?pid={app.pid}&durationSeconds=1&profile=gc-collect&egressProvider=s3signed",
                   what="trace to S3 with a pre-signed URL")
    if op is None:
        return
    status, st, d = api.wait(op)
    loc = st.get("resourceLocation") or ""
    q = urllib.parse.parse_qs(urllib.parse.urlsplit(loc).query)
    SIGNATURES.extend(q.get("X-Amz-Signature", []))
    check(st["status"] == "Succeeded" and q.get("X-Amz-Security-Token") == [SESSION_TOKEN] and SIGNATURES,
          f"pre-signed: resourceLocation holds the session token and the signature ({st})")
    try:
        body = urllib.request.urlopen(loc, timeout=30).read()
        check(len(body) == (d.get("egress") or {}).get("bytes", -1) > 0,
              f"pre-signed: GET with resourceLocation alone returns the {len(body)} bytes stored")
    except (urllib.error.URLError, ValueError) as e:
        check(False, f"pre-signed: GET with resourceLocation alone returns the bytes ({e})")


def stop_s3_trace(api, app, work, ep):
    op = api.start(f"/trace?pid={app.pid}&durationSeconds=-1&profile=gc-verbose&egressProvider=s3",
                   what="endless trace to S3")
    if op is None:
        return
    api.wait(op, 30, states=("Running", "Succeeded", "Failed", "Cancelled"))
    for _ in range(3):
        app.command("gc")
        time.sleep(0.3)
    status, _, _ = api.request("DELETE", f"/operations/{op}?stop=true")
    check(status == 202, f"DELETE ?stop=true: 202 ({status})")
    status, st, d = api.wait(op)
    check(st["status"] == "Succeeded", f"stopped trace to S3: Succeeded ({st})")
    got = os.path.join(work, "got.nettrace")
    rc, _, err = aws(ep, "s3api", "get-object", "--bucket", BUCKET, "--key", d.get("artifactName", "?"), got)
    if check(rc == 0, f"stopped trace: awscli reads the object ({err[-300:]})"):
        v = nettrace_verdict(got)
        check(v.get("verdict") == "COMPLETE", f"stopped trace: the object is a complete nettrace ({v.get('verdict')})")
        stored_matches("stopped trace", got, d)
        os.unlink(got)


def cancel_files_traces(api, app, out):
    """RequestLimits:Trace:MaxConcurrency (3) counts egress traces: 3 to FileSystem, then a 4th in
    the response gets 429. Then DELETE of each: Cancelled, nothing left in the folder."""
    before = sorted(os.listdir(out))
    ops = [api.start(f"/trace?pid={app.pid}&durationSeconds=-1&profile=gc-verbose&egressProvider=files",
                     what=f"endless trace to FileSystem #{i} (to cancel)") for i in range(3)]
    for op in ops:
        api.wait(op, 30, states=("Running", "Succeeded", "Failed", "Cancelled"))
    status, _, body = api.request("GET", f"/trace?pid={app.pid}&durationSeconds=1")
    detail = json.loads(body).get("detail", "") if body else ""
    check(status == 429 and "3 trace operations are running" in detail,
          f"a 4th trace while 3 go to egress: 429 ({status} {detail})")
    app.command("gc")
    time.sleep(1)
    for op in ops:
        status, _, _ = api.request("DELETE", f"/operations/{op}")
        _, st, _ = api.wait(op)
        check(status == 200 and st["status"] == "Cancelled",
              f"DELETE of a trace to FileSystem: Cancelled ({status} {st['status']})")
    check(sorted(os.listdir(out)) == before, f"cancelled traces: nothing left in the folder ({os.listdir(out)})")


def runtime_dies(api, work, out):
    app2 = App(work)
    try:
        wait_for(lambda: str(app2.pid) in json.dumps(api.json("/processes")[1]), 30, 0.2)
        op = api.start(f"/trace?pid={app2.pid}&durationSeconds=-1&profile=gc-verbose&egressProvider=files",
                       what="trace of a runtime that dies")
        if op is None:
            return
        api.wait(op, 30, states=("Running", "Succeeded", "Failed", "Cancelled"))
        app2.command("gc")
        time.sleep(1)
    finally:
        app2.kill()
    status, st, d = api.wait(op)
    err = st.get("error") or {}
    loc = st.get("resourceLocation") or ""
    check(st["status"] == "Failed" and err.get("code") == "TraceTruncated" and loc in err.get("message", "x"),
          f"a runtime that dies: Failed (TraceTruncated), the message says where the bytes are ({st})")
    if check(os.path.isfile(loc), f"a runtime that dies: what was received is kept ({loc})"):
        check(os.stat(loc).st_mode & 0o777 == 0o600, "a runtime that dies: file mode 0600")
        v = nettrace_verdict(loc)
        check(v.get("verdict") == "TRUNCATED" and v.get("events", 0) > 0,
              f"a runtime that dies: the file is the truncated trace ({v.get('verdict')}, {v.get('events')} events)")
        stored_matches("truncated trace", loc, d)


def config_show(work):
    """Redaction by config show, and an invalid Egress section refused."""
    cfg = os.path.join(work, "show.json")
    secrets = {"SecretAccessKey": "sak-0123456789", "SessionToken": "tok-0123456789"}
    with open(cfg, "w") as f:
        json.dump({"Egress": {"S3Storage": {"x": dict(BucketName="b", AccessKeyId="AKIAEXAMPLE", **secrets),
                                            "y": {"BucketName": "b", "AccessKeyId": "AKIAEXAMPLE",
                                                  "SecretAccessKeyName": "k"}},
                              "Properties": {"k": "prop-0123456789"}}}, f)
    run = [os.environ["DOTMON_BIN"], "config", "show", "--configuration-file-path", cfg]
    p = subprocess.run(run, capture_output=True, text=True, timeout=30)
    shown = json.loads(p.stdout)
    values = list(secrets.values()) + ["prop-0123456789"]
    check(p.returncode == 0 and not any(v in p.stdout + p.stderr for v in values)
          and shown.get("Egress:S3Storage:x:SecretAccessKey") == ":REDACTED:"
          and shown.get("Egress:S3Storage:x:SessionToken") == ":REDACTED:"
          and shown.get("Egress:Properties:k") == ":REDACTED:"
          and shown.get("Egress:S3Storage:x:AccessKeyId") == "AKIAEXAMPLE",
          f"config show redacts SecretAccessKey, SessionToken, Egress:Properties ({p.returncode} {p.stdout} {p.stderr})")
    check("is ignored" not in p.stderr, f"config show: Egress keys are known settings ({p.stderr.strip()})")
    p = subprocess.run(run + ["--level", "full"], capture_output=True, text=True, timeout=30)
    check(all(v in p.stdout for v in values), "config show --level full shows them")

    bad = os.path.join(work, "bad.json")
    with open(bad, "w") as f:
        # schema: invalid (AzureBlobStorage, and an S3Storage provider without its bucket)
        json.dump({"Egress": {"AzureBlobStorage": {"z": {"AccountUri": "https://x"}},
                              "S3Storage": {"x": {"AccessKeyId": "A", "SecretAccessKey": "sak-0123456789"}}}}, f)
    p = subprocess.run([os.environ["DOTMON_BIN"], "config", "show", "--configuration-file-path", bad],
                       capture_output=True, text=True, timeout=30)
    check(p.returncode == 1 and "Egress:AzureBlobStorage:z:AccountUri" in p.stderr
          and "Egress:S3Storage:x:BucketName" in p.stderr and "sak-0123456789" not in p.stderr + p.stdout,
          f"config show names every egress problem, status 1 ({p.returncode}: {p.stderr.strip()})")
    p = subprocess.run([os.environ["DOTMON_BIN"], "collect", "--no-auth", "--urls", "http://127.0.0.1:0",
                        "--configuration-file-path", bad], capture_output=True, text=True, timeout=30,
                       env=dict(os.environ, TMPDIR=work))
    check(p.returncode != 0 and "Egress:S3Storage:x:BucketName" in p.stderr and "Now listening" not in p.stderr,
          f"collect refuses to start with an invalid Egress section ({p.returncode}: {p.stderr[-600:]})")


def reload_case(work, app):
    """With an API key from configuration dotmon watches its configuration file: a new Egress
    section takes effect without a restart, an invalid one is named and changes nothing."""
    key = json.loads(subprocess.run([os.environ["DOTMON_BIN"], "generatekey", "-o", "machinejson"],
                                    capture_output=True, text=True, timeout=30).stdout)
    cfg = os.path.join(work, "reload.json")
    auth = {"MonitorApiKey": {"Subject": key["Subject"], "PublicKey": key["PublicKey"]}}

    def write(egress):
        tmp = cfg + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"Authentication": auth, "Egress": egress}, f)
        os.replace(tmp, cfg)

    def usable(name):
        try:
            status, _, _ = api.request("GET", f"/trace?pid={app.pid}&durationSeconds=0&egressProvider={name}")
        except OSError:
            return False  # not listening yet
        return status == 202

    write({"FileSystem": {"a": {"DirectoryPath": os.path.join(work, "ra")}}})
    port = free_port()
    log = open(os.path.join(work, "reload.log"), "w+")
    dm = subprocess.Popen([os.environ["DOTMON_BIN"], "collect", "--urls", f"http://127.0.0.1:{port}", "--metrics",
                           "false", "--configuration-file-path", cfg], stdout=subprocess.DEVNULL, stderr=log,
                          env=dict(os.environ, TMPDIR=work))
    api = Api(port, key["AuthorizationHeader"])
    try:
        wait_for(lambda: usable("a"), 30, 0.5)
        check(usable("a") and not usable("b"), "reload: provider a is there, b is not")
        write({"FileSystem": {"a": {"DirectoryPath": os.path.join(work, "ra")},
                              "b": {"DirectoryPath": os.path.join(work, "rb")}}})
        wait_for(lambda: usable("b"), 10, 0.5)
        check(usable("b"), "reload: a provider added to the file is usable without a restart")
        write({"FileSystem": {"c": {"FileMode": "0600"}}})
        wait_log(log, r"Egress:FileSystem:c:DirectoryPath", 10)
        log.seek(0)
        text = log.read()
        check(usable("b") and "Egress:FileSystem:c:DirectoryPath" in text,
              "reload: an invalid Egress section is named, the providers stay as they were")
    finally:
        stop(dm)
        log.close()


def main():
    for tool in (NODE, AWS):
        if shutil.which(tool) is None:
            print(f"skipped: {tool} not found")
            return 77
    t0 = time.monotonic()
    work = tempfile.mkdtemp(prefix="dotmon-egress-")
    os.chmod(work, 0o700)
    out = os.path.join(work, "artifacts")
    srv = app = dm = log = None
    try:
        config_show(work)
        srv = Server(work, "s3")
        ep = f"http://127.0.0.1:{srv.port}"
        rc, _, err = aws(ep, "s3api", "create-bucket", "--bucket", BUCKET)
        check(rc == 0, f"create the bucket with awscli ({err})")
        s3 = {"BucketName": BUCKET, "Endpoint": ep, "ForcePathStyle": "true", "AccessKeyId": "S3RVER",
              "CopyBufferSize": str(5 * MIB)}
        profile = os.path.join(work, "aws", "credentials")
        os.makedirs(os.path.dirname(profile))
        with open(profile, "w") as f:
            f.write(f"[monitor]\naws_access_key_id = S3RVER\naws_secret_access_key = S3RVER\n"
                    f"aws_session_token = {PROFILE_TOKEN}\n")
        os.chmod(profile, 0o600)
        doc = {"endpoint": ep, "bucketName": BUCKET, "forcePathStyle": True, "useKmsEncryption": True,
               "kmsEncryptionKey": KMS_KEY, "awsProfileName": "monitor", "awsProfilePath": profile,
               "copyBufferSize": 1024}
        cfg = os.path.join(work, "settings.json")
        with open(cfg, "w") as f:
            json.dump({"GlobalCounter": {"IntervalSeconds": 1},
                       "Egress": {"FileSystem": {"files": {"DirectoryPath": out}},
                                  "S3Storage": {"s3": dict(s3, SecretAccessKeyName="s3secret"),
                                                "s3signed": dict(s3, SecretAccessKeyName="s3secret",
                                                                 SessionToken=SESSION_TOKEN,
                                                                 PreSignedUrlExpiry="00:05:00"),
                                                "s3bad": dict(s3, SecretAccessKey=WRONG_SECRET),
                                                "s3doc": doc,
                                                "s3noprofile": dict(doc, awsProfileName="absent")},
                                  "Properties": {"s3secret": "S3RVER"}}}, f)
        app = App(work)
        port = free_port()
        log = open(os.path.join(work, "dotmon.log"), "w+")
        dm = start_dotmon(work, port, log, [app.pid], 30 * MULT, args=("--configuration-file-path", cfg))
        api = Api(port)
        for case in (lambda: unknown_provider(api, app), lambda: trace_to_files(api, app, out),
                     lambda: logs_to_files(api, app), lambda: livemetrics_to_files(api, app),
                     lambda: dump_to_files(api, app, work, out), lambda: dump_to_s3(api, app, work, ep),
                     lambda: stop_s3_trace(api, app, work, ep), lambda: cancel_files_traces(api, app, out),
                     lambda: cancel_s3_dump(api, app, work, ep), lambda: failing_store(api, app, work, ep, srv),
                     lambda: runtime_dies(api, work, out), lambda: presigned_s3(api, app),
                     lambda: documented_s3(api, app, ep, srv),
                     lambda: reload_case(work, app)):
            t = time.monotonic()
            case()
            print(f"     ({time.monotonic() - t:.1f} s)", flush=True)
        # SIGTERM while a dump's parts upload: dotmon exits in time, and leaves nothing behind.
        op = s3_dump(api, app, 600, "big dump to S3 (then SIGTERM)")
        if op is not None:
            wait_for(lambda: multipart_uploads(ep, BUCKET), 60, 0.05)
        t = time.monotonic()
        dm.terminate()
        code = dm.wait(30 * MULT)
        check(code == 0 and time.monotonic() - t < 6 * MULT,
              f"dotmon stops cleanly during an upload (exit {code} in {time.monotonic() - t:.1f} s)")
        ok, why = no_orphans(ep, BUCKET)
        check(ok, f"SIGTERM mid-upload: no multipart upload left ({why})")
        no_dump_left("SIGTERM mid-upload", work)
        app.kill()
        log.seek(0)
        text = log.read()
        check(WRONG_SECRET not in text and "S3RVER\"" not in text and PROFILE_TOKEN not in text,
              "no secret in dotmon's log")
        check(SIGNATURES and not any(v in text for v in SIGNATURES + [SESSION_TOKEN, urllib.parse.quote(SESSION_TOKEN, safe="")])
              and "X-Amz-Security-Token=REDACTED" in text and "X-Amz-Signature=REDACTED" in text,
              "no pre-signed URL's signature or session token in dotmon's log (REDACTED there)")
        check(dmtest.sanitizer_report(text) is None, "no sanitizer report")
    finally:
        if app is not None:
            app.kill()
        stop(dm)
        if srv is not None:
            srv.stop()
        if log is not None:
            if FAILS:
                log.seek(0)
                sys.stderr.write(log.read()[-6000:])
            log.close()
        shutil.rmtree(work, ignore_errors=True)
    print(f"egress_routes: {time.monotonic() - t0:.1f} s, {len(FAILS)} failed")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
