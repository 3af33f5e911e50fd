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
# Downward-API values (fieldRef) as this test stands them in: the pod's address is a TEST-NET-1
# address (the rootfs run binds 127.0.0.1 instead), the node's another one.
POD_IP_STANDIN = "192.0.2.10"
FIELD_STANDINS = {"status.podIP": POD_IP_STANDIN, "status.hostIP": "192.0.2.1",
                  "metadata.name": "dotmon-node-x7k2p", "metadata.namespace": "dotmon",
                  "spec.nodeName": "node-1"}
# Node mode (container/k8s/node-mode.yaml, docs/node.md "Privileges"): the capabilities a root
# dotmon is given are exactly the ones docs/node.md names on its line starting with NODE_CAPS_LINE.
NODE_DOC = os.path.join("docs", "node.md")
NODE_CAPS_LINE = "Capabilities node mode needs (uid 0):"
RBAC_KINDS = {"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding", "ServiceAccount"}
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
    """(file, workload name, pod spec, kind) for every workload."""
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
                yield fname, (d.get("metadata") or {}).get("name", "?"), spec, kind


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
        elif "fieldRef" in vf:
            path = (vf["fieldRef"] or {}).get("fieldPath")
            out.append((name, FIELD_STANDINS.get(path, "from-the-pod"), False))
        elif "resourceFieldRef" in vf:
            out.append((name, "from-the-pod", False))
        else:
            fails.add(where, f"env {name}: unsupported valueFrom {list(vf)}")
    return out


def effective_argv(c, df, env=()):
    """Kubernetes' rule: command replaces ENTRYPOINT (and drops CMD); args replaces CMD. In command
    and args, $(NAME) becomes the value of the container's variable NAME (env, as resolve_env
    gives it), $$ is a literal $, and a $(NAME) of no variable stays as written."""
    values = {n: v for n, v, _ in env}

    def expand(x):
        return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)",
                      lambda m: "$" if m.group(0) == "$$" else values.get(m.group(1), m.group(0)), str(x))
    if c.get("command"):
        return [expand(x) for x in c["command"]] + [expand(x) for x in c.get("args") or []]
    args = c.get("args")
    return list(df["entrypoint"] or []) + [expand(x) for x in (args if args is not None else df["cmd"] or [])]


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
    for fname, wname, pod, kind in workloads:
        where = f"{fname} ({wname})"
        containers = pod.get("containers") or []
        dms = [c for c in containers if is_dotmon(c)]
        apps = [c for c in containers if not is_dotmon(c)]
        if not fails.check(len(dms) == 1, where, f"expected one dotmon container, found {len(dms)}"):
            continue
        dm = dms[0]
        cw = f"{where} container {dm.get('name')}"
        env = resolve_env(dm, docs, cw, fails, key)
        argv = effective_argv(dm, df, env)
        node = (env_setting(env, "DiagnosticPort:ConnectionMode") or "").lower() == "node"
        if node:
            fails.check(not apps, where, f"node mode: dotmon runs alone in its pod (found {[a.get('name') for a in apps]})")
        else:
            fails.check(apps, where, "no application container next to dotmon")
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
        if node:
            check_node_pod((pod, dm, cw, kind, fname), opts, env, docs, root, fails)
        cases.append((f"{fname} dotmon", opts, env, None if node else (pod, dm, apps, cw)))
    # No workload needs to call the Kubernetes API, so no manifest grants any of it.
    for fname, ds in docs.items():
        for d in ds:
            if isinstance(d, dict) and d.get("kind") in RBAC_KINDS:
                fails.add(fname, f"{d.get('kind')} {(d.get('metadata') or {}).get('name')}: dotmon needs no RBAC")

    # --- each case: pod wiring, then `config show` ------------------------------------------
    for title, opts, env, podinfo in cases:
        if podinfo is not None:
            check_pod(podinfo, opts, env, df, fails)
        check_config_show(title, dotmon, opts, env, fails)
    return fails


def documented_node_caps(root, fails):
    """The capability set docs/node.md names on its NODE_CAPS_LINE line (None when absent)."""
    path = os.path.join(root, NODE_DOC)
    text = open(path, encoding="utf-8").read() if os.path.exists(path) else ""
    line = next((x for x in text.splitlines() if x.startswith(NODE_CAPS_LINE)), None)
    if not fails.check(line is not None, NODE_DOC, f"no line starting with {NODE_CAPS_LINE!r}"):
        return None
    caps = set(re.findall(r"`(?:CAP_)?([A-Z_]+)`", line[len(NODE_CAPS_LINE):]))
    fails.check(caps, NODE_DOC, f"the line {NODE_CAPS_LINE!r} names no `CAPABILITY`")
    return caps


def check_node_pod(podinfo, opts, env, docs, root, fails):
    """Node mode: one dotmon per node with the host's pid namespace and only the documented
    capabilities (docs/node.md, "Privileges"), auth on, the API published on the node."""
    pod, dm, cw, kind, fname = podinfo
    fails.check(kind == "DaemonSet", cw, f"node mode in a {kind}: one dotmon per node is a DaemonSet")
    fails.check(pod.get("hostPID") is True, cw, "node mode without hostPID: true: dotmon sees only its own pod")
    for f in ("hostNetwork", "hostIPC"):
        fails.check(not pod.get(f), cw, f"{f}: true: node mode needs only the host's pid namespace")
    fails.check(pod.get("automountServiceAccountToken") is False, cw,
                "automountServiceAccountToken is not false: dotmon does not call the Kubernetes API")
    for v in pod.get("volumes") or []:
        fails.check("hostPath" not in v, cw, f"volume {v.get('name')} is a hostPath: node mode reads /proc, nothing else")
    tol = pod.get("tolerations") or []
    fails.check(any(t.get("operator") == "Exists" and not t.get("key") and not t.get("effect") for t in tol), cw,
                "no toleration of every taint (operator: Exists, no key): tainted nodes go unwatched")

    # Privileges: exactly the documented capabilities as root, none as another uid.
    uid = effective_sc(pod, dm, "runAsUser")
    fails.check(isinstance(uid, int) and uid >= 0, cw, "no runAsUser (the image's uid 1654 would see only its own processes)")
    fails.check(effective_sc(pod, dm, "privileged") is not True, cw, "privileged: true")
    fails.check(effective_sc(pod, dm, "allowPrivilegeEscalation") is False, cw, "allowPrivilegeEscalation is not false")
    fails.check(effective_sc(pod, dm, "readOnlyRootFilesystem") is True, cw, "readOnlyRootFilesystem is not true")
    sp = effective_sc(pod, dm, "seccompProfile") or {}
    fails.check(sp.get("type") == "RuntimeDefault", cw, "seccompProfile is not RuntimeDefault")
    caps = effective_sc(pod, dm, "capabilities") or {}
    fails.check("ALL" in (caps.get("drop") or []), cw, "capabilities do not drop ALL")
    added = {str(x).upper().removeprefix("CAP_") for x in caps.get("add") or []}
    if uid == 0:
        fails.check(effective_sc(pod, dm, "runAsNonRoot") is not True, cw, "runAsUser 0 with runAsNonRoot: true")
        want = documented_node_caps(root, fails)
        if want is not None:
            fails.check(added == want, cw, f"adds capabilities {sorted(added)}; {NODE_DOC} documents {sorted(want)}")
    else:
        # Kubernetes has no ambient capabilities: added ones never reach a non-root process.
        fails.check(not added, cw, f"runAsUser {uid} with capabilities {sorted(added)}: they never reach a non-root process")

    # Auth on: the API key from a Secret, no --no-auth.
    fails.check("--no-auth" not in opts, cw, "--no-auth: the API of a node agent must be authenticated")
    for k in ("Subject", "PublicKey"):
        fails.check(any(secret for n, _, secret in env
                        if (setting_key(n) or "").lower() == f"authentication:monitorapikey:{k.lower()}"), cw,
                    f"no Authentication:MonitorApiKey:{k} from a Secret")

    # The API on a hostPort, bound to the pod's own address; metrics scraped by annotation.
    url = option_value(opts, "--urls", "-u") or env_setting(env, "Urls") or "http://localhost:52323"
    host, port = url_port(url.split(";")[0])
    fails.check(host != FIELD_STANDINS["status.hostIP"], cw,
                f"artifact URL {url} binds status.hostIP: not an address of the pod's network namespace")
    ports = dm.get("ports") or []
    fails.check(any(p.get("containerPort") == port and p.get("hostPort") for p in ports), cw,
                f"the API port {port} has no hostPort: not reachable at the node's address")
    _, mport = url_port(option_value(opts, "--metricUrls") or env_setting(env, "Metrics:Endpoints") or "")
    fails.check(any(p.get("containerPort") == mport for p in ports), cw, f"the metrics port {mport} is not declared")
    ann = next((((d.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("annotations") or {}
                for d in docs[fname] if isinstance(d, dict) and d.get("kind") == kind)
    for k, v in (("prometheus.io/scrape", "true"), ("prometheus.io/port", str(mport)), ("prometheus.io/path", "/metrics")):
        fails.check(str(ann.get(k)) == v, cw, f"pod annotation {k} is {ann.get(k)!r}, expected {v!r}")
    for var, path in (("POD_NAME", "metadata.name"), ("POD_NAMESPACE", "metadata.namespace"), ("NODE_NAME", "spec.nodeName")):
        fails.check(any(n == var and v == FIELD_STANDINS[path] for n, v, _ in env), cw,
                    f"no {var} from the downward API ({path})")
    check_probes_resources(dm, opts, env, cw, fails)


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

    check_probes_resources(dm, opts, env, cw, fails)


def check_probes_resources(dm, opts, env, cw, fails):
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
    # Node mode (check_node_pod)
    ("node mode without hostPID", "container/k8s/node-mode.yaml", "hostPID: true", "hostPID: false"),
    ("node mode in a Deployment", "container/k8s/node-mode.yaml", "kind: DaemonSet", "kind: Deployment"),
    ("node mode with the host's network", "container/k8s/node-mode.yaml",
     "      hostPID: true", "      hostNetwork: true\n      hostPID: true"),
    ("a capability beyond the documented ones", "container/k8s/node-mode.yaml",
     'add: ["SYS_PTRACE", "DAC_OVERRIDE"]', 'add: ["SYS_PTRACE", "DAC_OVERRIDE", "SYS_ADMIN"]'),
    ("DAC_READ_SEARCH instead of DAC_OVERRIDE", "container/k8s/node-mode.yaml",
     'add: ["SYS_PTRACE", "DAC_OVERRIDE"]', 'add: ["SYS_PTRACE", "DAC_READ_SEARCH"]'),
    ("the documented set changed, not the manifest", "docs/node.md", "`DAC_OVERRIDE`", "`FOWNER`"),
    ("capabilities for a non-root uid", "container/k8s/node-mode.yaml",
     "runAsUser: 0 ", "runAsUser: 1654 "),
    ("privileged node agent", "container/k8s/node-mode.yaml", "privileged: false", "privileged: true"),
    ("node agent with privilege escalation", "container/k8s/node-mode.yaml",
     "allowPrivilegeEscalation: false\n            readOnlyRootFilesystem: true    # dumps",
     "allowPrivilegeEscalation: true\n            readOnlyRootFilesystem: true    # dumps"),
    ("node agent without auth", "container/k8s/node-mode.yaml",
     '"--metricUrls", "http://+:52325"]', '"--metricUrls", "http://+:52325", "--no-auth"]'),
    ("node agent's API key not from the Secret", "container/k8s/node-mode.yaml",
     "            - name: DotnetMonitor_Authentication__MonitorApiKey__PublicKey\n              valueFrom:",
     "            - name: DotnetMonitor_Authentication__MonitorApiKey__PublicKeyFromNowhere\n              valueFrom:"),
    ("API bound to status.hostIP", "container/k8s/node-mode.yaml",
     "fieldPath: status.podIP", "fieldPath: status.hostIP"),
    ("API not on a hostPort", "container/k8s/node-mode.yaml", "hostPort: 52323 ", "protocol: TCP  "),
    ("some taints not tolerated", "container/k8s/node-mode.yaml",
     "        - operator: Exists", "        - key: node-role.kubernetes.io/control-plane\n          operator: Exists"),
    ("scrape annotation on the API port", "container/k8s/node-mode.yaml",
     'prometheus.io/port: "52325"', 'prometheus.io/port: "52323"'),
    ("node readiness probe path", "container/k8s/node-mode.yaml",
     "path: /readyz\n              port: 52323\n            periodSeconds: 5\n            timeoutSeconds: 2\n          # Sized",
     "path: /ready\n              port: 52323\n            periodSeconds: 5\n            timeoutSeconds: 2\n          # Sized"),
    ("node name not from the downward API", "container/k8s/node-mode.yaml",
     "fieldPath: spec.nodeName", "fieldPath: metadata.uid"),
    ("node agent given RBAC", "container/k8s/node-mode.yaml", "---\n# For a Prometheus",
     "---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: dotmon-node\n---\n# For a Prometheus"),
    ("node agent with the service account token", "container/k8s/node-mode.yaml",
     "automountServiceAccountToken: false   # dotmon does not", "automountServiceAccountToken: true    # dotmon does not"),
    ("ConnectionMode value typo'd", "container/k8s/node-mode.yaml", "value: Node\n", "value: Nodes\n"),
]


def run_mutations(root, dotmon, key, baseline):
    base = set(baseline)
    undetected = []
    for title, rel, old, new in MUTATIONS:
        with tempfile.TemporaryDirectory(prefix="dotmon-ctr-mut-") as tmp:
            shutil.copytree(os.path.join(root, "container"), os.path.join(tmp, "container"))
            shutil.copy(os.path.join(root, "Makefile"), os.path.join(tmp, "Makefile"))
            os.makedirs(os.path.join(tmp, "docs"))
            shutil.copy(os.path.join(root, NODE_DOC), os.path.join(tmp, NODE_DOC))
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
        for fname, wname, pod, _ in pod_specs(docs):
            for c in pod.get("containers") or []:
                if is_dotmon(c):
                    cw = f"{fname} ({wname})"
                    env = resolve_env(c, docs, cw, fails, key)
                    argv = effective_argv(c, df, env)
                    opts = argv[2:] if argv[1:2] == ["collect"] else argv[1:]
                    cases.append((cw, opts, env, c))
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
    # The pod's own address (a manifest's --urls http://$(POD_IP):…) is loopback here.
    opts = [o.replace(POD_IP_STANDIN, "127.0.0.1") for o in opts]
    env = [(n, v.replace(POD_IP_STANDIN, "127.0.0.1"), s) for n, v, s in env]
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
            err = p.stderr.read()
            fails.add(w, f"exited with status {p.returncode}: {err.strip()[-300:]}")
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
