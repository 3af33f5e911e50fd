#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""dotmon's image built by an OCI engine, and container/k8s's manifests run as pods (podman).

  check_pod.py images --repo ROOT --state DIR --testapp DIR
      Builds, in a private podman storage under DIR (nothing touches the machine's own images):
      dotmon's image with container/image.sh (what `make image` runs) and the test app's image
      (tests/container/testapp.Containerfile: the app as built by ctest, the SDK's .NET runtime,
      the C and C++ libraries they load, FROM scratch), and `make app-image`'s hello image
      (container/app-image.sh), which must run and keep running. Checks the dotmon image against
      container/Dockerfile's final stage (user, entrypoint, command, ports, labels), its files
      against container/rootfs.sh's tree, its OCI annotations, the `podman save` archive, and its
      size as the engine reports it (< 15 MB).

  check_pod.py pod --repo ROOT --state DIR --manifest NAME --dotmon BIN --checker BIN --tracecheck DLL
      Runs container/k8s/NAME with `podman kube play`, the two image names replaced by the local
      images and nothing else changed, the API key in a podman secret named as the manifest's
      Secret. From the host, on the pod's address: /healthz, /readyz, 401 without a token,
      /processes lists the app as pid 1, a 5 s gc-verbose trace is complete (C checker and
      TraceEvent), a Mini dump is an ELF core; dotmon runs as uid 1654 on a read-only root file
      system and changed nothing in it; no secret in its log; the shared volume is empty once the
      pod has stopped, and `podman kube down` leaves no pod, container or volume.

  check_pod.py node --repo ROOT --state DIR --dotmon BIN --checker BIN
      Node mode (issue 34): two app pods played with `podman kube play`, each the test app as pid
      1 with its own /tmp and nothing shared, and container/k8s/node-mode.yaml's DaemonSet run the
      way podman 4.3 can (its kube play knows neither DaemonSet nor hostPID): `podman run` with
      the pod template's settings, each as the flag that means it (host pid namespace, uid 0, the
      documented capabilities only, read-only root, no privilege escalation, the memory limit).
      dotmon lists both apps by host pid with their podman container ids, pod names, namespace
      and nsPid 1; a complete gc-verbose trace, a Mini dump (ELF core), a gcdump and a 2 s CPU
      /profile (its threads' samples), its exceptions history (its session running, /exceptions
      answering), its /stacks (the main thread as 0x1, the app's pid 1, in
      TestApp.Program) and 3 s of /logs (the app's heartbeats) of each;
      /metrics labelled with each pod; a rule filtered on one pod name applies to that pod's app
      only and runs once; an app killed while a Full dump of it is written and started again by
      its pod is a new instance (new host pid and cookie, same pod), the old one leaves the list
      and its /tmp (kept across the restart) holds no dump; dotmon's effective capabilities
      are exactly the documented ones. The same dotmon without them lists no app, counts the
      processes it may not look into in /info?extras=true, and names CAP_SYS_PTRACE in its log.

  check_pod.py dockerfile --repo ROOT --state DIR --dotmon BIN
      Builds container/Dockerfile itself with `buildah bud`, on a Debian 12 base made here with
      debootstrap (no registry is reachable, so debian:12-slim cannot be pulled; BUILD_IMAGE is
      the Dockerfile's own argument for that; the base is kept a week in ~/.cache/dotmon-tests,
      or $XDG_CACHE_HOME/dotmon-tests), and compares the result with `make image`'s image
      from the images step: the same files with the same modes and owners, the same user,
      entrypoint, command, ports and labels. Sizes that differ are listed (a Debian package newer
      on one side than the other), not failed.

All exit 77 (skipped, with the reason) when podman, buildah or runc is missing or not root;
dockerfile also when debootstrap is missing or the Debian mirror cannot be reached.
"""

import argparse
import base64
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_container as cc  # noqa: E402  (Dockerfile parsing, shared with the manifest checks)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "container"))
from app_rootfs import APP_UID, app_rootfs  # noqa: E402  (the app image's files, as `make app-image` lays them out)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from dmtest import fetch, settle  # noqa: E402

SKIP = 77
DOTMON_IMAGE = "localhost/dotmon-test:ci"
APP_IMAGE = "localhost/dotmon-testapp:ci"
HELLO_IMAGE = "localhost/dotmon-hello:ci"  # `make app-image`'s (container/app-image.sh)
SIZE_BUDGET = 15_000_000
MANIFEST_IMAGES = {"dotmon": "dotmon:latest", "app": "mcr.microsoft.com/dotnet/samples:aspnetapp"}


def log(msg):
    print(msg, flush=True)


class Engine:
    """podman/buildah with a private configuration and storage under `state`."""

    def __init__(self, state):
        self.state = os.path.abspath(state)
        # conmon's attach sockets live under the run root: keep its path short.
        self.runroot = "/run/dotmon-test-" + hashlib.sha1(self.state.encode()).hexdigest()[:10]
        os.makedirs(self.state, exist_ok=True)
        conf = os.path.join(self.state, "containers.conf")
        storage = os.path.join(self.state, "storage.conf")
        # The settings known to work on a VM without a unified cgroup hierarchy, as root: runc
        # (crun fails on cgroups there), cgroupfs, ulimits within the host's hard limits, vfs.
        with open(conf, "w", encoding="utf-8") as f:
            f.write('[containers]\ndefault_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]\n'
                    '[engine]\ncgroup_manager = "cgroupfs"\nruntime = "runc"\nevents_logger = "file"\n'
                    f'tmp_dir = "{self.runroot}/libpod"\nvolume_path = "{self.state}/volumes"\n')
        with open(storage, "w", encoding="utf-8") as f:
            f.write(f'[storage]\ndriver = "vfs"\ngraphroot = "{self.state}/storage"\n'
                    f'runroot = "{self.runroot}/storage"\n')
        self.env = dict(os.environ, CONTAINERS_CONF=conf, CONTAINERS_STORAGE_CONF=storage)

    def run(self, args, check=True, timeout=300, **kw):
        r = subprocess.run(args, env=self.env, capture_output=True, text=True, timeout=timeout, **kw)
        if check and r.returncode != 0:
            raise RuntimeError(f"{' '.join(args)}: exit {r.returncode}: {r.stderr.strip()[-2000:]}")
        return r

    def podman(self, *args, **kw):
        return self.run(["podman"] + list(args), **kw)

    def inspect(self, what, name):
        out = json.loads(self.podman(what, "inspect", name).stdout)
        return out[0] if isinstance(out, list) else out   # `pod inspect` gives one object


def prerequisites():
    """None when the engine can run here, else why not."""
    missing = [t for t in ("podman", "buildah", "runc") if shutil.which(t, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin") is None]
    if missing:
        return f"{', '.join(missing)} not installed (Debian: apt-get install podman buildah runc; make test installs them)"
    if os.geteuid() != 0:
        return "needs root (rootless podman needs subuid/subgid ranges this test does not set up)"
    return None


Failures = cc.Failures


# ---------------------------------------------------------------------------------------------
# images
# ---------------------------------------------------------------------------------------------

def image_files(eng, image):
    """{path: (mode, uid)} of the image's files, read through `podman image mount`."""
    mnt = eng.podman("image", "mount", image).stdout.strip()
    try:
        return tree_files(mnt)
    finally:
        eng.podman("image", "unmount", image, check=False)


def tree_files(root):
    out = {}
    for base, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(base, n)
            st = os.lstat(p)
            rel = "/" + os.path.relpath(p, root)
            out[rel] = (st.st_mode & 0o7777, st.st_uid, st.st_size if n in files else 0)
    return out


def cmd_images(a):
    fails = Failures()
    eng = Engine(a.state)
    # A clean storage: leftovers of an earlier run (images, pods, volumes) do not count.
    eng.podman("pod", "rm", "--all", "--force", check=False)
    eng.podman("rmi", "--all", "--force", check=False)

    # dotmon: exactly what `make image` does, into this storage.
    work = os.path.join(eng.state, "dotmon-image")
    archive = os.path.join(work, "dotmon.oci.tar")
    t0 = time.monotonic()
    r = eng.run(["sh", os.path.join(a.repo, "container/image.sh"), "--tag", DOTMON_IMAGE,
                 "--archive", archive, "--workdir", work], timeout=900)
    image_id = r.stdout.strip().splitlines()[-1]
    log(f"  container/image.sh: {DOTMON_IMAGE} {image_id[:12]} in {time.monotonic() - t0:.1f} s")

    info = eng.inspect("image", DOTMON_IMAGE)
    df = cc.parse_dockerfile(os.path.join(a.repo, "container/Dockerfile"), fails)
    cfg = info.get("Config") or {}
    w = "dotmon image"
    fails.check(cfg.get("User") == df["user"], w, f"user {cfg.get('User')!r}, Dockerfile USER {df['user']!r}")
    fails.check(cfg.get("Entrypoint") == df["entrypoint"], w,
                f"entrypoint {cfg.get('Entrypoint')}, Dockerfile {df['entrypoint']}")
    fails.check(cfg.get("Cmd") == df["cmd"], w, f"cmd {cfg.get('Cmd')}, Dockerfile {df['cmd']}")
    ports = sorted(int(p.split("/")[0]) for p in (cfg.get("ExposedPorts") or {}))
    fails.check(ports == sorted(df["expose"]), w, f"ports {ports}, Dockerfile EXPOSE {df['expose']}")
    fails.check(len((info.get("RootFS") or {}).get("Layers") or []) == 1, w, "not a single layer")

    version = subprocess.run([a.dotmon, "--version"], capture_output=True, text=True).stdout.strip()
    head = subprocess.run(["git", "-C", a.repo, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    labels = cfg.get("Labels") or {}
    notes = info.get("Annotations") or {}
    for key, want in (("version", version), ("revision", head)):
        k = f"org.opencontainers.image.{key}"
        for where, got in (("label", labels.get(k)), ("annotation", notes.get(k))):
            ok = got == want or (key == "revision" and got == f"{want}-dirty" and bool(want))
            fails.check(ok, w, f"{where} {k} is {got!r}, expected {want!r}")
    for k in ("org.opencontainers.image.source", "org.opencontainers.image.created"):
        fails.check(bool(labels.get(k)) and bool(notes.get(k)), w, f"no {k} label and annotation")

    # Its files are rootfs.sh's tree, nothing more or less, with the same modes; all root-owned
    # but /home/app (the app user's HOME, 0700).
    want = tree_files(os.path.join(work, "context/rootfs"))
    got = image_files(eng, DOTMON_IMAGE)
    fails.check(set(got) == set(want), w, f"files differ from the laid-out tree: only in the image "
                f"{sorted(set(got) - set(want))}, only in the tree {sorted(set(want) - set(got))}")
    for p in sorted(set(got) & set(want)):
        fails.check(got[p][0] == want[p][0] and got[p][2] == want[p][2], w,
                    f"{p}: mode {got[p][0]:o} size {got[p][2]}, laid out {want[p][0]:o} size {want[p][2]}")
        owner = APP_UID if p == "/home/app" else 0  # the app user's private HOME (issue 28)
        fails.check(got[p][1] == owner, w, f"{p} is owned by uid {got[p][1]}, not {owner}")
    size = int(info.get("Size") or 0)
    log(f"  dotmon image: {len(got)} entries, {size / 1e6:.2f} MB (podman image inspect), "
        f"version {labels.get('org.opencontainers.image.version')}, revision {labels.get('org.opencontainers.image.revision')}")
    fails.check(0 < size < SIZE_BUDGET, w, f"size {size} bytes, budget {SIZE_BUDGET}")

    # The archive loads into an empty storage as the same image.
    with tempfile.TemporaryDirectory(prefix="dotmon-load-", dir=eng.state) as tmp:
        other = Engine(tmp)
        r = other.podman("load", "-q", "-i", archive)
        loaded = other.podman("image", "inspect", "--format", "{{.Id}}", r.stdout.strip().split()[-1], check=False)
        fails.check(loaded.stdout.strip() == info["Id"], w,
                    f"podman save archive loads as {loaded.stdout.strip()[:12] or loaded.stderr.strip()}, not {info['Id'][:12]}")
        other.podman("rmi", "--all", "--force", check=False)
        shutil.rmtree(other.runroot, ignore_errors=True)
    log(f"  podman save --format oci-archive: {os.path.getsize(archive) / 1e6:.2f} MB, loads as the same image")

    # The image runs: --version, as the image's user, read-only, without a network.
    r = eng.podman("run", "--rm", "--read-only", "--network", "none", DOTMON_IMAGE, "--version", check=False)
    fails.check(r.returncode == 0 and r.stdout.strip() == version, w,
                f"podman run --version: exit {r.returncode}, {r.stdout.strip()!r} {r.stderr.strip()!r}")

    # The test app's image.
    t0 = time.monotonic()
    ctx = os.path.join(eng.state, "testapp-image")
    shutil.rmtree(ctx, ignore_errors=True)
    os.makedirs(ctx)
    app_rootfs(os.path.abspath(a.testapp), os.path.join(ctx, "rootfs"), frameworks=("Microsoft.NETCore.App", "Microsoft.AspNetCore.App"))
    eng.run(["buildah", "bud", "--quiet", "--layers=false", "--format", "oci", "-t", APP_IMAGE,
             "-f", os.path.join(a.repo, "tests/container/testapp.Containerfile"), ctx], timeout=900)
    shutil.rmtree(ctx, ignore_errors=True)
    asize = int(eng.inspect("image", APP_IMAGE).get("Size") or 0)
    log(f"  test app image: {APP_IMAGE}, {asize / 1e6:.1f} MB, in {time.monotonic() - t0:.1f} s")

    # `make app-image` (container/app-image.sh): the walk-through's hello app as an image, run
    # read-only without a network as uid 1654: it prints its lines and keeps running.
    t0 = time.monotonic()
    w = "make app-image"
    r = eng.run(["sh", os.path.join(a.repo, "container/app-image.sh"), "-w", os.path.join(eng.state, "app-image"),
                 "-t", HELLO_IMAGE], check=False, timeout=900)
    if fails.check(r.returncode == 0, w, f"container/app-image.sh: exit {r.returncode}: {r.stderr.strip()[-1500:]}"):
        cfg = eng.inspect("image", HELLO_IMAGE).get("Config") or {}
        fails.check(cfg.get("User") == f"{APP_UID}:{APP_UID}" and cfg.get("Entrypoint") == ["/app/hello"], w,
                    f"user {cfg.get('User')}, entrypoint {cfg.get('Entrypoint')}")
        name = "dotmon-hello-check"
        eng.podman("rm", "--force", name, check=False)
        r = eng.podman("run", "-d", "--name", name, "--read-only", "--network", "none", HELLO_IMAGE, check=False)
        lines = settle(lambda: eng.podman("logs", name, check=False).stdout.split(), lambda v: len(v) >= 4, 20, 0.5)
        state = eng.podman("inspect", "--format", "{{.State.Running}}", name, check=False).stdout.strip()
        fails.check(r.returncode == 0 and lines[:4] == ["hello", "0", "hello", "1"] and state == "true", w,
                    f"the hello image runs and keeps running (running {state!r}): {lines[:6]} {r.stderr.strip()[-300:]}")
        eng.podman("rm", "--force", "--time", "2", name, check=False)
        log(f"  hello image: {HELLO_IMAGE}, {int(eng.inspect('image', HELLO_IMAGE).get('Size') or 0) / 1e6:.1f} MB, "
            f"in {time.monotonic() - t0:.1f} s")
    return report(fails, "images built and checked")


DOCKERFILE_IMAGE = "localhost/dotmon-dockerfile:ci"
BASE_IMAGE = "localhost/debian-bootstrap:12"
BASE_MAX_AGE_S = 7 * 86400


def base_cache():
    """The folder (0700) that keeps the Debian base between build trees: a fresh build tree (CI
    builds from scratch) would otherwise spend half a minute in debootstrap for the same files."""
    d = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "dotmon-tests")
    os.makedirs(d, mode=0o700, exist_ok=True)
    return d


def debian_base(eng):
    """localhost/debian-bootstrap:12 in the storage: debootstrap's minbase bookworm, kept as a
    tarball in base_cache() for a week. None (and why) when it cannot be made."""
    tarball = os.path.join(base_cache(), "debian-12-minbase.tar")
    if not (os.path.exists(tarball) and time.time() - os.path.getmtime(tarball) < BASE_MAX_AGE_S):
        deboot = shutil.which("debootstrap", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
        if deboot is None:
            return "debootstrap not installed (Debian: apt-get install debootstrap; make test installs it)"
        mirror = os.environ.get("DEBIAN_MIRROR", "http://deb.debian.org/debian")
        with tempfile.TemporaryDirectory(prefix="dotmon-debootstrap-", dir=eng.state) as root:
            t0 = time.monotonic()
            r = subprocess.run([deboot, "--variant=minbase", "bookworm", root, mirror],
                               capture_output=True, text=True, timeout=900)
            if r.returncode != 0:
                return f"debootstrap from {mirror} failed: {(r.stderr or r.stdout).strip()[-300:]}"
            for base, _, files in os.walk(os.path.join(root, "var/cache/apt/archives")):
                for n in files:
                    if n.endswith(".deb"):
                        os.unlink(os.path.join(base, n))
            part = f"{tarball}.{os.getpid()}.part"  # build trees may share the cache: one writer each
            subprocess.run(["tar", "-C", root, "-cf", part, "."], check=True)
            os.replace(part, tarball)
            log(f"  debootstrap --variant=minbase bookworm: {time.monotonic() - t0:.1f} s")
    eng.podman("import", "-q", tarball, BASE_IMAGE, timeout=300)
    return None


def cmd_dockerfile(a):
    fails = Failures()
    eng = Engine(a.state)
    if eng.podman("image", "exists", DOTMON_IMAGE, check=False).returncode != 0:
        log(f"FAIL {DOTMON_IMAGE} is not in {eng.state}: the container_images test builds it")
        return 1
    why = debian_base(eng)
    if why:
        log(f"SKIPPED: {why}")
        return SKIP
    made = eng.inspect("image", DOTMON_IMAGE)
    labels = (made.get("Config") or {}).get("Labels") or {}
    args = []
    for arg, key in (("VERSION", "version"), ("REVISION", "revision"), ("SOURCE", "source")):
        args += ["--build-arg", f"{arg}={labels.get('org.opencontainers.image.' + key, '')}"]
    t0 = time.monotonic()
    # The build stage's RUN steps use the host's network (apt-get), as `docker build` does by default.
    r = eng.run(["buildah", "bud", "--quiet", "--network", "host", "--layers=false", "--format", "oci",
                 "--identity-label=false",
                 "--build-arg", f"BUILD_IMAGE={BASE_IMAGE}"] + args +
                ["-t", DOCKERFILE_IMAGE, "-f", os.path.join(a.repo, "container/Dockerfile"), a.repo],
                check=False, timeout=1500)
    w = "container/Dockerfile"
    if not fails.check(r.returncode == 0, w, f"buildah bud: exit {r.returncode}: {r.stderr.strip()[-1500:]}"):
        return report(fails, "")
    log(f"  buildah bud container/Dockerfile: {time.monotonic() - t0:.1f} s")
    built = eng.inspect("image", DOCKERFILE_IMAGE)
    for k in ("User", "Entrypoint", "Cmd", "ExposedPorts", "WorkingDir", "Env"):
        x, y = (built.get("Config") or {}).get(k), (made.get("Config") or {}).get(k)
        fails.check(x == y, w, f"{k}: Dockerfile build {x!r}, make image {y!r}")
    blabels = (built.get("Config") or {}).get("Labels") or {}
    for k in sorted(set(blabels) | set(labels)):
        if k != "org.opencontainers.image.created":   # `make image` adds it
            fails.check(blabels.get(k) == labels.get(k), w, f"label {k}: {blabels.get(k)!r} vs {labels.get(k)!r}")
    x, y = image_files(eng, DOCKERFILE_IMAGE), image_files(eng, DOTMON_IMAGE)
    fails.check(set(x) == set(y), w, f"files differ: only in the Dockerfile build {sorted(set(x) - set(y))}, "
                f"only in make image's {sorted(set(y) - set(x))}")
    sizes = []
    for p in sorted(set(x) & set(y)):
        fails.check(x[p][:2] == y[p][:2], w, f"{p}: mode/owner {x[p][0]:o}/{x[p][1]} vs {y[p][0]:o}/{y[p][1]}")
        if x[p][2] != y[p][2]:
            sizes.append(f"{p} {x[p][2]} vs {y[p][2]}")
    r = eng.podman("run", "--rm", "--read-only", "--network", "none", DOCKERFILE_IMAGE, "--version", check=False)
    fails.check(r.returncode == 0 and r.stdout.strip() == labels.get("org.opencontainers.image.version"), w,
                f"the Dockerfile's image: --version exit {r.returncode}, {r.stdout.strip()!r} {r.stderr.strip()!r}")
    log(f"  Dockerfile build vs make image: {len(x)} entries each, sizes {'all equal' if not sizes else 'differ: ' + '; '.join(sizes)}; "
        f"{int(built.get('Size') or 0) / 1e6:.2f} MB vs {int(made.get('Size') or 0) / 1e6:.2f} MB")
    eng.podman("rmi", "-f", DOCKERFILE_IMAGE, BASE_IMAGE, check=False)
    return report(fails, "container/Dockerfile builds the image make image builds")


def report(fails, ok):
    for x in fails.items:
        print(f"FAIL {x}")
    if fails.items:
        print(f"{len(fails.items)} failure(s)")
        return 1
    print(f"ok: {ok}")
    return 0


# ---------------------------------------------------------------------------------------------
# pods
# ---------------------------------------------------------------------------------------------

def substitute_images(text):
    """The manifest with its two image names replaced by the local images, nothing else."""
    out, n = text, 0
    for image, local in ((MANIFEST_IMAGES["dotmon"], DOTMON_IMAGE), (MANIFEST_IMAGES["app"], APP_IMAGE)):
        out, k = re.subn(rf"(^\s*image:\s*){re.escape(image)}\s*$", rf"\g<1>{local}", out, flags=re.M)
        n += k
    return out, n


def pod_ip(eng, pod):
    infra = eng.inspect("pod", pod).get("InfraContainerID")
    nets = (eng.inspect("container", infra).get("NetworkSettings") or {}).get("Networks") or {}
    for n in nets.values():
        if n.get("IPAddress"):
            return n["IPAddress"]
    return None


def container_named(eng, pod, name):
    for c in eng.inspect("pod", pod).get("Containers") or []:
        if c.get("Name", "").endswith("-" + name):
            return c["Name"]
    raise RuntimeError(f"pod {pod} has no container {name}")


def run_json(args, timeout=180):
    r = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    try:
        return r.returncode, json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return r.returncode, {"raw": r.stdout[-500:], "stderr": r.stderr[-500:]}


def elf_core(path):
    with open(path, "rb") as f:
        head = f.read(18)
    return len(head) == 18 and head[:4] == b"\x7fELF" and int.from_bytes(head[16:18], "little") == 4


def proc_ids(pid):
    ids = {}
    with open(f"/proc/{pid}/status", encoding="utf-8") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("Uid", "Gid"):
                ids[k] = [int(x) for x in v.split()]
    return ids


def cmd_pod(a):
    fails = Failures()
    eng = Engine(a.state)
    for image in (DOTMON_IMAGE, APP_IMAGE):
        if eng.podman("image", "exists", image, check=False).returncode != 0:
            log(f"FAIL {image} is not in {eng.state}: the container_images test builds it")
            return 1
    w = a.manifest
    with open(os.path.join(a.repo, "container/k8s", a.manifest), encoding="utf-8") as f:
        text, n = substitute_images(f.read())
    if not fails.check(n == 2, w, f"{n} image names replaced, expected 2 ({MANIFEST_IMAGES})"):
        return report(fails, "")
    docs = [d for d in cc.yaml.safe_load_all(text) if d]
    deployment = next(d for d in docs if d.get("kind") in cc.POD_KINDS | {"Pod"})
    # podman names a Deployment's pod <name>-pod-0 (its first replica); a Pod keeps its name.
    pod = deployment["metadata"]["name"] + ("-pod-0" if deployment["kind"] != "Pod" else "")
    spec = deployment["spec"]["template"]["spec"] if deployment["kind"] != "Pod" else deployment["spec"]
    dm_spec = next(c for c in spec["containers"] if cc.is_dotmon(c))
    secret_names = {e["valueFrom"]["secretKeyRef"]["name"] for c in spec["containers"] for e in c.get("env") or []
                    if "secretKeyRef" in (e.get("valueFrom") or {})}

    key = cc.generate_key(lambda args, env: subprocess.run([a.dotmon] + args, capture_output=True, text=True, timeout=30))
    token = key["token"]
    tmp = tempfile.mkdtemp(prefix="dotmon-pod-")
    manifest = os.path.join(tmp, a.manifest)
    with open(manifest, "w", encoding="utf-8") as f:
        f.write(text)
    # The Secret the manifest reads, as podman 4.3's kube play reads a podman secret: a JSON map
    # of key to base64 value (a Secret's `data`).
    for s in secret_names:
        eng.podman("secret", "rm", s, check=False)
        doc = os.path.join(tmp, f"{s}.json")
        with open(doc, "w", encoding="utf-8") as f:
            json.dump({k: base64.b64encode(key[k].encode()).decode() for k in ("Subject", "PublicKey")}, f)
        eng.podman("secret", "create", s, doc)
    eng.podman("kube", "down", manifest, check=False)
    played = False
    try:
        t0 = time.monotonic()
        r = eng.podman("kube", "play", manifest, check=False, timeout=300)
        played = True
        if not fails.check(r.returncode == 0, w, f"podman kube play: exit {r.returncode}: {r.stderr.strip()[-1500:]}"):
            return report(fails, "")
        ip = pod_ip(eng, pod)
        if not fails.check(ip is not None, w, f"pod {pod} has no IP address"):
            return report(fails, "")
        api = f"http://{ip}:52323"
        st = settle(lambda: fetch(api + "/readyz", timeout=2)[0], 200, 60)
        log(f"  {w}: pod {pod} at {ip}, /readyz {st} {time.monotonic() - t0:.1f} s after kube play")
        if not fails.check(st == 200, w, "/readyz did not answer 200 within 60 s"):
            return report(fails, "")
        check_pod_api(api, token, a, tmp, fails, w)
        check_pod_identity(eng, pod, spec, api, token, a, fails, w)
        check_pod_containers(eng, pod, dm_spec, key, fails, w)
        check_pod_stop(eng, pod, manifest, fails, w)
        played = False
    finally:
        if played:
            eng.podman("kube", "down", manifest, check=False)
        for s in secret_names:
            eng.podman("secret", "rm", s, check=False)
        shutil.rmtree(tmp, ignore_errors=True)
    return report(fails, f"{a.manifest} runs as a pod")


def check_pod_api(api, token, a, tmp, fails, w):
    for path in ("/healthz", "/readyz"):
        st, _, _ = fetch(api + path)
        fails.check(st == 200, w, f"{path} without a token answered {st}")
    st, _, _ = fetch(api + "/processes")
    fails.check(st == 401, w, f"/processes without a token answered {st}, expected 401")
    st, _, _ = fetch(api + "/processes", token="not-" + token[4:])
    fails.check(st == 401, w, f"/processes with a wrong token answered {st}, expected 401")

    # The app is discovered (connect mode: its socket in the shared /tmp; listen mode: it dials in).
    def listed():
        st, _, body = fetch(api + "/processes", token=token)
        return json.loads(body) if st == 200 else []

    procs = settle(listed, lambda ps: any(p.get("pid") == 1 for p in ps), 30, 0.2)
    log(f"  /processes: {[(p.get('pid'), p.get('name')) for p in procs]}")
    app = next((p for p in procs if p.get("pid") == 1), None)
    if not fails.check(app is not None, w, f"/processes does not list the app as pid 1: {procs}"):
        return
    fails.check(app.get("name") == "TestApp", w, f"pid 1 is named {app.get('name')!r}, not TestApp")

    path = os.path.join(tmp, "gc.nettrace")
    t0 = time.monotonic()
    st, _, n = fetch(api + "/trace?pid=1&profile=gc-verbose&durationSeconds=5", token=token, timeout=60, dest=path)
    log(f"  /trace gc-verbose 5 s: {st}, {n} bytes in {time.monotonic() - t0:.1f} s")
    if fails.check(st == 200, w, f"/trace answered {st}: {n!r}"):
        rc, c = run_json([a.checker, path])
        fails.check(rc == 0 and c.get("verdict") == "COMPLETE", w, f"C checker: exit {rc}, {c}")
        rc, t = run_json(["dotnet", a.tracecheck, path])
        fails.check(rc == 0 and t.get("ok") is True, w, f"TraceEvent: exit {rc}, {t}")
        fails.check(t.get("gcStart", 0) > 0 and t.get("gcStart") == c.get("gcStart"), w,
                    f"GCStart events: TraceEvent {t.get('gcStart')}, C checker {c.get('gcStart')} (the app collects every 500 ms)")
        log(f"  trace: {c.get('verdict')}, {c.get('events')} events, GCStart {c.get('gcStart')} (TraceEvent: "
            f"{t.get('events')} events, GCStart {t.get('gcStart')}, lost {t.get('lost')})")

    # Prometheus metrics of the app, on the metrics port (no token, as dotnet-monitor).
    murl = api.replace(":52323", ":52325") + "/metrics"
    def scraped():
        st, _, body = fetch(murl, timeout=5)
        return body.decode(errors="replace") if st == 200 else ""

    text = settle(scraped, lambda t: re.search(r'^systemruntime_cpu_usage_ratio\{[^}]*pid="1"', t, re.M), 30, 1)
    if fails.check(re.search(r'^systemruntime_cpu_usage_ratio\{[^}]*pid="1"', text, re.M) is not None, w,
                   "/metrics on port 52325 has no systemruntime_cpu_usage_ratio of pid 1 within 30 s"):
        lines = sum(1 for line in text.splitlines() if 'pid="1"' in line)
        log(f"  /metrics on port 52325: {lines} lines of pid 1")

    path = os.path.join(tmp, "mini.dmp")
    t0 = time.monotonic()
    st, _, n = fetch(api + "/dump?pid=1&type=Mini", token=token, timeout=120, dest=path)
    log(f"  /dump Mini: {st}, {n} bytes in {time.monotonic() - t0:.1f} s")
    if fails.check(st == 200, w, f"/dump answered {st}: {n!r}"):
        fails.check(elf_core(path), w, "the dump is not an ELF core file")


def check_pod_identity(eng, pod, spec, api, token, a, fails, w):
    """Who the app is (issue 34 item 2), as /processes?extras=true says it. dotmon reads an app's
    /proc/<pid> only when that pid is the app itself in dotmon's pid namespace: with a shared
    process namespace (shareProcessNamespace, hostPID) in connect mode it must show the app's
    container id as podman knows it; with the app in a pid namespace of its own (these manifests:
    dotmon lists it as pid 1, and its own pid 1 is someone else) or in listen mode it must show
    none, never the id of the process that is pid 1 in dotmon's namespace."""
    app_spec = next(c for c in spec["containers"] if not cc.is_dotmon(c))
    app = eng.inspect("container", container_named(eng, pod, app_spec["name"]))
    app_id, host_pid = app.get("Id", ""), (app.get("State") or {}).get("Pid")
    try:
        with open(f"/proc/{host_pid}/cgroup", encoding="utf-8") as f:
            cgroup = f.read()
    except OSError as e:
        cgroup = f"({e})"
    log(f"  the app's /proc/{host_pid}/cgroup seen from the host: {cgroup.strip()!r}")
    fails.check(len(app_id) == 64 and app_id in cgroup, w,
                f"podman's id of the app container ({app_id}) is not in its cgroup path")
    st, _, body = fetch(api + "/processes?extras=true", token=token)
    ext = next((p for p in json.loads(body) if p.get("pid") == 1), {}) if st == 200 else {}
    shared = (spec.get("shareProcessNamespace") or spec.get("hostPID")) and "listen" not in a.manifest
    want = app_id if shared else None
    log(f"  /processes?extras=true, pid 1: containerId {ext.get('containerId')}, podName {ext.get('podName')}")
    fails.check(st == 200 and ext.get("containerId") == want, w,
                f"/processes?extras=true shows containerId {ext.get('containerId')!r} for the app, expected {want!r} "
                f"({'shared' if shared else 'its own'} pid namespace)")
    if not shared:
        fails.check("podName" not in ext and "podUid" not in ext, w,
                    f"the app in its own pid namespace got an identity from dotmon's own pid 1: {ext}")


def check_pod_containers(eng, pod, dm_spec, key, fails, w):
    name = container_named(eng, pod, dm_spec["name"])
    c = eng.inspect("container", name)
    hc = c.get("HostConfig") or {}
    fails.check(hc.get("ReadonlyRootfs") is True, w, "dotmon's root file system is not read-only")
    ids = proc_ids(c["State"]["Pid"])
    fails.check(ids["Uid"] == [APP_UID] * 4 and ids["Gid"] == [APP_UID] * 4, w,
                f"dotmon runs as {ids}, not uid/gid {APP_UID}")
    log(f"  dotmon container: uid/gid {ids['Uid'][0]}/{ids['Gid'][0]}, read-only root {hc.get('ReadonlyRootfs')}, "
        f"mounts {[m.get('Destination') for m in c.get('Mounts') or []]}")
    # Nothing written outside its volumes: `podman diff` lists only what the engine itself puts
    # in every container (the mount points of /etc/hosts, /etc/hostname, /etc/resolv.conf and
    # /run/.containerenv, and of the volumes).
    engine_owned = {"/etc", "/etc/hosts", "/etc/hostname", "/etc/resolv.conf", "/run", "/run/.containerenv",
                    "/run/secrets", "/dev", "/proc", "/sys"}
    engine_owned |= {m.get("Destination") for m in c.get("Mounts") or []}
    diff = eng.podman("diff", "--format", "json", name).stdout
    changed = sorted({p for v in (json.loads(diff or "{}") or {}).values() for p in v or []} - engine_owned)
    fails.check(not changed, w, f"dotmon changed its root file system: {changed}")
    logs = eng.podman("logs", name).stderr + eng.podman("logs", name).stdout
    for secret in (key["token"], key["PublicKey"]):
        fails.check(secret not in logs, w, "a secret is in dotmon's log")


def check_pod_stop(eng, pod, manifest, fails, w):
    """Stops the pod (SIGTERM, as `kube down` and the kubelet do), then checks the shared
    volumes hold no file; `kube down` then leaves no pod, container or volume."""
    vols = set()
    for c in eng.inspect("pod", pod).get("Containers") or []:
        for m in eng.inspect("container", c["Name"]).get("Mounts") or []:
            if m.get("Type") == "volume" and m.get("Source"):
                vols.add((m.get("Name"), m["Source"]))
    t0 = time.monotonic()
    eng.podman("pod", "stop", "-t", "10", pod)
    log(f"  pod stop: {time.monotonic() - t0:.1f} s")
    for c in eng.inspect("pod", pod).get("Containers") or []:
        st = eng.inspect("container", c["Name"])["State"]
        fails.check(st.get("ExitCode") == 0, w, f"{c['Name']} exited with {st.get('ExitCode')} after SIGTERM")
    for vname, src in sorted(vols):
        left = [os.path.relpath(os.path.join(b, n), src) for b, ds, fs in os.walk(src) for n in fs + ds]
        fails.check(not left, w, f"volume {vname} holds {left} after the pod stopped")
    log(f"  volumes after stop: {', '.join(f'{n}: empty' for n, _ in sorted(vols)) or 'none'}")
    r = eng.podman("kube", "down", manifest, check=False)
    fails.check(r.returncode == 0, w, f"podman kube down: exit {r.returncode}: {r.stderr.strip()}")
    left = eng.podman("ps", "-a", "--format", "{{.Names}}").stdout.split()
    fails.check(not left, w, f"containers left after kube down: {left}")
    pods = eng.podman("pod", "ps", "--format", "{{.Name}}").stdout.split()
    fails.check(not pods, w, f"pods left after kube down: {pods}")
    for vname, src in sorted(vols):
        fails.check(not os.path.exists(src) or not os.listdir(src), w, f"volume {vname} not empty after kube down")


# ---------------------------------------------------------------------------------------------
# node mode: two app pods and one dotmon with the host's pid namespace
# ---------------------------------------------------------------------------------------------

NODE_APPS = ("orders-7d4f9-x2k8q", "billing-5c6b8-q9zt4")
NODE_NAMESPACE = "shop"
NODE_DOTMON = "dotmon-node-test"


def node_daemonset(repo):
    """node-mode.yaml's DaemonSet: its pod spec and its dotmon container."""
    with open(os.path.join(repo, "container/k8s/node-mode.yaml"), encoding="utf-8") as f:
        docs = [d for d in cc.yaml.safe_load_all(f) if d]
    ds = next(d for d in docs if d.get("kind") == "DaemonSet")
    spec = ds["spec"]["template"]["spec"]
    return spec, next(c for c in spec["containers"] if cc.is_dotmon(c))


def node_run_args(spec, c, key, rule_env, name=NODE_DOTMON, caps=True):
    """`podman run` for the DaemonSet's pod template, setting by setting (podman 4.3's kube play
    knows neither DaemonSet nor hostPID, which came in 4.5): the host's pid namespace, the pod's
    user, the container's capabilities, read-only root, no privilege escalation, its resources,
    env (the Secret's keys by value, the downward API's fields by a value of this pod) and args
    (the pod's address as "+": every address of the container's network namespace)."""
    want_caps = caps
    sc, psc = c.get("securityContext") or {}, spec.get("securityContext") or {}
    caps = sc.get("capabilities") or {}
    args = ["run", "-d", "--name", name]
    if spec.get("hostPID"):
        args += ["--pid", "host"]
    args += ["--user", f"{psc.get('runAsUser', 0)}:{psc.get('runAsGroup', 0)}"]
    args += [f"--cap-drop={x}" for x in caps.get("drop") or []]
    args += [f"--cap-add={x}" for x in (caps.get("add") or []) if want_caps]
    if sc.get("readOnlyRootFilesystem"):
        args.append("--read-only")
    if sc.get("allowPrivilegeEscalation") is False:
        args += ["--security-opt", "no-new-privileges"]
    lim = (c.get("resources") or {}).get("limits") or {}
    if "memory" in lim:
        args += ["--memory", lim["memory"].replace("Mi", "m")]
    fields = {"metadata.name": "dotmon-node-test", "metadata.namespace": "dotmon",
              "spec.nodeName": socket.gethostname(), "status.podIP": "+"}
    for e in c.get("env") or []:
        vf = e.get("valueFrom") or {}
        if "secretKeyRef" in vf:
            value = key[vf["secretKeyRef"]["key"]]
        elif "fieldRef" in vf:
            value = fields[vf["fieldRef"]["fieldPath"]]
        else:
            value = e["value"]
        args += ["-e", f"{e['name']}={value}"]
    for k, v in rule_env.items():
        args += ["-e", f"{k}={v}"]
    return args + [DOTMON_IMAGE] + [x.replace("$(POD_IP)", "+") for x in c.get("args") or []]


def node_apps_manifest(tmp):
    """Two app pods as users have them: the test app as pid 1 of each, each with its own /tmp (the
    image's), sharing nothing with dotmon; POD_NAMESPACE as the downward API gives it (podman
    takes the value; the pod name is the container's HOSTNAME, as in Kubernetes)."""
    docs = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
             "spec": {"containers": [{"name": "app", "image": APP_IMAGE,
                                      "env": [{"name": "POD_NAMESPACE", "value": NODE_NAMESPACE}],
                                      "securityContext": {"allowPrivilegeEscalation": False,
                                                          "capabilities": {"drop": ["ALL"]}}}]}}
            for name in NODE_APPS]
    path = os.path.join(tmp, "apps.yaml")
    with open(path, "w", encoding="utf-8") as f:
        cc.yaml.safe_dump_all(docs, f)
    return path


def container_ip(eng, name):
    nets = (eng.inspect("container", name).get("NetworkSettings") or {}).get("Networks") or {}
    return next((n["IPAddress"] for n in nets.values() if n.get("IPAddress")), None)


def cap_mask(names):
    bits = {"DAC_OVERRIDE": 1, "DAC_READ_SEARCH": 2, "SYS_PTRACE": 19}
    return sum(1 << bits[n] for n in names)


def cmd_node(a):
    fails = Failures()
    w = "node-mode.yaml"
    eng = Engine(a.state)
    for image in (DOTMON_IMAGE, APP_IMAGE):
        if eng.podman("image", "exists", image, check=False).returncode != 0:
            log(f"FAIL {image} is not in {eng.state}: the container_images test builds it")
            return 1
    spec, dm = node_daemonset(a.repo)
    key = cc.generate_key(lambda args, env: subprocess.run([a.dotmon] + args, capture_output=True, text=True, timeout=30))
    token = key["token"]
    # A rule for one pod by name (item 2): it applies to that pod's app only.
    rule = "DotnetMonitor_CollectionRules__OnePod__"
    rule_env = {rule + "Filters__0__Key": "PodName", rule + "Filters__0__Value": NODE_APPS[0],
                rule + "Trigger__Type": "Startup", rule + "Actions__0__Type": "GetEnvironmentVariable",
                rule + "Actions__0__Settings__Name": "POD_NAMESPACE",
                # the exceptions history: a standing session per runtime, through /proc/<pid>/root
                "DotnetMonitor_InProcessFeatures__Exceptions__Enabled": "true"}
    tmp = tempfile.mkdtemp(prefix="dotmon-node-")
    apps = node_apps_manifest(tmp)
    eng.podman("kube", "down", apps, check=False)
    for name in (NODE_DOTMON, NODE_DOTMON + "-nocap"):
        eng.podman("rm", "-f", name, check=False)
    try:
        r = eng.podman("kube", "play", apps, check=False, timeout=300)
        if not fails.check(r.returncode == 0, w, f"podman kube play (apps): exit {r.returncode}: {r.stderr.strip()[-1500:]}"):
            return report(fails, "")
        ids = {}
        for name in NODE_APPS:
            c = eng.inspect("container", container_named(eng, name, "app"))
            ids[name] = (c["Id"], c["State"]["Pid"])
        log(f"  app pods: {ids}")
        r = eng.podman(*node_run_args(spec, dm, key, rule_env), check=False)
        if not fails.check(r.returncode == 0, w, f"podman run dotmon: exit {r.returncode}: {r.stderr.strip()[-1500:]}"):
            return report(fails, "")
        ip = container_ip(eng, NODE_DOTMON)
        api = f"http://{ip}:52323"
        st = settle(lambda: fetch(api + "/readyz", timeout=2)[0], 200, 60)
        if not fails.check(st == 200, w, f"/readyz at {api} did not answer 200 within 60 s"):
            return report(fails, "")
        node_checks(eng, api, token, ids, a, tmp, fails, w)
        node_restart(eng, api, token, ids, fails, w)
        node_container(eng, dm, fails, w)
        node_without_caps(eng, spec, dm, key, token, ids, fails, w)
    finally:
        out = eng.podman("logs", NODE_DOTMON, check=False)
        text = (out.stdout or "") + (out.stderr or "")
        fails.check(token not in text and key["PublicKey"] not in text, w, "a secret is in dotmon's log")
        if fails.items:
            log("--- dotmon's log (tail) ---\n" + text[-4000:])
        for name in (NODE_DOTMON, NODE_DOTMON + "-nocap"):
            eng.podman("rm", "-f", "-t", "5", name, check=False)
        eng.podman("kube", "down", apps, check=False)
        shutil.rmtree(tmp, ignore_errors=True)
    return report(fails, "node mode: one dotmon with the host's pid namespace sees both pods")


def node_listed(api, token):
    st, _, body = fetch(api + "/processes?extras=true", token=token)
    return json.loads(body) if st == 200 else []


def node_checks(eng, api, token, ids, a, tmp, fails, w):
    """Both apps listed with who they are, then a trace, a Mini dump, a gcdump, /metrics labels
    and the one-pod rule for each."""
    procs = settle(lambda: node_listed(api, token),
                   lambda ps: all(any(p.get("pid") == hp for p in ps) for _, hp in ids.values()), 30, 0.3)
    for name, (cid, hpid) in ids.items():
        p = next((p for p in procs if p.get("pid") == hpid), None)
        log(f"  /processes?extras=true, host pid {hpid}: {p}")
        if not fails.check(p is not None, w, f"{name}'s app (host pid {hpid}) is not listed: {procs}"):
            continue
        fails.check(p.get("name") == "TestApp" and p.get("containerId") == cid and p.get("podName") == name
                    and p.get("podNamespace") == NODE_NAMESPACE and p.get("nsPid") == 1, w,
                    f"{name}: name, containerId {cid[:12]}, podName, podNamespace {NODE_NAMESPACE}, nsPid 1 expected: {p}")
        path = os.path.join(tmp, f"{name}.nettrace")
        st, _, n = fetch(api + f"/trace?pid={hpid}&profile=gc-verbose&durationSeconds=3", token=token, timeout=60, dest=path)
        if fails.check(st == 200, w, f"{name}: /trace answered {st}: {n!r}"):
            rc, c = run_json([a.checker, path])
            fails.check(rc == 0 and c.get("verdict") == "COMPLETE" and c.get("gcStart", 0) > 0, w,
                        f"{name}: the trace: exit {rc}, {c}")
            log(f"  {name}: trace {n} bytes, {c.get('verdict')}, {c.get('events')} events, GCStart {c.get('gcStart')}")
        path = os.path.join(tmp, f"{name}.dmp")
        st, _, n = fetch(api + f"/dump?pid={hpid}&type=Mini", token=token, timeout=120, dest=path)
        if fails.check(st == 200, w, f"{name}: /dump answered {st}: {n!r}"):
            fails.check(elf_core(path), w, f"{name}: the dump is not an ELF core file")
            log(f"  {name}: Mini dump {n} bytes")
        path = os.path.join(tmp, f"{name}.gcdump")
        st, _, n = fetch(api + f"/gcdump?pid={hpid}", token=token, timeout=120, dest=path)
        if fails.check(st == 200, w, f"{name}: /gcdump answered {st}: {n!r}"):
            with open(path, "rb") as f:
                head = f.read(64)
            fails.check(b"!FastSerialization" in head, w, f"{name}: the gcdump is not a FastSerialization file: {head[:32]!r}")
            log(f"  {name}: gcdump {n} bytes")
        st, hdrs, body = fetch(api + f"/profile?pid={hpid}&durationSeconds=2", token=token, timeout=60)
        prof = json.loads(body) if st == 200 else {}
        fails.check(st == 200 and prof.get("kind") == "cpu" and prof.get("pid") == hpid and prof.get("threads", 0) > 0,
                    w, f"{name}: /profile answered {st} without the app's CPU profile: {body[:200]!r}")
        log(f"  {name}: /profile {len(body)} bytes: {prof.get('samples')} samples on {prof.get('threads')} threads")
        st, _, body = fetch(api + f"/stacks?pid={hpid}", token=token, timeout=60)
        text = body.decode(errors="replace") if st == 200 else ""
        # thread ids as the app sees them: its main thread is 1, as the app is pid 1 in its pod
        fails.check(st == 200 and "Thread: (0x1)" in text and "TestApp.dll!TestApp.Program." in text, w,
                    f"{name}: /stacks answered {st} without the app's main thread (0x1) in TestApp.Program: "
                    f"{body[:300]!r}")
        log(f"  {name}: /stacks {text.count('Thread: (0x')} threads, {len(body)} bytes")
        st, _, body = fetch(api + "/info?extras=true", token=token, timeout=30)
        hist = [x for x in (json.loads(body).get("exceptions") or []) if x.get("pid") == hpid] if st == 200 else []
        fails.check(hist and hist[0].get("state") == "running", w,
                    f"{name}: its exceptions session does not run in node mode: {hist}")
        st, hdrs, body = fetch(api + f"/exceptions?pid={hpid}", token=token, timeout=60)
        fails.check(st == 200 and hdrs.get("Content-Type", "").startswith("text/plain"), w,
                    f"{name}: /exceptions answered {st}: {body[:200]!r}")
        log(f"  {name}: /exceptions {len(body)} bytes, history {hist[0] if hist else None}")
        st, _, body = fetch(api + f"/logs?pid={hpid}&durationSeconds=3&level=Information", token=token,
                            headers={"Accept": "application/x-ndjson"}, timeout=60)
        beats = [json.loads(x) for x in body.decode(errors="replace").splitlines() if x.strip()] if st == 200 else []
        beats = [r for r in beats if r.get("Category") == "TestApp.Heartbeat"]
        fails.check(st == 200 and len(beats) >= 2, w,
                    f"{name}: /logs has fewer than 2 of the app's heartbeats in 3 s ({st}: {body[:200]!r})")
        log(f"  {name}: /logs 3 s: {len(beats)} heartbeat records")
        st, _, body = fetch(api + f"/collectionrules?pid={hpid}", token=token)
        rules = json.loads(body) if st == 200 else None
        want = name == NODE_APPS[0]
        fails.check(rules is not None and ("OnePod" in rules) == want, w,
                    f"{name}: the rule for pod {NODE_APPS[0]} {'applies' if want else 'does not apply'}: {st} {body[:300]!r}")
        if want and rules:
            done = settle(lambda: json.loads(fetch(api + f"/collectionrules/OnePod?pid={hpid}", token=token)[2] or b"{}"),
                          lambda d: d.get("lifetimeOccurrences") == 1, 15, 0.3)
            fails.check(done.get("lifetimeOccurrences") == 1, w, f"{name}: the one-pod rule ran once: {done}")
    murl = api.replace(":52323", ":52325") + "/metrics"

    def scraped():
        st, _, body = fetch(murl, timeout=5)
        return body.decode(errors="replace") if st == 200 else ""

    def labelled(t):
        return all(re.search(rf'^systemruntime_cpu_usage_ratio\{{[^}}]*pid="{hp}"[^}}]*pod="{n}"[^}}]*namespace="{NODE_NAMESPACE}"', t, re.M)
                   for n, (_, hp) in ids.items())

    text = settle(scraped, labelled, 40, 1)
    fails.check(labelled(text), w, "/metrics has no systemruntime_cpu_usage_ratio labelled with each app's pid, pod "
                f"and namespace within 40 s: {[l for l in text.splitlines() if 'cpu_usage' in l][:4]}")


def node_restart(eng, api, token, ids, fails, w):
    """An app restarted in its pod is a new instance: a new host pid and runtime cookie, the same
    pod; the old one is gone from the list. It dies in the middle of a Full dump, which must leave
    no file behind in its container's /tmp."""
    name = NODE_APPS[1]
    old_pid = ids[name][1]
    old = next((p for p in node_listed(api, token) if p.get("pid") == old_pid), {})
    box = {}
    t = threading.Thread(target=lambda: box.update(r=fetch(api + f"/dump?pid={old_pid}&type=Full", token=token,
                                                            timeout=120, dest=os.devnull)))
    t.start()
    tmpdir = f"/proc/{old_pid}/root/tmp"
    began, deadline = [], time.monotonic() + 20
    while not began and time.monotonic() < deadline and t.is_alive():  # a Full dump takes ~0.5 s
        began = [n for n in os.listdir(tmpdir) if n.endswith(".dmp")]
    # The app dies (SIGKILL from outside) while the dump is written; the pod's restart policy
    # (Always, as a Deployment's) starts it again in the same pod.
    os.kill(old_pid, signal.SIGKILL)
    t.join(130)
    log(f"  {name}: killed while its dump {began} was written; /dump answered {(box.get('r') or ('none',))[0]}")
    app = container_named(eng, name, "app")
    new_pid = settle(lambda: (eng.inspect("container", app).get("State") or {}).get("Pid") or 0,
                     lambda p: p not in (0, old_pid), 30, 0.3)
    if not fails.check(new_pid not in (0, old_pid), w, f"podman did not start {name}'s app again"):
        return
    procs = settle(lambda: node_listed(api, token),
                   lambda ps: any(p.get("pid") == new_pid for p in ps) and not any(p.get("pid") == old_pid for p in ps),
                   30, 0.3)
    new = next((p for p in procs if p.get("pid") == new_pid), {})
    log(f"  {name} restarted: host pid {old_pid} -> {new_pid}, uid {old.get('uid')} -> {new.get('uid')}")
    fails.check(new.get("podName") == name and new.get("uid") and new.get("uid") != old.get("uid")
                and not any(p.get("pid") == old_pid for p in procs), w,
                f"the restarted app is listed as a new instance of pod {name}, the old one gone: {procs}")
    # The container's /tmp (the same file system after the restart) holds no dump or leftover.
    left = settle(lambda: [n for n in os.listdir(f"/proc/{new_pid}/root/tmp")
                           if not n.startswith(("dotnet-diagnostic-", "clr-debug-pipe-"))], lambda n: not n, 10, 0.2)
    # Whether the kill lands inside the dump is a race (a Full dump of this app takes about half a
    # second; on a loaded machine the file was once never seen before the dump was done): the
    # leftover is checked when it did, and the run says when it did not.
    if began:
        fails.check(not left, w, f"the dump begun before the app died ({began}) left {left} in its /tmp")
    else:
        log(f"  {name}: the dump was done before the kill landed: no leftover to look for this run ({left})")


def node_without_caps(eng, spec, dm, key, token, ids, fails, w):
    """The same dotmon without the added capabilities: no app listed, /info?extras=true counts the
    processes it may not look into, and its log names the capability (no silent empty list)."""
    name = NODE_DOTMON + "-nocap"
    r = eng.podman(*node_run_args(spec, dm, key, {}, name=name, caps=False), check=False)
    if not fails.check(r.returncode == 0, w, f"podman run dotmon without capabilities: exit {r.returncode}: {r.stderr[-800:]}"):
        return
    api = f"http://{container_ip(eng, name)}:52323"
    st = settle(lambda: fetch(api + "/readyz", timeout=2)[0], 200, 60)
    info = settle(lambda: json.loads(fetch(api + "/info?extras=true", token=token)[2] or b"{}"),
                  lambda i: (i.get("node") or {}).get("processesDenied", 0) >= len(ids), 15, 0.3)
    procs = node_listed(api, token)
    out = eng.podman("logs", name, check=False)
    text = (out.stdout or "") + (out.stderr or "")
    log(f"  without capabilities: /readyz {st}, /processes {[p.get('pid') for p in procs]}, node {info.get('node')}")
    fails.check(st == 200 and not any(p.get("pid") in [hp for _, hp in ids.values()] for p in procs), w,
                f"without SYS_PTRACE dotmon lists the apps: {procs}")
    fails.check((info.get("node") or {}).get("processesDenied", 0) >= len(ids), w,
                f"/info?extras=true does not count the processes it may not look into: {info.get('node')}")
    fails.check("CAP_SYS_PTRACE" in text, w, "without SYS_PTRACE the log does not name the capability")


def node_container(eng, dm, fails, w):
    """dotmon ran with the host's pid namespace, uid 0, the documented capabilities only and a
    read-only root."""
    c = eng.inspect("container", NODE_DOTMON)
    hc = c.get("HostConfig") or {}
    caps = set((dm.get("securityContext") or {}).get("capabilities", {}).get("add") or [])
    with open(f"/proc/{c['State']['Pid']}/status", encoding="utf-8") as f:
        status = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
    eff = int(status.get("CapEff", "0"), 16)
    log(f"  dotmon container: pid mode {hc.get('PidMode')}, CapEff {eff:#x}, uid {status.get('Uid')}, "
        f"read-only root {hc.get('ReadonlyRootfs')}")
    fails.check(hc.get("PidMode") == "host", w, f"dotmon's pid namespace is {hc.get('PidMode')!r}, not the host's")
    fails.check(eff == cap_mask(caps), w, f"dotmon's effective capabilities {eff:#x}, expected {sorted(caps)} ({cap_mask(caps):#x})")
    fails.check(status.get("Uid", "").split()[:1] == ["0"], w, f"dotmon runs as uid {status.get('Uid')}, not 0")
    fails.check(hc.get("ReadonlyRootfs") is True, w, "dotmon's root file system is not read-only")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["images", "pod", "node", "dockerfile"])
    ap.add_argument("--repo", required=True)
    ap.add_argument("--state", required=True, help="private podman configuration and storage")
    ap.add_argument("--dotmon", required=True, help="this build's dotmon (version, key generation)")
    ap.add_argument("--testapp", help="the built test app folder (images)")
    ap.add_argument("--manifest", help="file name in container/k8s (pod)")
    ap.add_argument("--checker", help="nettrace_check (pod)")
    ap.add_argument("--tracecheck", help="tracecheck.dll (pod)")
    a = ap.parse_args()
    a.repo = os.path.abspath(a.repo)
    why = prerequisites()
    if why:
        log(f"SKIPPED: {why}")
        return SKIP
    try:
        return {"images": cmd_images, "pod": cmd_pod, "node": cmd_node, "dockerfile": cmd_dockerfile}[a.mode](a)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        print(f"FAIL {e}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
