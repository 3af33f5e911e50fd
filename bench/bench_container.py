#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The image under an OCI engine (podman, runc): start-to-ready time and idle memory of the dotmon
container, against the same binary started on the host in the same run (the baseline).

  bench_container.py --repo ROOT --state DIR --dotmon BIN [--runs N]

DIR is a private podman storage holding localhost/dotmon-test:ci (the container_images test, or
`make bench-container`, builds it there). Interleaved rounds of:
  host       BIN collect on a free loopback port, from exec to the first 200 of /readyz;
  container  `podman run -d --read-only` of the image (the Dockerfile's CMD, default bridge
             network), from the command's start to the first 200 of /readyz on the container's
             address; then `podman rm -f`.
  floor      `podman run --rm` of the image with --version: the engine's own cost of starting
             (and removing) a container on that network, which dotmon cannot change.
Prints the medians, the ratios container/host and container/floor, the image size as `podman image inspect` gives it,
and the idle RSS of dotmon inside the container after 2 s.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "container"))
import check_container as cc  # noqa: E402
import check_pod as cp  # noqa: E402


def http_status(url, timeout):
    """The status of GET url, or 0 when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except (OSError, ValueError):
        return 0


def wait_ready(url, deadline_s=30):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        st = http_status(url + "/readyz", timeout=1)
        if st == 200:
            return True
        time.sleep(0.002)
    return False


def host_round(dotmon):
    port = cc.free_port()
    t0 = time.monotonic()
    p = subprocess.Popen([dotmon, "collect", "--urls", f"http://127.0.0.1:{port}"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if not wait_ready(f"http://127.0.0.1:{port}"):
            raise RuntimeError("dotmon on the host never became ready")
        return time.monotonic() - t0
    finally:
        p.terminate()
        p.wait()


def container_round(eng, image, name):
    t0 = time.monotonic()
    eng.podman("run", "-d", "--name", name, "--read-only", image)
    try:
        c = eng.inspect("container", name)
        ip = next(n["IPAddress"] for n in c["NetworkSettings"]["Networks"].values() if n.get("IPAddress"))
        if not wait_ready(f"http://{ip}:52323"):
            raise RuntimeError("the container never became ready")
        ready = time.monotonic() - t0
        time.sleep(2)
        rss = 0
        with open(f"/proc/{c['State']['Pid']}/status", encoding="utf-8") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
        return ready, rss
    finally:
        eng.podman("rm", "-f", "-t", "5", name, check=False)


def engine_floor_round(eng, image):
    """`podman run --rm IMAGE --version` on the same network: what the engine alone costs."""
    t0 = time.monotonic()
    eng.podman("run", "--rm", "--read-only", image, "--version")
    return time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--state", required=True)
    ap.add_argument("--dotmon", required=True)
    ap.add_argument("--runs", type=int, default=10)
    a = ap.parse_args()
    why = cp.prerequisites()
    if why:
        print(f"bench_container: {why}")
        return 1
    eng = cp.Engine(a.state)
    image = cp.DOTMON_IMAGE
    if eng.podman("image", "exists", image, check=False).returncode != 0:
        print(f"bench_container: {image} is not in {a.state} (ctest -R container_images builds it)")
        return 1
    host, ctr, rss, floor = [], [], [], []
    for i in range(a.runs):
        host.append(host_round(os.path.abspath(a.dotmon)))
        floor.append(engine_floor_round(eng, image))
        r, m = container_round(eng, image, f"dotmon-bench-{os.getpid()}-{i}")
        ctr.append(r)
        rss.append(m)
    size = int(eng.inspect("image", image).get("Size") or 0)
    hm, cm = statistics.median(host), statistics.median(ctr)
    print(f"runs: {a.runs} interleaved")
    print(f"start-to-ready, host binary (baseline): median {hm * 1000:.1f} ms (min {min(host) * 1000:.1f}, max {max(host) * 1000:.1f})")
    print(f"start-to-ready, podman run of the image: median {cm * 1000:.1f} ms (min {min(ctr) * 1000:.1f}, max {max(ctr) * 1000:.1f})")
    fm = statistics.median(floor)
    print(f"engine floor, podman run --rm of the image's --version (start, exit, removal): median {fm * 1000:.1f} ms")
    print(f"ratio container/host: {cm / hm:.1f}x; container/engine floor: {cm / fm:.2f}x")
    print(f"image size (podman image inspect): {size / 1e6:.2f} MB")
    print(f"idle RSS of dotmon in the container after 2 s: median {statistics.median(rss)} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
