# SPDX-License-Identifier: MIT
"""s3rver (tests/egress/s3rver/server.js) and Debian's awscli for the egress tests (check_s3.py,
check_egress_routes.py): a server process on a free port, awscli calls against it, and the two
questions every test asks after an upload: is there an orphaned multipart upload, is the object
absent.

Environment: S3RVER_DIR (node_modules inside), S3RVER_JS, NODE_EXE, AWS_EXE.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from dmtest import fetch, stop  # noqa: E402

NODE = os.environ.get("NODE_EXE", "node")
AWS = os.environ.get("AWS_EXE", "/usr/bin/aws")


class Server:
    """One server.js process (plain HTTP, or HTTPS with cert/key)."""

    def __init__(self, work, name, cert=None, key=None):
        self.data = os.path.join(work, name)
        os.makedirs(self.data)
        # One JSON line per request received (server.js): what clients sent and signed.
        self.request_log = os.path.join(work, name + ".requests")
        env = dict(os.environ, NODE_PATH=os.path.join(os.environ["S3RVER_DIR"], "node_modules"),
                   S3RVER_REQUEST_LOG=self.request_log)
        args = [NODE, os.environ["S3RVER_JS"], self.data] + ([cert, key] if cert else [])
        self.err = open(os.path.join(work, name + ".log"), "w")
        self.proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=self.err, text=True)
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("s3rver did not start; see " + self.err.name)
        self.port = json.loads(line)["port"]

    def fault(self, part, mode, times):
        """The next `times` UploadPart requests for part `part` answer 500 ("500") or lose their
        connection ("drop")."""
        st, _, body = fetch(f"http://127.0.0.1:{self.port}/__fault", "POST", timeout=10,
                            data=json.dumps({"part": part, "mode": mode, "times": times}).encode())
        if st != 204:
            raise RuntimeError(f"s3rver refused the fault: {st} {body[:200]!r}")

    def requests(self, key_part):
        """The logged requests whose URL contains key_part, oldest first."""
        if not os.path.exists(self.request_log):
            return []
        with open(self.request_log) as f:
            return [r for r in map(json.loads, f) if key_part in r["url"]]

    def stop(self):
        stop(self.proc, 10)
        self.err.close()


def aws(endpoint, *args, ca=None):
    """awscli against endpoint with s3rver's account; (returncode, stdout, stderr)."""
    env = dict(os.environ, AWS_ACCESS_KEY_ID="S3RVER", AWS_SECRET_ACCESS_KEY="S3RVER",
               AWS_DEFAULT_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true",
               AWS_CONFIG_FILE="/dev/null", AWS_SHARED_CREDENTIALS_FILE="/dev/null")
    cmd = [AWS, "--endpoint-url", endpoint, "--output", "json"] + (["--ca-bundle", ca] if ca else [])
    p = subprocess.run(cmd + list(args), env=env, capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def multipart_uploads(endpoint, bucket, ca=None):
    """The bucket's multipart uploads in progress (list-multipart-uploads), or None on error."""
    rc, out, _ = aws(endpoint, "s3api", "list-multipart-uploads", "--bucket", bucket, ca=ca)
    if rc != 0:
        return None
    return json.loads(out).get("Uploads", []) if out.strip() else []


def no_orphans(endpoint, bucket, ca=None):
    """(True, _) when the bucket has no multipart upload in progress."""
    uploads = multipart_uploads(endpoint, bucket, ca)
    return uploads == [], uploads


def absent(endpoint, bucket, key):
    rc, _, _ = aws(endpoint, "s3api", "head-object", "--bucket", bucket, "--key", key)
    return rc != 0
