#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The S3 store end to end, against a real S3-compatible server, judged by an independent client.

The server is s3rver (npm, pinned) behind tests/egress/s3rver/server.js, which re-checks every
SigV4 signature (header and pre-signed URL) with the aws4 package, serves the two multipart calls
s3rver lacks (AbortMultipartUpload, ListMultipartUploads) from s3rver's own store, and injects
faults into chosen parts. The uploads go through the egress target API (tests' s3_upload driver
on a libuv loop); what landed is read back with Debian's awscli (`aws s3api head-object /
get-object / list-multipart-uploads`) and compared byte for byte with what the driver produced.

dotnet-monitor's documented S3 settings (issue 32 item 8) are held against the same server:
CopyBufferSize 1024 (raised to 5 MiB parts), UseKmsEncryption/KmsEncryptionKey (the SSE-KMS
headers seen sent and signed in server.js's request log), AwsProfileName/AwsProfilePath and the
default credential chain (awscli reads with the same profile file), and the container chain of
EKS: IRSA (STS AssumeRoleWithWebIdentity) and the container credentials endpoint, answered by a
local responder here, with refresh of short-lived credentials mid-upload and their failures.

Environment (set by tests/egress/CMakeLists.txt): S3_UPLOAD, S3RVER_DIR (node_modules inside),
S3RVER_JS, NODE_EXE, AWS_EXE, S3_SANITIZED (non-empty in sanitizer builds).
"""
import datetime
import filecmp
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

from s3env import AWS, NODE, Server, absent, aws, no_orphans

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import dmtest  # noqa: E402

UPLOAD = os.environ["S3_UPLOAD"]
MIB = 1024 * 1024
UV_ECANCELED = -125
AGENT_E_UNTRUSTED = -4012
AGENT_E_AUTH = -4010

checks = []


def check(name, cond, detail=""):
    """dmtest.check, with detail after the name when it fails."""
    checks.append(name)
    return dmtest.check(cond, name if cond else f"{name}: {detail}")


def upload(work, endpoint, bucket, key, size, *settings, chunk=65536, abort_after=None, keys=True,
           env=None):
    """keys=False: no AccessKeyId/SecretAccessKey, the credential chain decides (env: the
    driver's whole environment then)."""
    out = os.path.join(work, "sent.bin")
    cmd = [UPLOAD, "--key", key, "--size", str(size), "--chunk", str(chunk), "--out", out,
           f"BucketName={bucket}", f"Endpoint={endpoint}", "ForcePathStyle=true"]
    cmd += (["AccessKeyId=S3RVER", "SecretAccessKey=S3RVER"] if keys else []) + list(settings)
    if abort_after is not None:
        cmd += ["--abort-after", str(abort_after)]
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    # 0: on_done came once and the loop closed clean; 3: settings refused. Anything else is the
    # driver's own failure (a leak or a sanitizer report included).
    check(f"driver exit status for {key}", p.returncode in (0, 3), p.stderr[-2000:])
    r = {"rc": p.returncode, "stderr": p.stderr, "stdout": p.stdout, "seconds": time.monotonic() - t0,
         "sent": out}
    for line in p.stdout.splitlines():
        if line.startswith("status="):
            head, _, rest = line.partition(" ")
            r["status"] = int(head.split("=", 1)[1])
            k, _, v = rest.partition("=")
            r[k] = v
        elif line.startswith("maxrss_kb="):
            for kv in line.split():
                k, v = kv.split("=")
                r[k] = int(v)
        elif line.startswith("config="):
            r["config"] = line[7:]
    return r


def same_object(work, endpoint, bucket, key, sent, ca=None):
    got = os.path.join(work, "got.bin")
    rc, out, err = aws(endpoint, "s3api", "head-object", "--bucket", bucket, "--key", key, ca=ca)
    if rc != 0:
        return False, err
    length = json.loads(out)["ContentLength"]
    if length != os.path.getsize(sent):
        return False, f"ContentLength {length} != {os.path.getsize(sent)}"
    rc, out, err = aws(endpoint, "s3api", "get-object", "--bucket", bucket, "--key", key, got, ca=ca)
    if rc != 0:
        return False, err
    return filecmp.cmp(sent, got, shallow=False), "bytes differ"


def plain_cases(work, srv, memory_only=False):
    """memory_only: the multipart upload (and its max-RSS bound) alone."""
    ep = f"http://127.0.0.1:{srv.port}"
    rc, _, err = aws(ep, "s3api", "create-bucket", "--bucket", "dumps")
    check("create bucket with awscli", rc == 0, err)

    # Multipart: 64 MiB and an odd tail in 64 KiB writes, 5 MiB parts: 13 parts, memory ~2 parts.
    size = 64 * MIB + 12345
    r = upload(work, ep, "dumps", "traces/2026/dump 1+ü.nettrace", size, "CopyBufferSize=5242880")
    check("multipart upload: on_done ok, loop closed clean",
          r.get("status") == 0 and r["rc"] == 0, r)
    check("multipart upload: location is the object URL",
          r.get("location") == f"{ep}/dumps/traces/2026/dump%201%2B%C3%BC.nettrace", r.get("location"))
    ok, why = same_object(work, ep, "dumps", "traces/2026/dump 1+ü.nettrace", r["sent"])
    check("multipart upload: awscli reads back the same bytes", ok, why)
    ok, why = no_orphans(ep, "dumps")
    check("multipart upload: no multipart upload left", ok, why)
    check("multipart upload: the producer was paused and resumed (egress_full / on_ready)",
          r.get("ready_calls", 0) >= 10, r)
    if not os.environ.get("S3_SANITIZED"):
        check("multipart upload: memory bounded (max RSS < 40 MiB for 64 MiB)",
              r.get("maxrss_kb", 1 << 30) < 40 * 1024, r.get("maxrss_kb"))
    print(f"     (64 MiB in {r['seconds']:.2f} s, max RSS {r.get('maxrss_kb')} kB)", flush=True)
    if memory_only:
        return

    # Smaller than a part: one PutObject; and an empty artifact.
    r = upload(work, ep, "dumps", "small.json", 100000, chunk=4096)
    ok, why = same_object(work, ep, "dumps", "small.json", r["sent"])
    check("small artifact: one PutObject, same bytes", r.get("status") == 0 and ok, (r, why))
    r = upload(work, ep, "dumps", "empty.log", 0)
    ok, why = same_object(work, ep, "dumps", "empty.log", r["sent"])
    check("empty artifact: an empty object", r.get("status") == 0 and ok, (r, why))

    # Pre-signed URL: works (its signature re-checked by aws4) until tampered with.
    r = upload(work, ep, "dumps", "presigned/a b.gcdump", 300000, "PreSignedUrlExpiry=00:05:00")
    loc = r.get("location", "")
    check("pre-signed: location carries X-Amz-Expires=300 and a signature",
          "X-Amz-Expires=300" in loc and "X-Amz-Signature=" in loc, loc)
    st, _, body = dmtest.fetch(loc) if loc else (0, None, b"no location")
    with open(r["sent"], "rb") as f:
        check("pre-signed: GET with the URL alone returns the bytes", st == 200 and body == f.read(), (st, body[:200]))
    bad = loc[:-1] + ("0" if loc[-1:] != "0" else "1")
    st, _, _ = dmtest.fetch(bad) if loc else (0, None, b"")
    check("pre-signed: a tampered signature is refused", st == 403, st)

    # A part that fails twice with 500, then goes through: retried with backoff, same bytes.
    srv.fault(2, "500", 2)
    r = upload(work, ep, "dumps", "retry.bin", 12 * MIB, "CopyBufferSize=5242880")
    ok, why = same_object(work, ep, "dumps", "retry.bin", r["sent"])
    check("transient 500 on part 2: retried, stored, same bytes", r.get("status") == 0 and ok, (r, why))
    check("transient 500 on part 2: retries logged", "attempt 3 of 5" in r["stderr"], r["stderr"][-500:])

    # A part that always fails: on_done with the store's words, the upload aborted.
    srv.fault(3, "500", 100)
    r = upload(work, ep, "dumps", "fail500.bin", 16 * MIB, "CopyBufferSize=5242880")
    err = r.get("error", "")
    check("permanent 500 on part 3: on_done error with S3's Code and Message",
          r.get("status", 0) < 0 and "InternalError" in err and "injected failure of part 3" in err
          and "part 3" in err and r["rc"] == 0, r)
    ok, why = no_orphans(ep, "dumps")
    check("permanent 500 on part 3: AbortMultipartUpload left no upload", ok, why)
    check("permanent 500 on part 3: no object", absent(ep, "dumps", "fail500.bin"))
    print(f"     (gave up after {r['seconds']:.2f} s)", flush=True)
    srv.fault(3, "500", 0)

    # The connection dropped on every try of part 2.
    srv.fault(2, "drop", 100)
    r = upload(work, ep, "dumps", "drop.bin", 12 * MIB, "CopyBufferSize=5242880")
    check("dropped connection on part 2: on_done error",
          r.get("status", 0) < 0 and "UploadPart (part 2)" in r.get("error", "") and r["rc"] == 0, r)
    ok, why = no_orphans(ep, "dumps")
    check("dropped connection on part 2: no upload left", ok, why)
    srv.fault(2, "drop", 0)

    # egress_abort in the middle: UV_ECANCELED, nothing left.
    r = upload(work, ep, "dumps", "aborted.bin", 40 * MIB, "CopyBufferSize=5242880",
               abort_after=12 * MIB)
    check("egress_abort mid-upload: on_done UV_ECANCELED", r.get("status") == UV_ECANCELED and r["rc"] == 0, r)
    ok, why = no_orphans(ep, "dumps")
    check("egress_abort mid-upload: no upload left", ok, why)
    check("egress_abort mid-upload: no object", absent(ep, "dumps", "aborted.bin"))

    # A wrong secret: 403 SignatureDoesNotMatch, not retried.
    out = os.path.join(work, "x.bin")
    p = subprocess.run([UPLOAD, "--key", "k", "--size", "1000", "--out", out, "BucketName=dumps",
                        f"Endpoint={ep}", "ForcePathStyle=true", "AccessKeyId=S3RVER",
                        "SecretAccessKey=not-the-secret"], capture_output=True, text=True, timeout=60)
    check("wrong secret: 403 SignatureDoesNotMatch at once, secret not in the output",
          f"status={AGENT_E_AUTH} " in p.stdout and "SignatureDoesNotMatch" in p.stdout
          and "not-the-secret" not in p.stdout + p.stderr and "attempt" not in p.stderr, p.stdout + p.stderr)

    # A bucket that does not exist: the store's NoSuchBucket.
    r = upload(work, ep, "nobucket", "k", 1000)
    check("missing bucket: NoSuchBucket", r.get("status", 0) < 0 and "NoSuchBucket" in r.get("error", ""), r)

    # Settings out of range never start anything.
    r = upload(work, ep, "dumps", "k", 10, "CopyBufferSize=0", "PreSignedUrlExpiry=00:00:10")
    check("settings: CopyBufferSize and PreSignedUrlExpiry ranges are enforced",
          r["rc"] == 3 and "Egress:S3Storage:test:CopyBufferSize: " in r["stdout"]
          and "Egress:S3Storage:test:PreSignedUrlExpiry: " in r["stdout"], r)


def documented_cases(work, srv):
    """dotnet-monitor's documented S3 settings (issue 32 item 8): its egress documentation's
    CopyBufferSize 1024, SSE-KMS, and credentials from an AWS profile, each judged by what s3rver
    received (its request log) and by awscli reading the object back."""
    ep = f"http://127.0.0.1:{srv.port}"

    # CopyBufferSize 1024 (the documentation's example): raised to S3's 5 MiB minimum, as
    # dotnet-monitor's MultiPartUploadStream does: 12 MiB go in three parts.
    r = upload(work, ep, "dumps", "doc/copybuffer.bin", 12 * MIB, "CopyBufferSize=1024")
    ok, why = same_object(work, ep, "dumps", "doc/copybuffer.bin", r["sent"])
    parts = [q for q in srv.requests("doc/copybuffer.bin") if "partNumber=" in q["url"]]
    check("CopyBufferSize 1024: loads, raised to 5 MiB (said in the log), 3 parts, same bytes",
          r.get("status") == 0 and ok and len(parts) == 3
          and "parts of 5242880 bytes (5 MiB) are used" in r["stderr"], (r, why, len(parts)))

    # SSE-KMS: the two requests that create the object carry and sign the headers; s3rver's
    # aws4 re-check of every signed header passed (status 0) and awscli reads the bytes back.
    kms_key = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    for name, size in (("doc/kms-multipart.bin", 11 * MIB), ("doc/kms-put.bin", 70000)):
        r = upload(work, ep, "dumps", name, size, "CopyBufferSize=5242880", "UseKmsEncryption=true",
                   f"KmsEncryptionKey={kms_key}")
        reqs = srv.requests(name)  # before awscli's own requests
        ok, why = same_object(work, ep, "dumps", name, r["sent"])
        creates = [q for q in reqs if q["url"].endswith("?uploads=") or
                   (q["method"] == "PUT" and "partNumber=" not in q["url"])]
        others = [q for q in reqs if q not in creates]
        signed = all(q["sse"] == "aws:kms" and q["kmsKeyId"] == kms_key
                     and "x-amz-server-side-encryption" in q["signedHeaders"]
                     and "x-amz-server-side-encryption-aws-kms-key-id" in q["signedHeaders"]
                     for q in creates)
        check(f"SSE-KMS {name}: stored, same bytes, the create request sent and signed "
              "x-amz-server-side-encryption: aws:kms and the key id, no other request did",
              r.get("status") == 0 and ok and len(creates) == 1 and signed
              and all(q["sse"] is None for q in others), (r, why, reqs))
    r = upload(work, ep, "dumps", "doc/kms-default.bin", 1000, "UseKmsEncryption=true")
    reqs = srv.requests("doc/kms-default.bin")
    check("SSE-KMS without KmsEncryptionKey: aws:kms alone (the bucket's default key)",
          r.get("status") == 0 and len(reqs) == 1 and reqs[0]["sse"] == "aws:kms"
          and reqs[0]["kmsKeyId"] is None, (r, reqs))

    profile_cases(work, srv, ep)


def chain_env(home, **extra):
    """The driver's environment for the credential chain: no AWS variable but those given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["HOME"] = home
    env.update(extra)
    return env


def profile_cases(work, srv, ep):
    home = os.path.join(work, "home")
    os.makedirs(os.path.join(home, ".aws"))
    secret_file = os.path.join(work, "aws-credentials")
    with open(secret_file, "w") as f:
        f.write("# dotmon's test profile\n[default]\naws_access_key_id = NOT-THIS-ONE\n"
                "aws_secret_access_key = nope\n\n[monitor]\n"
                "AWS_ACCESS_KEY_ID = S3RVER\naws_secret_access_key=S3RVER\n"
                "aws_session_token = profile-session-token-value\n"
                "[tool]\ncredential_process = /bin/false\n")
    with open(os.path.join(work, "config"), "w") as f:
        f.write("[profile monitor]\nregion = us-east-1\noutput = json\n")
    os.chmod(secret_file, 0o600)
    env = chain_env(home)

    # AwsProfileName + AwsProfilePath, the documented pair: the profile's keys and token sign.
    r = upload(work, ep, "dumps", "doc/profile.bin", 6 * MIB, "CopyBufferSize=5242880",
               "AwsProfileName=monitor", f"AwsProfilePath={secret_file}", keys=False, env=env)
    reqs = srv.requests("doc/profile.bin")
    ok, why = same_object(work, ep, "dumps", "doc/profile.bin", r["sent"])
    check("AwsProfileName/AwsProfilePath: signed with the profile's keys and session token, "
          "stored, same bytes",
          r.get("status") == 0 and ok and reqs and all(
              q["accessKeyId"] == "S3RVER" and q["securityToken"]
              and "x-amz-security-token" in q["signedHeaders"] for q in reqs)
          and "credentials for" in r["stderr"] and "from profile monitor" in r["stderr"],
          (r, why, reqs))
    check("AwsProfileName: no secret from the profile in the output",
          "profile-session-token-value" not in r["stdout"] + r["stderr"], r["stderr"][-800:])
    # awscli takes the same file and profile the same way.
    p = subprocess.run([AWS, "--endpoint-url", ep, "--output", "json", "s3api", "head-object",
                        "--bucket", "dumps", "--key", "doc/profile.bin"], capture_output=True,
                       text=True, timeout=120,
                       env=chain_env(home, AWS_SHARED_CREDENTIALS_FILE=secret_file,
                                     AWS_CONFIG_FILE=os.path.join(work, "config"),
                                     AWS_PROFILE="monitor", AWS_EC2_METADATA_DISABLED="true"))
    check("awscli reads the object with the same profile file", p.returncode == 0, p.stderr)

    # A credentials file others may read: used, with a warning (as the AWS CLI; no refusal).
    check("AwsProfileName: a 0600 credentials file draws no warning", "can be read by other" not in r["stderr"],
          r["stderr"][-500:])
    os.chmod(secret_file, 0o644)
    r = upload(work, ep, "dumps", "doc/profile-0644.bin", 1000, "AwsProfileName=monitor",
               f"AwsProfilePath={secret_file}", keys=False, env=env)
    check("AwsProfileName: a 0644 credentials file is used, with a warning naming it",
          r.get("status") == 0 and f"AWS credentials file {secret_file} can be read by other users (mode 0644)"
          in r["stderr"], r)
    os.chmod(secret_file, 0o600)

    # A profile that is not there: dotnet-monitor's "AWS profile not found", at the action.
    r = upload(work, ep, "dumps", "doc/noprofile.bin", 1000, "AwsProfileName=absent",
               f"AwsProfilePath={secret_file}", keys=False, env=env)
    check("AwsProfileName absent from the file: on_done error naming it, nothing stored",
          r.get("status", 0) < 0 and "AWS profile absent not found" in r.get("error", "")
          and absent(ep, "dumps", "doc/noprofile.bin"), r)
    r = upload(work, ep, "dumps", "doc/tool.bin", 1000, "AwsProfileName=tool",
               f"AwsProfilePath={secret_file}", keys=False, env=env)
    check("credential_process profile: refused as not implemented by dotmon",
          r.get("status", 0) < 0 and "credential_process" in r.get("error", "")
          and "does not implement" in r.get("error", ""), r)
    r = upload(work, ep, "dumps", "doc/nofile.bin", 1000, "AwsProfileName=monitor",
               f"AwsProfilePath={os.path.join(work, 'missing')}", keys=False, env=env)
    check("AwsProfilePath that does not exist: on_done error naming the file",
          r.get("status", 0) < 0 and "missing" in r.get("error", ""), r)

    # The default chain without settings: AWS_PROFILE in AWS_SHARED_CREDENTIALS_FILE, then
    # ~/.aws/credentials' [default], then the environment's keys.
    r = upload(work, ep, "dumps", "doc/awsprofile.bin", 1000, keys=False,
               env=chain_env(home, AWS_PROFILE="monitor", AWS_SHARED_CREDENTIALS_FILE=secret_file))
    check("AWS_PROFILE + AWS_SHARED_CREDENTIALS_FILE: stored", r.get("status") == 0, r)
    with open(os.path.join(home, ".aws", "credentials"), "w") as f:
        f.write("[default]\naws_access_key_id = S3RVER\naws_secret_access_key = S3RVER\n")
    r = upload(work, ep, "dumps", "doc/homedefault.bin", 1000, keys=False,
               env=chain_env(home, AWS_ACCESS_KEY_ID="ENVKEY", AWS_SECRET_ACCESS_KEY="wrong"))
    reqs = srv.requests("doc/homedefault.bin")
    check("~/.aws/credentials [default] comes before the environment's keys",
          r.get("status") == 0 and reqs and reqs[0]["accessKeyId"] == "S3RVER", (r, reqs))
    os.remove(os.path.join(home, ".aws", "credentials"))
    r = upload(work, ep, "dumps", "doc/envkeys.bin", 1000, keys=False,
               env=chain_env(home, AWS_ACCESS_KEY_ID="S3RVER", AWS_SECRET_ACCESS_KEY="S3RVER"))
    check("no profile: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY", r.get("status") == 0, r)
    r = upload(work, ep, "dumps", "doc/nocreds.bin", 1000, keys=False, env=chain_env(home))
    check("no credentials at all: on_done error that lists the chain",
          r.get("status", 0) < 0 and "no credentials" in r.get("error", ""), r)


class CredsResponder(http.server.ThreadingHTTPServer):
    """A local STS (POST /: AssumeRoleWithWebIdentity, form body, XML answer) and container
    credentials endpoint (GET /creds, Authorization checked, JSON answer), answering the shapes AWS
    documents. Each answer hands out new keys TMPKEY<n> (server.js knows their secret) that
    expire `lifetime` seconds later; `mode` makes it fail instead: "deny" (STS 403
    InvalidIdentityToken / container 401) or "garbage" (200 with a body that is not the shape)."""

    def __init__(self):
        super().__init__(("127.0.0.1", 0), CredsHandler)
        self.calls = []
        self.mode = "ok"
        self.lifetime = 3600
        self.auth = "container-auth-token-value"
        self.n = 0
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def next_keys(self):
        self.n += 1
        when = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=self.lifetime)
        return (f"TMPKEY{self.n}", f"secret-of-TMPKEY{self.n}", f"session-token-{self.n}",
                when.strftime("%Y-%m-%dT%H:%M:%SZ"))


class CredsHandler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, status, ctype, body):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        srv = self.server
        form = urllib.parse.parse_qs(self.rfile.read(int(self.headers.get("Content-Length", 0))).decode())
        srv.calls.append({"kind": "sts", "path": self.path, "form": form,
                          "ctype": self.headers.get("Content-Type", ""),
                          "signed": "Authorization" in self.headers})
        if srv.mode == "deny":
            return self.answer(400, "text/xml", "<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">"
                               "<Error><Type>Sender</Type><Code>InvalidIdentityToken</Code>"
                               "<Message>Couldn't retrieve verification key from your identity provider</Message>"
                               "</Error><RequestId>r</RequestId></ErrorResponse>")
        if srv.mode == "garbage":
            return self.answer(200, "text/xml", "<AssumeRoleWithWebIdentityResponse><Unclosed>")
        kid, secret, token, exp = srv.next_keys()
        self.answer(200, "text/xml",
                    "<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">"
                    "<AssumeRoleWithWebIdentityResult><SubjectFromWebIdentityToken>system:serviceaccount:ns:sa"
                    "</SubjectFromWebIdentityToken><Credentials>"
                    f"<SessionToken>{token}</SessionToken><SecretAccessKey>{secret}</SecretAccessKey>"
                    f"<Expiration>{exp}</Expiration><AccessKeyId>{kid}</AccessKeyId>"
                    "</Credentials></AssumeRoleWithWebIdentityResult>"
                    "<ResponseMetadata><RequestId>r</RequestId></ResponseMetadata>"
                    "</AssumeRoleWithWebIdentityResponse>")

    def do_GET(self):
        srv = self.server
        srv.calls.append({"kind": "container", "path": self.path,
                          "auth": self.headers.get("Authorization")})
        if srv.mode == "deny" or self.headers.get("Authorization") != srv.auth:
            return self.answer(401, "text/plain", "unauthorized")
        if srv.mode == "garbage":
            return self.answer(200, "application/json", "[1, 2")
        kid, secret, token, exp = srv.next_keys()
        self.answer(200, "application/json", json.dumps(
            {"AccessKeyId": kid, "SecretAccessKey": secret, "Token": token, "Expiration": exp,
             "RoleArn": "arn:aws:iam::111122223333:role/r"}))


def remote_cases(work, srv):
    """The container credential chain users have on EKS: IRSA (STS AssumeRoleWithWebIdentity) and
    the container credentials endpoint, against a local responder; s3rver re-checks every
    signature with the secret of the key handed out."""
    ep = f"http://127.0.0.1:{srv.port}"
    home = os.path.join(work, "home-remote")
    os.makedirs(home)
    cr = CredsResponder()
    sts = f"http://127.0.0.1:{cr.server_address[1]}"
    token = os.path.join(work, "web-identity-token")
    with open(token, "w") as f:
        f.write("eyJhbGciOiJSUzI1NiJ9.web-identity-token-value.sig\n")
    irsa = dict(AWS_WEB_IDENTITY_TOKEN_FILE=token, AWS_ROLE_ARN="arn:aws:iam::111122223333:role/dotmon",
                AWS_ROLE_SESSION_NAME="dotmon-test", AWS_ENDPOINT_URL_STS=sts, AWS_REGION="us-east-1")
    secrets = ("web-identity-token-value", "secret-of-TMPKEY", "session-token-", "container-auth-token-value")
    try:
        r = upload(work, ep, "dumps", "doc/irsa.bin", 70000, keys=False, env=chain_env(home, **irsa))
        reqs = srv.requests("doc/irsa.bin")
        calls = [c for c in cr.calls if c["kind"] == "sts"]
        form = calls[0]["form"] if calls else {}
        check("IRSA: one unsigned AssumeRoleWithWebIdentity with the role, session name and token file",
              len(calls) == 1 and not calls[0]["signed"] and calls[0]["path"] == "/"
              and form.get("Action") == ["AssumeRoleWithWebIdentity"] and form.get("Version") == ["2011-06-15"]
              and form.get("RoleArn") == ["arn:aws:iam::111122223333:role/dotmon"]
              and form.get("RoleSessionName") == ["dotmon-test"]
              and form.get("WebIdentityToken") == ["eyJhbGciOiJSUzI1NiJ9.web-identity-token-value.sig"]
              and calls[0]["ctype"].startswith("application/x-www-form-urlencoded"), cr.calls)
        check("IRSA: the upload is signed with the handed-out key and session token, stored",
              r.get("status") == 0 and reqs and all(q["accessKeyId"] == "TMPKEY1" and q["securityToken"]
                                                     for q in reqs), (r, reqs))
        check("IRSA: no secret in the output", not any(x in r["stdout"] + r["stderr"] for x in secrets),
              r["stderr"][-1000:])

        # Short-lived credentials: fetched again before they expire, mid-upload. 2 s of life, a
        # producer that stalls 2.5 s after the first part: later parts carry newer keys.
        cr.lifetime = 2
        before = len(cr.calls)
        r = upload(work, ep, "dumps", "doc/irsa-refresh.bin", 12 * MIB, "CopyBufferSize=5242880",
                   keys=False, env=chain_env(home, **irsa))
        r2 = subprocess.run([UPLOAD, "--key", "doc/irsa-refresh2.bin", "--size", str(12 * MIB),
                             "--stall-after", str(6 * MIB), "--stall-ms", "2500",
                             f"BucketName=dumps", f"Endpoint={ep}", "ForcePathStyle=true",
                             "CopyBufferSize=5242880"], capture_output=True, text=True, timeout=120,
                            env=chain_env(home, **irsa))
        keys = [q["accessKeyId"] for q in srv.requests("doc/irsa-refresh2.bin")
                if q["method"] in ("POST", "PUT")]
        check("IRSA refresh: short-lived keys fetched again mid-upload, later requests signed "
              "with the newer ones, stored",
              r.get("status") == 0 and "status=0 " in r2.stdout and len(cr.calls) - before >= 3
              and len(set(keys)) >= 2 and keys[-1] != keys[0], (r2.stdout, r2.stderr[-1500:], keys))
        cr.lifetime = 3600

        # Failures at the action, in words, never a crash or a secret.
        for mode, words in (("deny", "InvalidIdentityToken"), ("garbage", "STS's answer")):
            cr.mode = mode
            r = upload(work, ep, "dumps", f"doc/irsa-{mode}.bin", 1000, keys=False,
                       env=chain_env(home, **dict(irsa, AWS_ROLE_SESSION_NAME=f"s-{mode}")))
            check(f"IRSA, STS answers {mode}: on_done error with STS's words, nothing stored",
                  r.get("status", 0) < 0 and words in r.get("error", "") and r["rc"] == 0
                  and not any(x in r["stdout"] + r["stderr"] for x in secrets), r)
        cr.mode = "ok"

        # egress_abort while STS is being asked: cancelled at once, the loop closes clean.
        r = upload(work, ep, "dumps", "doc/irsa-abort.bin", 1 * MIB, keys=False, abort_after=65536,
                   env=chain_env(home, **dict(irsa, AWS_ROLE_SESSION_NAME="s-abort")))
        check("IRSA: egress_abort while the credentials are on their way: UV_ECANCELED, clean",
              r.get("status") == UV_ECANCELED and r["rc"] == 0 and absent(ep, "dumps", "doc/irsa-abort.bin"), r)

        # Environment keys come before web identity in the chain: STS is not asked.
        before = len(cr.calls)
        r = upload(work, ep, "dumps", "doc/irsa-envfirst.bin", 1000, keys=False,
                   env=chain_env(home, AWS_ACCESS_KEY_ID="S3RVER", AWS_SECRET_ACCESS_KEY="S3RVER", **irsa))
        check("chain: AWS_ACCESS_KEY_ID before web identity", r.get("status") == 0 and len(cr.calls) == before, r)

        # The container credentials endpoint (EKS Pod Identity / ECS) with a token file.
        auth_file = os.path.join(work, "container-token")
        with open(auth_file, "w") as f:
            f.write(cr.auth)
        cont = dict(AWS_CONTAINER_CREDENTIALS_FULL_URI=f"{sts}/creds?role=x",
                    AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE=auth_file)
        r = upload(work, ep, "dumps", "doc/container.bin", 70000, keys=False, env=chain_env(home, **cont))
        reqs = srv.requests("doc/container.bin")
        got = [c for c in cr.calls if c["kind"] == "container"]
        check("container endpoint: GET with the token file's Authorization, upload signed with its key",
              r.get("status") == 0 and got and got[-1]["path"] == "/creds?role=x"
              and got[-1]["auth"] == cr.auth and reqs
              and all(q["accessKeyId"] == f"TMPKEY{cr.n}" for q in reqs), (r, got, reqs))
        check("container endpoint: no secret in the output",
              not any(x in r["stdout"] + r["stderr"] for x in secrets), r["stderr"][-1000:])
        r = upload(work, ep, "dumps", "doc/container-401.bin", 1000, keys=False,
                   env=chain_env(home, AWS_CONTAINER_CREDENTIALS_FULL_URI=f"{sts}/creds",
                                 AWS_CONTAINER_AUTHORIZATION_TOKEN="wrong-token"))
        check("container endpoint answers 401: on_done error 'HTTP 401'",
              r.get("status", 0) < 0 and "HTTP 401" in r.get("error", "") and "wrong-token" not in r["stdout"] + r["stderr"], r)
        r = upload(work, ep, "dumps", "doc/container-far.bin", 1000, keys=False,
                   env=chain_env(home, AWS_CONTAINER_CREDENTIALS_FULL_URI="http://192.0.2.10/creds"))
        check("container endpoint over plain http to another host: refused before any request",
              r.get("status", 0) < 0 and "plain http is allowed" in r.get("error", ""), r)
    finally:
        cr.shutdown()
        cr.server_close()


def refused_case(work):
    # Nothing listens: connection errors are retried, then reported.
    r = upload(work, f"http://127.0.0.1:{dmtest.free_port()}", "dumps", "k", 1000)
    check("connection refused: retried, then on_done error",
          r.get("status", 0) < 0 and "cannot connect" in r.get("error", "") and r["seconds"] > 3, r)


def tls_cases(work):
    cert = os.path.join(work, "cert.pem")
    key = os.path.join(work, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                    "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost"], check=True, capture_output=True)
    srv = Server(work, "tls", cert, key)
    try:
        ep = f"https://localhost:{srv.port}"
        rc, _, err = aws(ep, "s3api", "create-bucket", "--bucket", "secure", ca=cert)
        check("TLS: create bucket with awscli over HTTPS", rc == 0, err)
        r = upload(work, ep, "secure", "tls/x.bin", 11 * MIB, f"CertificateAuthorityPath={cert}",
                   "CopyBufferSize=5242880")
        ok, why = same_object(work, ep, "secure", "tls/x.bin", r["sent"], ca=cert)
        check("TLS: multipart over HTTPS with CertificateAuthorityPath, same bytes",
              r.get("status") == 0 and ok and r.get("location", "").startswith(ep), (r, why))
        ok, why = no_orphans(ep, "secure", ca=cert)
        check("TLS: no upload left", ok, why)
        r = upload(work, ep, "secure", "tls/y.bin", 1000)
        check("TLS: a self-signed certificate is refused without CertificateAuthorityPath",
              r.get("status") == AGENT_E_UNTRUSTED and "certificate verification failed" in r.get("error", ""), r)
        r = upload(work, f"https://127.0.0.1:{srv.port}", "secure", "tls/z.bin", 1000,
                   f"CertificateAuthorityPath={cert}")
        check("TLS: a certificate for another name is refused (127.0.0.1 vs DNS:localhost)",
              r.get("status") == AGENT_E_UNTRUSTED, r)
    finally:
        srv.stop()


def main():
    # --memory-only (the normal build, label perf): the multipart upload and its max-RSS bound
    # alone; the sanitizer build runs every case (the RSS bound left out there).
    memory_only = sys.argv[1:] == ["--memory-only"]
    for tool in (NODE, AWS, "openssl"):
        if shutil.which(tool) is None:
            print(f"skipped: {tool} not found")
            return 77
    work = tempfile.mkdtemp(prefix="dotmon-s3-")
    t0 = time.monotonic()
    try:
        srv = Server(work, "plain")
        try:
            plain_cases(work, srv, memory_only)
            if not memory_only:
                documented_cases(work, srv)
                remote_cases(work, srv)
        finally:
            srv.stop()
        if not memory_only:
            refused_case(work)
            tls_cases(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    failed = len(dmtest.FAILS)
    print(f"egress_s3rver: {time.monotonic() - t0:.1f} s")
    print(f"{len(checks) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
