#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks container/ (Dockerfile, Kubernetes manifests) against this build of dotmon.

  check_container.py manifests --repo ROOT --dotmon BIN
      Parses every YAML document in container/k8s and the Dockerfile, extracts what the dotmon
      container is given (command/args, environment, volume mounts, probes, security settings),
      checks the pod wiring (shared volume, same uid, probes, read-only root, ...), and runs
      `BIN config show <args>` with that environment: exit status 0, every setting shown with the
      value given, secrets redacted, none reported unknown or ignored. Then it mutates copies of
      the files (a typo'd flag, a typo'd setting, a wrong probe path, ...) and checks that every
      mutation is caught, so a passing run means something.

  check_container.py rootfs --repo ROOT --dotmon BIN
      BIN is dotmon linked the way container/Dockerfile links it (loader and libraries in
      /usr/lib/dotmon). Lays out the image's files with container/rootfs.sh in an empty directory
      and runs dotmon there with chroot, as the image's non-root uid, with the Dockerfile's CMD and
      each manifest's arguments and environment: it must start, answer the probes, check tokens,
      and stop cleanly on SIGTERM. Needs root for chroot; exits 77 (skipped) otherwise.

Needs python3 and PyYAML (Debian: python3-yaml). There is no Docker engine in the test
environment: the image itself is never built here.
"""

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import tempfile

try:
    import yaml
except ImportError:
    print("check_container.py needs PyYAML: apt-get install python3-yaml", file=sys.stderr)
    sys.exit(1)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from dmtest import fetch, free_port, settle  # noqa: E402

SKIP = 77
ENV_PREFIX = "dotnetmonitor_"
LISTEN_ENV_APP = ("DOTNET_DiagnosticPorts", "COMPlus_DiagnosticPorts")
POD_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}
IMAGE_LIBDIR = "/usr/lib/dotmon"
# Settings dotnet-monitor's `config show` redacts (the last segment of the key).
REDACTED = ("publickey", "password", "connectionstring", "accountkey", "sharedaccesssignature",
            "clientsecret", "secretaccesskey", "sessiontoken", "queuesharedaccesssignature")


class Failures:
    """Collects failures instead of stopping at the first one."""

    def __init__(self):
        self.items = []

    def add(self, where, msg):
        self.items.append(f"{where}: {msg}")

    def check(self, cond, where, msg):
        if not cond:
            self.add(where, msg)
        return cond


# ---------------------------------------------------------------------------------------------
# Dockerfile
# ---------------------------------------------------------------------------------------------

def dockerfile_instructions(text):
    """(INSTRUCTION, argument) pairs, with continuation lines joined and comments dropped."""
    out = []
    cur = ""
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("#") or (not line and not cur):
            continue
        if line.endswith("\\"):
            cur += line[:-1] + " "
            continue
        cur += line
        if cur.strip():
            parts = cur.strip().split(None, 1)
            out.append((parts[0].upper(), parts[1] if len(parts) > 1 else ""))
        cur = ""
    return out


def parse_dockerfile(path, fails):
    """The final stage's ENTRYPOINT/CMD/EXPOSE/USER, and the build stages' apt packages and RUNs."""
    with open(path, encoding="utf-8") as f:
        ins = dockerfile_instructions(f.read())
    info = {"entrypoint": None, "cmd": None, "expose": [], "user": None, "apt": set(), "runs": [],
            "base": None, "final": []}
    stages = [i for i, (k, _) in enumerate(ins) if k == "FROM"]
    if not stages:
        fails.add(path, "no FROM")
        return info
    for k, arg in ins[: stages[-1]]:
        if k == "RUN":
            info["runs"].append(arg)
            for m in re.finditer(r"apt-get (?:install|download)([^&;|]*)", arg):
                info["apt"].update(t for t in m.group(1).split() if not t.startswith("-"))
    info["base"] = ins[stages[-1]][1].strip()
    info["final"] = ins[stages[-1] + 1:]
    for k, arg in ins[stages[-1]:]:
        if k in ("ENTRYPOINT", "CMD"):
            try:
                v = json.loads(arg)
            except ValueError:
                fails.add(path, f"{k} must use the JSON (exec) form, not '{arg}'")
                continue
            info[k.lower()] = v
        elif k == "EXPOSE":
            for t in arg.split():
                port = t.split("/")[0]
                if fails.check(port.isdigit(), path, f"EXPOSE {t} is not a port number"):
                    info["expose"].append(int(port))
        elif k == "USER":
            info["user"] = arg.strip()
    return info


def makefile_packages(path):
    with open(path, encoding="utf-8") as f:
        m = re.search(r"^DEB_PACKAGES\s*:?=\s*(.*)$", f.read(), re.M)
    return set(m.group(1).split()) if m else set()


# ---------------------------------------------------------------------------------------------
# Manifests
# ---------------------------------------------------------------------------------------------

def load_manifests(k8s_dir, fails):
    """{file: [documents]}; every YAML document of every *.yaml / *.yml file."""
    docs = {}
    names = sorted(n for n in os.listdir(k8s_dir) if n.endswith((".yaml", ".yml")))
    if not names:
        fails.add(k8s_dir, "no manifests")
    for n in names:
        p = os.path.join(k8s_dir, n)
        try:
            with open(p, encoding="utf-8") as f:
                ds = [d for d in yaml.safe_load_all(f) if d is not None]
        except yaml.YAMLError as e:
            fails.add(p, f"not valid YAML: {e}")
            continue
        for i, d in enumerate(ds):
            where = f"{n}[{i}]"
            if not isinstance(d, dict):
                fails.add(where, "a document is not a mapping")
                continue
            for field in ("apiVersion", "kind"):
                fails.check(field in d, where, f"no {field}")
            fails.check(isinstance(d.get("metadata"), dict) and d["metadata"].get("name"),
                        where, "no metadata.name")
        docs[n] = ds
    return docs


def pod_specs(docs):
    """(file, workload name, pod spec) for every workload."""
    for fname, ds in docs.items():
        for d in ds:
            if not isinstance(d, dict):
                continue
            kind = d.get("kind")
            spec = None
            if kind in POD_KINDS:
                spec = (((d.get("spec") or {}).get("template") or {}).get("spec"))
            elif kind == "Pod":
                spec = d.get("spec")
            if isinstance(spec, dict):
                yield fname, (d.get("metadata") or {}).get("name", "?"), spec


def is_dotmon(c):
    image = str(c.get("image", ""))
    base = image.rsplit("/", 1)[-1].split("@")[0].split(":")[0]
    return base == "dotmon" or c.get("name") == "dotmon"


def find_object(docs, kind, name):
    for ds in docs.values():
        for d in ds:
            if isinstance(d, dict) and d.get("kind") == kind and \
                    (d.get("metadata") or {}).get("name") == name:
                return d
    return None


def resolve_env(c, docs, where, fails, secrets):
    """[(name, value, is_secret)] for a container; secret values come from `secrets`."""
    out = []
    if c.get("envFrom"):
        fails.add(where, "envFrom is not handled by this test: list variables under env")
    for e in c.get("env") or []:
        name = e.get("name")
        if "value" in e:
            out.append((name, str(e["value"]), False))
            continue
        vf = e.get("valueFrom") or {}
        if "secretKeyRef" in vf:
            ref = vf["secretKeyRef"]
            sec = find_object(docs, "Secret", ref.get("name"))
            if fails.check(sec is not None, where,
                           f"env {name}: Secret '{ref.get('name')}' has no example in container/k8s"):
                keys = set((sec.get("stringData") or {}).keys()) | set((sec.get("data") or {}).keys())
                fails.check(ref.get("key") in keys, where,
                            f"env {name}: Secret '{ref.get('name')}' has no key '{ref.get('key')}'")
            value = None
            for suffix, v in secrets.items():
                if name.lower().endswith("__" + suffix.lower()):
                    value = v
            out.append((name, value if value is not None else "secret-value", True))
        elif "configMapKeyRef" in vf:
            ref = vf["configMapKeyRef"]
            cm = find_object(docs, "ConfigMap", ref.get("name"))
            value = ((cm or {}).get("data") or {}).get(ref.get("key"))
            fails.check(value is not None, where,
                        f"env {name}: ConfigMap '{ref.get('name')}' key '{ref.get('key')}' not found")
            out.append((name, str(value), False))
        elif "fieldRef" in vf or "resourceFieldRef" in vf:
            out.append((name, "from-the-pod", False))
        else:
            fails.add(where, f"env {name}: unsupported valueFrom {list(vf)}")
    return out


def effective_argv(c, df):
    """Kubernetes' rule: command replaces ENTRYPOINT (and drops CMD); args replaces CMD."""
    if c.get("command"):
        return [str(x) for x in c["command"]] + [str(x) for x in c.get("args") or []]
    args = c.get("args")
    return list(df["entrypoint"] or []) + [str(x) for x in (args if args is not None else df["cmd"] or [])]


def setting_key(env_name):
    """DotnetMonitor_A__B -> A:B (None for other variables)."""
    if not env_name.lower().startswith(ENV_PREFIX):
        return None
    return env_name[len(ENV_PREFIX):].replace("__", ":")


def expected_settings(argv_opts, env):
    """{lower key: (key, value)} that `config show` must print, as dotnet-monitor maps them."""
    exp = {}
    urls, murls = [], []
    i = 0
    while i < len(argv_opts):
        a = argv_opts[i]
        name, _, inline = a.partition("=")
        val = inline if inline else (argv_opts[i + 1] if i + 1 < len(argv_opts) else "")
        step = 1 if inline or name in ("--no-auth", "--temp-apikey") else 2
        if name in ("--urls", "-u"):
            urls.append(val)
        elif name == "--metricUrls":
            murls.append(val)
        elif name in ("--metrics", "-m"):
            exp["metrics:enabled"] = ("Metrics:Enabled", val)
        elif name == "--diagnostic-port":
            exp["diagnosticport:connectionmode"] = ("DiagnosticPort:ConnectionMode", "Listen")
            exp["diagnosticport:endpointname"] = ("DiagnosticPort:EndpointName", val)
        i += step
    if urls:
        exp["urls"] = ("Urls", ";".join(urls))
    if murls:
        exp["metrics:endpoints"] = ("Metrics:Endpoints", ";".join(murls))
    # DotnetMonitor_ variables win over the command line, as in dotnet-monitor (README
    # "Configuration"): a manifest's DotnetMonitor_Urls replaces the image's --urls.
    for name, value, _ in env:
        k = setting_key(name)
        if k:
            exp[k.lower()] = (k, value)
    return exp


def option_value(argv_opts, *names):
    for i, a in enumerate(argv_opts):
        name, _, inline = a.partition("=")
        if name in names:
            return inline if inline else (argv_opts[i + 1] if i + 1 < len(argv_opts) else None)
    return None


def env_setting(env, key):
    for name, value, _ in env:
        k = setting_key(name)
        if k and k.lower() == key.lower():
            return value
    return None


def url_port(url):
    m = re.match(r"^[a-z]+://(\[[^\]]*\]|[^/:]*)(?::(\d+))?", url or "")
    if not m:
        return None, None
    return m.group(1), int(m.group(2)) if m.group(2) else (443 if url.startswith("https") else 80)


def mount_of(c, path):
    """(volume, path relative to the volume) for an absolute path under one of c's mounts."""
    best = None
    for m in c.get("volumeMounts") or []:
        mp = m.get("mountPath", "").rstrip("/") or "/"
        if path == mp or path.startswith(mp + "/"):
            if best is None or len(mp) > len(best[2]):
                rel = path[len(mp):].lstrip("/")
                sub = m.get("subPath", "")
                best = (m.get("name"), "/".join(x for x in (sub, rel) if x), mp)
    return (best[0], best[1]) if best else None


# Fields of a container's securityContext that a pod's securityContext does not have.
CONTAINER_ONLY_SC = ("allowPrivilegeEscalation", "readOnlyRootFilesystem", "capabilities", "privileged")


def effective_sc(pod, c, key):
    """A security setting as Kubernetes applies it: the container's, else the pod's."""
    sc = c.get("securityContext") or {}
    if key in sc or key in CONTAINER_ONLY_SC:
        return sc.get(key)
    return (pod.get("securityContext") or {}).get(key)


def quantity(q):
    """Kubernetes quantity -> float (bytes, or cores)."""
    m = re.match(r"^([0-9.]+)([a-zA-Z]*)$", str(q))
    if not m:
        return None
    mult = {"": 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3}
    return float(m.group(1)) * mult.get(m.group(2), float("nan"))


# ---------------------------------------------------------------------------------------------
# dotmon
# ---------------------------------------------------------------------------------------------

def generate_key(runner):
    r = runner(["generatekey", "--output", "machinejson"], {})
    if r.returncode != 0:
        raise RuntimeError(f"dotmon generatekey failed ({r.returncode}): {r.stderr}")
    k = json.loads(r.stdout)
    return {"Subject": k["Subject"], "PublicKey": k["PublicKey"],
            "token": k["AuthorizationHeader"].split(" ", 1)[1]}


def base_env():
    keep = ("PATH", "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS")
    return {k: v for k, v in os.environ.items() if k in keep}


def parse_config_show(text):
    """{lower key: (key, value)} from `config show`: JSON (comments allowed, nested or flat)."""
    def flatten(node, prefix, out):
        if isinstance(node, dict):
            for k, v in node.items():
                flatten(v, f"{prefix}:{k}" if prefix else k, out)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                flatten(v, f"{prefix}:{i}", out)
        else:
            v = "" if node is None else (str(node).lower() if isinstance(node, bool) else str(node))
            out[prefix.lower()] = (prefix, v)
    out = {}
    try:
        flatten(json.loads(re.sub(r"/\*.*?\*/", "", text, flags=re.S)), "", out)
        return out
    except ValueError:
        pass
    for line in text.splitlines():
        m = re.match(r'^\s*"(.+?)"\s*:\s*"(.*)"\s*,?\s*(/\*.*\*/)?\s*,?\s*$', line)
        if m:
            out[m.group(1).lower()] = (m.group(1), m.group(2))
    return out


# ---------------------------------------------------------------------------------------------
# The checks
# ---------------------------------------------------------------------------------------------

def check_all(root, dotmon, key, verbose):
    """Runs every static and `config show` check on the files under root; returns Failures."""
    fails = Failures()
    df_path = os.path.join(root, "container", "Dockerfile")
    k8s_dir = os.path.join(root, "container", "k8s")
    df = parse_dockerfile(df_path, fails)
    docs = load_manifests(k8s_dir, fails)

    def show(title, what):
        if verbose:
            print(f"  {title}: {what}")

    # --- Dockerfile --------------------------------------------------------------------------
    w = "container/Dockerfile"
    show("Dockerfile ENTRYPOINT", df["entrypoint"])
    show("Dockerfile CMD", df["cmd"])
    show("Dockerfile EXPOSE", df["expose"])
    show("Dockerfile USER", df["user"])
    fails.check(df["entrypoint"] == ["/usr/local/bin/dotmon"], w,
                f"ENTRYPOINT is {df['entrypoint']}, expected [\"/usr/local/bin/dotmon\"] (no PATH FROM scratch)")
    cmd = df["cmd"] or []
    fails.check(cmd[:1] == ["collect"], w, f"CMD {cmd} does not start with collect")
    for opt in ("--urls", "--metricUrls"):
        host, port = url_port(option_value(cmd[1:], opt))
        if fails.check(port is not None, w, f"CMD has no {opt}"):
            fails.check(port in df["expose"], w, f"CMD {opt} port {port} is not EXPOSEd")
            fails.check(host not in ("localhost", "127.0.0.1", "[::1]"), w,
                        f"CMD {opt} binds {host}: unreachable from outside the container")
    user = df["user"] or ""
    uid = user.split(":")[0]
    fails.check(uid.isdigit() and int(uid) != 0, w,
                f"USER '{user}' must be a numeric non-root uid (runAsNonRoot needs a number)")
    missing = makefile_packages(os.path.join(root, "Makefile")) - {"libcmocka-dev"} - df["apt"]
    fails.check(not missing, w, f"build stage does not install {sorted(missing)} (Makefile DEB_PACKAGES)")
    # One recipe for the files (container/build-rootfs.sh, also run by container/image.sh), and a
    # final stage that is that tree and nothing else.
    fails.check(any(re.search(r"container/build-rootfs\.sh\s+\S+\s+\S+\s+/rootfs\b", r) for r in df["runs"]), w,
                "the build stage does not lay out /rootfs with container/build-rootfs.sh (the recipe `make image` runs)")
    fails.check(df["base"] == "scratch", w, f"final stage is FROM {df['base']}, expected FROM scratch (the rootfs is the whole image)")
    adds = [(k, arg) for k, arg in df["final"] if k in ("COPY", "ADD", "RUN")]
    # The second COPY only gives the app user's HOME (rootfs.sh's /home/app, 0700) to that user:
    # COPY makes every file root's (issue 28: a HOME of its own, not the shared /tmp).
    fails.check(adds == [("COPY", "--from=build /rootfs/ /"),
                         ("COPY", "--from=build --chown=1654:1654 /rootfs/home/ /home/")], w,
                f"final stage must take its files only from COPY --from=build /rootfs/ / (and /home with "
                f"--chown=1654:1654), has {adds}")
    recipe_path = os.path.join(root, "container", "build-rootfs.sh")
    recipe = open(recipe_path, encoding="utf-8").read() if os.path.exists(recipe_path) else ""
    fails.check("-DAGENT_TESTS=OFF" in recipe, w, "container/build-rootfs.sh does not set -DAGENT_TESTS=OFF")
    fails.check(f"--dynamic-linker={IMAGE_LIBDIR}/" in recipe and f"-rpath,{IMAGE_LIBDIR}" in recipe, w,
                f"container/build-rootfs.sh does not link the binary to find its loader and libraries in "
                f"{IMAGE_LIBDIR} (container/rootfs.sh puts them there)")
    fails.check("rootfs.sh" in recipe, w, "container/build-rootfs.sh does not run container/rootfs.sh")

    # The Dockerfile's CMD alone (docker run dotmon), with no environment; and with the flag the
    # README and listen-mode.yaml give as the command-line form of listen mode.
    cases = [("Dockerfile CMD", cmd[1:], [], None),
             ("Dockerfile CMD + --diagnostic-port", cmd[1:] + ["--diagnostic-port", "/diag/dotmon.sock"], [], None)]

    # --- manifests ---------------------------------------------------------------------------
    workloads = list(pod_specs(docs))
    fails.check(workloads, "container/k8s", "no workload (Deployment, Pod, ...)")
    for fname, wname, pod in workloads:
        where = f"{fname} ({wname})"
        containers = pod.get("containers") or []
        dms = [c for c in containers if is_dotmon(c)]
        apps = [c for c in containers if not is_dotmon(c)]
        if not fails.check(len(dms) == 1, where, f"expected one dotmon container, found {len(dms)}"):
            continue
        fails.check(apps, where, "no application container next to dotmon")
        dm = dms[0]
        cw = f"{where} container {dm.get('name')}"
        argv = effective_argv(dm, df)
        env = resolve_env(dm, docs, cw, fails, key)
        show(f"{fname} dotmon argv", argv)
        for name, value, secret in env:
            show(f"{fname} dotmon env", f"{name}={'<secret>' if secret else value}")
        show(f"{fname} dotmon mounts",
             [(m.get("name"), m.get("mountPath")) for m in dm.get("volumeMounts") or []])
        if not fails.check(argv[:1] == ["dotmon"] or argv[:1] == ["/usr/local/bin/dotmon"], cw,
                           f"runs {argv[:1]}, not dotmon"):
            continue
        opts = argv[1:]
        if opts[:1] == ["collect"]:
            opts = opts[1:]
        elif opts and not opts[0].startswith("-"):
            fails.add(cw, f"runs 'dotmon {opts[0]}', not collect")
            continue
        cases.append((f"{fname} dotmon", opts, env, (pod, dm, apps, cw)))

    # --- each case: pod wiring, then `config show` ------------------------------------------
    for title, opts, env, podinfo in cases:
        if podinfo is not None:
            check_pod(podinfo, opts, env, df, fails)
        check_config_show(title, dotmon, opts, env, fails)
    return fails


def check_pod(podinfo, opts, env, df, fails):
    pod, dm, apps, cw = podinfo
    listen_ep = option_value(opts, "--diagnostic-port")
    if listen_ep is None and (env_setting(env, "DiagnosticPort:ConnectionMode") or "").lower() == "listen":
        listen_ep = env_setting(env, "DiagnosticPort:EndpointName")
        fails.check(listen_ep, cw, "ConnectionMode=Listen without DiagnosticPort:EndpointName")
    env_d = {n: v for n, v, _ in env}

    # Paths dotmon writes or shares must be on a volume: the root file system is read-only.
    for name, value, _ in env:
        k = (setting_key(name) or "").lower()
        if k.split(":")[-1] in ("endpointname", "defaultsharedpath", "dumptempfolder"):
            fails.check(value.startswith("/"), cw, f"{name}={value} is not an absolute path")
            fails.check(mount_of(dm, value), cw, f"{name}={value} is not on a volume of the dotmon container")
    for opt in ("--diagnostic-port", "--configuration-file-path"):
        v = option_value(opts, opt)
        if v is not None:
            fails.check(mount_of(dm, v), cw, f"{opt} {v} is not on a volume of the dotmon container")

    if listen_ep:
        # Listen mode: every app connects to dotmon's socket through the same volume.
        ep = mount_of(dm, listen_ep)
        for app in apps:
            aw = f"{cw.rsplit(' container ', 1)[0]} container {app.get('name')}"
            ports = [e.get("value", "") for e in app.get("env") or [] if e.get("name") in LISTEN_ENV_APP]
            if not fails.check(ports, aw, "listen mode, but the app has no DOTNET_DiagnosticPorts"):
                continue
            first = ports[0].split(";")[0]
            path, *flags = first.split(",")
            fails.check(ep is not None and mount_of(app, path) == ep, aw,
                        f"DOTNET_DiagnosticPorts path {path} is not dotmon's socket {listen_ep} "
                        "on the same volume")
            fails.check("nosuspend" in [f.strip().lower() for f in flags], aw,
                        f"DOTNET_DiagnosticPorts '{first}' lacks nosuspend: the app would wait for dotmon")
    else:
        # Connect mode: dotmon watches its TMPDIR, which must be the apps' TMPDIR on one volume.
        tmp = env_d.get("TMPDIR", "/tmp")
        vol = mount_of(dm, tmp)
        if fails.check(vol, cw, f"connect mode, but dotmon's TMPDIR {tmp} is not a shared volume"):
            for app in apps:
                aw = f"{cw.rsplit(' container ', 1)[0]} container {app.get('name')}"
                atmp = next((e.get("value") for e in app.get("env") or [] if e.get("name") == "TMPDIR"), "/tmp")
                fails.check(mount_of(app, atmp) == vol, aw,
                            f"the app's TMPDIR {atmp} is not dotmon's {tmp} (same volume): "
                            "dotmon cannot see its diagnostic socket")

    # Dumps: the folder dotmon reads must be the folder the app writes, on one volume.
    dump_dir = env_setting(env, "Storage:DumpTempFolder") or env_setting(env, "Storage:DefaultSharedPath") \
        or env_d.get("TMPDIR", "/tmp")
    target = env_setting(env, "Storage:DumpTargetFolder") or dump_dir
    dvol = mount_of(dm, dump_dir)
    fails.check(dvol, cw, f"the dump folder {dump_dir} is not on a volume")
    for app in apps:
        aw = f"{cw.rsplit(' container ', 1)[0]} container {app.get('name')}"
        fails.check(dvol is not None and mount_of(app, target) == dvol, aw,
                    f"the app does not see dotmon's dump folder {dump_dir} at {target} (same volume)")

    # Security: non-root, one uid, read-only root, no privilege escalation, no capabilities.
    uids = set()
    for c in [dm] + apps:
        w = f"{cw.rsplit(' container ', 1)[0]} container {c.get('name')}"
        fails.check(effective_sc(pod, c, "runAsNonRoot") is True, w, "runAsNonRoot is not true")
        uid = effective_sc(pod, c, "runAsUser")
        fails.check(isinstance(uid, int) and uid > 0, w, "no non-zero runAsUser")
        uids.add(uid)
        fails.check(effective_sc(pod, c, "readOnlyRootFilesystem") is True, w, "readOnlyRootFilesystem is not true")
        fails.check(effective_sc(pod, c, "allowPrivilegeEscalation") is False, w,
                    "allowPrivilegeEscalation is not false")
        caps = (effective_sc(pod, c, "capabilities") or {})
        fails.check("ALL" in (caps.get("drop") or []), w, "capabilities do not drop ALL")
        fails.check(not caps.get("add"), w, f"adds capabilities {caps.get('add')}")
        sp = effective_sc(pod, c, "seccompProfile") or {}
        fails.check(sp.get("type") == "RuntimeDefault", w, "seccompProfile is not RuntimeDefault")
    fails.check(len(uids) == 1, cw, f"app and dotmon run as different uids {sorted(map(str, uids))}: "
                "the diagnostic socket is 0600")
    img_uid = (df["user"] or "").split(":")[0]
    fails.check(str(next(iter(uids))) == img_uid if len(uids) == 1 else True, cw,
                f"runAsUser {uids} differs from the image's USER {img_uid}")

    # Probes: unauthenticated routes, on the artifact port, reachable from the kubelet.
    url = option_value(opts, "--urls", "-u") or env_setting(env, "Urls") or "http://localhost:52323"
    host, port = url_port(url.split(";")[0])
    fails.check(host not in ("localhost", "127.0.0.1", "[::1]"), cw,
                f"artifact URL {url} binds loopback only: the kubelet's probes cannot reach it")
    named = {p.get("name"): p.get("containerPort") for p in dm.get("ports") or []}
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        hg = ((dm.get(probe) or {}).get("httpGet")) or {}
        if not fails.check(hg, cw, f"no {probe}.httpGet"):
            continue
        fails.check(hg.get("path") == path, cw, f"{probe} path is {hg.get('path')}, expected {path}")
        pport = named.get(hg.get("port"), hg.get("port"))
        fails.check(pport == port, cw, f"{probe} port {hg.get('port')} is not the artifact port {port}")
        fails.check(hg.get("scheme", "HTTP") == ("HTTPS" if url.startswith("https") else "HTTP"), cw,
                    f"{probe} scheme does not match {url}")
    res = dm.get("resources") or {}
    for kind in ("requests", "limits"):
        for r in ("cpu", "memory"):
            fails.check((res.get(kind) or {}).get(r) is not None, cw, f"no resources.{kind}.{r}")
    rq, lm = quantity((res.get("requests") or {}).get("memory")), quantity((res.get("limits") or {}).get("memory"))
    if rq and lm:
        fails.check(rq <= lm, cw, "memory request above the limit")
        fails.check(lm >= 16 * 1024**2, cw, "memory limit below 16Mi: less than 4x the idle RSS")


def check_config_show(title, dotmon, opts, env, fails):
    w = f"{title}: dotmon config show {' '.join(shlex.quote(o) for o in opts)}"
    exp = expected_settings(opts, env)
    penv = base_env()
    penv.update({n: v for n, v, _ in env})
    secrets = {v for n, v, _ in env if (setting_key(n) or "").split(":")[-1].lower() in REDACTED}

    results = {}
    for level in ("redacted", "full"):
        r = subprocess.run([dotmon, "config", "show", "--level", level] + opts, env=penv,
                           capture_output=True, text=True, timeout=30)
        results[level] = r
        if not fails.check(r.returncode == 0, w,
                           f"--level {level}: exit status {r.returncode}: {r.stderr.strip()}"):
            continue
        # dotmon names every setting it does not read ("unknown setting X ... is ignored"): a
        # line naming one of ours means a typo or a setting this build does not implement.
        for line in r.stderr.splitlines():
            named = [k for (k, _) in exp.values() if k.lower() in line.lower()] + \
                    [n for n, _, _ in env if n.lower() in line.lower()]
            fails.check(not named, w, f"--level {level}: {line.strip()}")
    full = results.get("full")
    red = results.get("redacted")
    if full is None or full.returncode != 0:
        return
    shown = parse_config_show(full.stdout)
    for lk, (k, v) in exp.items():
        got = shown.get(lk)
        if not fails.check(got is not None, w, f"does not show {k} (given {v!r})"):
            continue
        same = got[1] == v
        if lk.endswith("urls") or lk.endswith("endpoints"):
            same = set(got[1].split(";")) == set(v.split(";"))
        elif lk.endswith("connectionmode") or lk.endswith("enabled"):
            same = got[1].lower() == v.lower()
        fails.check(same, w, f"shows {k}={got[1]!r}, given {v!r}")
    if red is not None and red.returncode == 0:
        rshown = parse_config_show(red.stdout)
        for s in secrets:
            fails.check(s not in red.stdout, w, "--level redacted prints a secret value")
        for lk, (k, v) in exp.items():
            if v in secrets and lk in rshown:
                fails.check(rshown[lk][1] != v, w, f"--level redacted shows {k} in clear")


# ---------------------------------------------------------------------------------------------
# Mutations: each must make check_all report something the real files do not
# ---------------------------------------------------------------------------------------------

MUTATIONS = [
    ("typo'd flag in the Dockerfile CMD", "container/Dockerfile",
     '"--metricUrls"', '"--metricsUrls"'),
    ("typo'd flag in a manifest's args", "container/k8s/connect-mode.yaml",
     "          env:\n", '          args: ["collect", "--url", "http://+:52323"]\n          env:\n'),
    ("typo'd setting name", "container/k8s/listen-mode.yaml",
     "DotnetMonitor_Storage__DefaultSharedPath", "DotnetMonitor_Storage__DefaultSharedPth"),
    ("typo'd setting name (auth)", "container/k8s/connect-mode.yaml",
     "DotnetMonitor_Authentication__MonitorApiKey__Subject", "DotnetMonitor_Authentication__MonitorApiKey_Subject"),
    ("wrong probe path", "container/k8s/connect-mode.yaml", "path: /healthz", "path: /health"),
    ("probe on the metrics port", "container/k8s/listen-mode.yaml",
     "path: /readyz\n              port: 52323", "path: /readyz\n              port: 52325"),
    ("/tmp not shared in connect mode", "container/k8s/connect-mode.yaml",
     "mountPath: /tmp               # sockets", "mountPath: /var/tmp           # sockets"),
    ("app connects to another socket", "container/k8s/listen-mode.yaml",
     "value: /diag/dotmon.sock,nosuspend", "value: /diag/dotnet-monitor.sock,nosuspend"),
    ("app waits for dotmon", "container/k8s/listen-mode.yaml",
     "value: /diag/dotmon.sock,nosuspend", "value: /diag/dotmon.sock,suspend"),
    ("dotmon runs as another uid", "container/k8s/listen-mode.yaml",
     "            readOnlyRootFilesystem: true    # dotmon",
     "            runAsUser: 65532\n            readOnlyRootFilesystem: true    # dotmon"),
    ("writable root file system", "container/k8s/connect-mode.yaml",
     "readOnlyRootFilesystem: true    # dotmon", "readOnlyRootFilesystem: false   # dotmon"),
    ("Secret key missing from the example", "container/k8s/secret-example.yaml",
     "  PublicKey:", "  PublicKeyy:"),
    ("invalid YAML", "container/k8s/listen-mode.yaml", "kind: Deployment\n", "kind: Deployment\n\t- x\n"),
    ("ENTRYPOINT in shell form", "container/Dockerfile", 'ENTRYPOINT ["/usr/local/bin/dotmon"]',
     "ENTRYPOINT /usr/local/bin/dotmon"),
    ("final stage on a base image", "container/Dockerfile", "FROM scratch\n", "FROM debian:12-slim\n"),
    ("a file added beside the rootfs", "container/Dockerfile", "COPY --from=build /rootfs/ /\n",
     "COPY --from=build /rootfs/ /\nCOPY README.md /README.md\n"),
    ("build stage without the shared recipe", "container/Dockerfile",
     "RUN sh /src/container/build-rootfs.sh /src /build /rootfs", "RUN sh /src/container/rootfs.sh /build/dotmon /rootfs"),
    ("root user in the image", "container/Dockerfile", "USER 1654:1654", "USER root"),
    ("port not exposed", "container/Dockerfile", "EXPOSE 52323 52325", "EXPOSE 52323"),
    ("build dependency dropped", "container/Dockerfile", " libcjson-dev ", " "),
]


def run_mutations(root, dotmon, key, baseline):
    base = set(baseline)
    undetected = []
    for title, rel, old, new in MUTATIONS:
        with tempfile.TemporaryDirectory(prefix="dotmon-ctr-mut-") as tmp:
            shutil.copytree(os.path.join(root, "container"), os.path.join(tmp, "container"))
            shutil.copy(os.path.join(root, "Makefile"), os.path.join(tmp, "Makefile"))
            p = os.path.join(tmp, rel)
            with open(p, encoding="utf-8") as f:
                text = f.read()
            if old not in text:
                undetected.append(f"{title}: the text to mutate is gone from {rel} ({old!r}); update MUTATIONS")
                continue
            with open(p, "w", encoding="utf-8") as f:
                f.write(text.replace(old, new, 1))
            new_fails = [x.replace(tmp + "/", "") for x in check_all(tmp, dotmon, key, False).items]
            extra = [x for x in new_fails if x not in base]
            if extra:
                extra.sort(key=lambda x: "exit status" not in x)   # dotmon's own refusal first
                print(f"  caught: {title}: {extra[0]}")
            else:
                undetected.append(f"{title} ({rel}) is not detected")
    return undetected


def cmd_manifests(a):
    dotmon = os.path.abspath(a.dotmon)
    key = generate_key(lambda args, env: subprocess.run([dotmon] + args, env=base_env(),
                                                        capture_output=True, text=True, timeout=30))
    print("== container/ as given")
    fails = check_all(a.repo, dotmon, key, True)
    baseline = [x.replace(a.repo.rstrip("/") + "/", "") for x in fails.items]
    print("== mutated copies (each must be caught)")
    undetected = run_mutations(a.repo, dotmon, key, baseline)
    for x in baseline:
        print(f"FAIL {x}")
    for x in undetected:
        print(f"FAIL mutation: {x}")
    if baseline or undetected:
        print(f"{len(baseline)} failure(s), {len(undetected)} undetected mutation(s)")
        return 1
    print("ok: container/ is consistent with this build")
    return 0


# ---------------------------------------------------------------------------------------------
# rootfs: the image's files, run with chroot
# ---------------------------------------------------------------------------------------------

def elf_interp(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        return None
    e = "<" if data[5] == 1 else ">"
    phoff, = struct.unpack_from(e + "Q", data, 0x20)
    phentsize, phnum = struct.unpack_from(e + "HH", data, 0x36)
    for i in range(phnum):
        off = phoff + i * phentsize
        ptype, = struct.unpack_from(e + "I", data, off)
        if ptype == 3:  # PT_INTERP
            poff, = struct.unpack_from(e + "Q", data, off + 8)
            psz, = struct.unpack_from(e + "Q", data, off + 32)
            return data[poff:poff + psz].rstrip(b"\0").decode()
    return None


def http_get(port, path, token=None, timeout=2.0):
    """GET path on 127.0.0.1:port: (status, 0 when the connection fails; body bytes)."""
    st, _, body = fetch(f"http://127.0.0.1:{port}{path}", token=token, timeout=timeout)
    return st, body


def with_port(url, port):
    return re.sub(r"^([a-z]+://(?:\[[^\]]*\]|[^/:]*))(?::\d+)?", lambda m: f"{m.group(1)}:{port}", url)


def cmd_rootfs(a):
    chroot = shutil.which("chroot") or shutil.which("chroot", path="/usr/sbin:/sbin")
    if os.geteuid() != 0 or chroot is None:
        print("SKIPPED: needs root and chroot; the image layout was not tried")
        return SKIP
    fails = Failures()
    dotmon = os.path.abspath(a.dotmon)
    interp = elf_interp(dotmon) or ""
    if not fails.check(interp.startswith(IMAGE_LIBDIR + "/"), dotmon,
                       f"loader is {interp!r}: not linked like the image (expected {IMAGE_LIBDIR}/…)"):
        return report(fails)
    df = parse_dockerfile(os.path.join(a.repo, "container", "Dockerfile"), fails)
    docs = load_manifests(os.path.join(a.repo, "container", "k8s"), fails)
    uid, _, gid = (df["user"] or "65534").partition(":")
    gid = gid or uid

    with tempfile.TemporaryDirectory(prefix="dotmon-ctr-rootfs-") as tmp:
        rootfs = os.path.join(tmp, "rootfs")
        r = subprocess.run(["sh", os.path.join(a.repo, "container", "rootfs.sh"), dotmon, rootfs],
                           capture_output=True, text=True, timeout=60)
        if not fails.check(r.returncode == 0, "container/rootfs.sh", r.stderr.strip()):
            return report(fails)
        files = r.stdout.split()
        size = sum(os.path.getsize(os.path.join(rootfs, f.lstrip("/"))) for f in files if not f.endswith("/"))
        print(f"  rootfs.sh laid out {len(files)} entries, {size / 1e6:.1f} MB: {' '.join(files)}")
        os.chmod(rootfs, 0o755)
        st = os.stat(os.path.join(rootfs, "tmp"))
        fails.check(st.st_mode & 0o7777 == 0o1777, "container/rootfs.sh", f"/tmp has mode {st.st_mode & 0o7777:o}, not 1777")

        def run(args, env, **kw):
            return subprocess.run([chroot, f"--userspec={uid}:{gid}", rootfs, "/usr/local/bin/dotmon"] + args,
                                  env=env, capture_output=True, text=True, timeout=30, **kw)

        r = run(["--version"], {})
        if not fails.check(r.returncode == 0, "chroot dotmon --version",
                           f"exit {r.returncode}: {r.stderr.strip()} (the copied libraries are not enough)"):
            return report(fails)
        print(f"  dotmon --version in the rootfs: {r.stdout.strip()}")
        key = generate_key(run)   # OpenSSL works from the copied libcrypto

        cases = [("Dockerfile CMD", (df["cmd"] or [])[1:], [], None)]
        for fname, wname, pod in pod_specs(docs):
            for c in pod.get("containers") or []:
                if is_dotmon(c):
                    cw = f"{fname} ({wname})"
                    argv = effective_argv(c, df)
                    opts = argv[2:] if argv[1:2] == ["collect"] else argv[1:]
                    cases.append((cw, opts, resolve_env(c, docs, cw, fails, key), c))
        for title, opts, env, c in cases:
            run_collect_case(title, rootfs, chroot, opts, env, c, key, uid, gid, fails)
    return report(fails)


def run_collect_case(title, rootfs, chroot, opts, env, c, key, uid, gid, fails):
    """Starts `dotmon collect` in the rootfs on free ports; probes, tokens, SIGTERM."""
    # Each volume of the container becomes an empty directory owned by the pod's uid (emptyDir).
    for m in (c or {}).get("volumeMounts") or []:
        d = os.path.join(rootfs, m["mountPath"].lstrip("/"))
        if os.path.isdir(d) and m["mountPath"] != "/tmp":
            shutil.rmtree(d)
        os.makedirs(d, exist_ok=True)
        os.chown(d, int(uid), int(gid))
    api, metrics = free_port(), free_port()
    opts = list(opts)
    for i, o in enumerate(opts):
        if i > 0 and opts[i - 1] in ("--urls", "-u"):
            opts[i] = with_port(o, api)
        elif i > 0 and opts[i - 1] == "--metricUrls":
            opts[i] = with_port(o, metrics)
    penv = {n: v for n, v, _ in env}
    for n in list(penv):
        k = (setting_key(n) or "").lower()
        if k == "urls":
            penv[n] = with_port(penv[n], api)
        elif k == "metrics:endpoints":
            penv[n] = with_port(penv[n], metrics)
    if option_value(opts, "--urls", "-u") is None and "urls" not in [(setting_key(n) or "").lower() for n in penv]:
        opts += ["--urls", f"http://127.0.0.1:{api}"]
    w = f"{title}: collect {' '.join(opts)}"
    print(f"  {w}")
    p = subprocess.Popen([chroot, f"--userspec={uid}:{gid}", rootfs, "/usr/local/bin/dotmon", "collect"] + opts,
                         env=penv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready = settle(lambda: http_get(api, "/readyz")[0] if p.poll() is None else None,
                       lambda st: st == 200 or p.poll() is not None, 10, 0.05)
        if p.poll() is not None:
            fails.add(w, f"exited with status {p.returncode}")
            return
        fails.check(ready == 200, w, f"/readyz answered {ready} within 10 s")
        probes = [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")]
        for probe, default in probes:
            path = (((c or {}).get(probe) or {}).get("httpGet") or {}).get("path", default)
            st, _ = http_get(api, path)
            fails.check(st == 200, w, f"{probe} GET {path} without a token answered {st}")
        st, _ = http_get(api, "/processes")
        fails.check(st == 401, w, f"/processes without a token answered {st}, expected 401")
        if any(s for _, _, s in env):
            st, body = http_get(api, "/processes", key["token"])
            fails.check(st == 200, w, f"/processes with the generated token answered {st}")
        ep = option_value(opts, "--diagnostic-port") or (
            env_setting(env, "DiagnosticPort:EndpointName")
            if (env_setting(env, "DiagnosticPort:ConnectionMode") or "").lower() == "listen" else None)
        if ep:
            sp = os.path.join(rootfs, ep.lstrip("/"))
            ok = os.path.exists(sp) and (os.stat(sp).st_mode & 0o777) == 0o600
            fails.check(ok, w, f"listen mode: no 0600 socket at {ep}")
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=10)
                fails.check(p.returncode == 0, w, f"exit status {p.returncode} after SIGTERM")
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                fails.add(w, "did not stop within 10 s of SIGTERM")
        _, err = p.communicate()
        if any(w in x for x in fails.items) and err.strip():
            print("    dotmon's log (last lines):\n" + "\n".join("    " + x for x in err.splitlines()[-10:]))


def report(fails):
    for x in fails.items:
        print(f"FAIL {x}")
    if fails.items:
        print(f"{len(fails.items)} failure(s)")
        return 1
    print("ok: the image's files run dotmon as the manifests do")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["manifests", "rootfs"])
    ap.add_argument("--repo", required=True, help="repository root")
    ap.add_argument("--dotmon", required=True, help="dotmon binary of this build")
    a = ap.parse_args()
    a.repo = os.path.abspath(a.repo)
    return cmd_manifests(a) if a.mode == "manifests" else cmd_rootfs(a)


if __name__ == "__main__":
    sys.exit(main())
