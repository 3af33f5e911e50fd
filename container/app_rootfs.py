#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The files of a .NET app's image built FROM scratch, without a registry: the app, the .NET host
and shared framework of this machine's SDK, and the C/C++ libraries they load. `make app-image`
(container/app-image.sh) and the pod tests (tests/container/check_pod.py) lay out their app images
with it; like Microsoft's .NET images the app runs as uid 1654 (`app`).

    python3 container/app_rootfs.py APP_DIR ROOTFS [FRAMEWORK...]

APP_DIR is a framework-dependent `dotnet publish` output (with its apphost); ROOTFS must not exist.
FRAMEWORK defaults to Microsoft.NETCore.App (add Microsoft.AspNetCore.App for an ASP.NET app).
"""

import os
import re
import shutil
import subprocess
import sys

APP_UID = 1654


def ldd_closure(paths):
    """{absolute path of each shared library (and the loader) the ELF files in paths need}."""
    out = set()
    for p in paths:
        r = subprocess.run(["ldd", p], capture_output=True, text=True)
        if r.returncode != 0:
            continue   # not a dynamic ELF file
        for line in r.stdout.splitlines():
            line = line.strip()
            if "not found" in line:
                raise RuntimeError(f"{p} needs a library ldd cannot find: {line}")
            if " => " in line:
                lib = line.split(" => ", 1)[1].split(" (", 1)[0]
            elif line.startswith("/"):
                lib = line.split(" (", 1)[0]
            else:
                continue
            out.add(lib)
    return out


def is_elf(path):
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def newest(dirpath, prefix="10."):
    names = [n for n in os.listdir(dirpath) if n.startswith(prefix)]
    if not names:
        raise RuntimeError(f"no {prefix}* in {dirpath}")
    return max(names, key=lambda v: [int(x) if x.isdigit() else 0 for x in re.split(r"[.-]", v)])


def app_rootfs(app_dir, rootfs, frameworks=("Microsoft.NETCore.App",)):
    """An app image's files under rootfs: /app (app_dir, a framework-dependent build with its
    apphost), the SDK's host and the shared frameworks it runs on (the newest 10.x of each, from the
    dotnet on PATH), every library their native parts load (ldd), /etc/passwd and /etc/group with
    the `app` user (APP_UID) and an empty /tmp (1777)."""
    dotnet = os.path.realpath(shutil.which("dotnet") or "")
    if not dotnet:
        raise RuntimeError("dotnet not found")
    droot = os.path.dirname(dotnet)
    shutil.copytree(app_dir, os.path.join(rootfs, "app"), symlinks=False)
    dst = os.path.join(rootfs, "usr/share/dotnet")
    os.makedirs(dst)
    shutil.copy2(dotnet, os.path.join(dst, "dotnet"))
    fxr = newest(os.path.join(droot, "host/fxr"))
    shutil.copytree(os.path.join(droot, "host/fxr", fxr), os.path.join(dst, "host/fxr", fxr))
    for fw in frameworks:
        v = newest(os.path.join(droot, "shared", fw))
        shutil.copytree(os.path.join(droot, "shared", fw, v), os.path.join(dst, "shared", fw, v))
    # LTTng's trace point provider: loaded only when DOTNET_LTTng asks for it, and it needs
    # liblttng-ust, which neither the SDK nor this image has.
    for base, _, files in os.walk(dst):
        for n in files:
            if n == "libcoreclrtraceptprovider.so":
                os.unlink(os.path.join(base, n))
    elves = []
    for base, _, files in os.walk(rootfs):
        elves += [os.path.join(base, n) for n in files if is_elf(os.path.join(base, n))]
    for lib in sorted(ldd_closure(elves)):
        if lib.startswith(rootfs):
            continue
        target = os.path.join(rootfs, lib.lstrip("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy(os.path.realpath(lib), target)
    os.makedirs(os.path.join(rootfs, "etc"))
    with open(os.path.join(rootfs, "etc/passwd"), "w", encoding="utf-8") as f:
        f.write(f"root:x:0:0:root:/root:/sbin/nologin\napp:x:{APP_UID}:{APP_UID}:app:/app:/sbin/nologin\n")
    with open(os.path.join(rootfs, "etc/group"), "w", encoding="utf-8") as f:
        f.write(f"root:x:0:\napp:x:{APP_UID}:\n")
    os.makedirs(os.path.join(rootfs, "tmp"))
    os.chmod(os.path.join(rootfs, "tmp"), 0o1777)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    try:
        app_rootfs(os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]),
                   tuple(sys.argv[3:]) or ("Microsoft.NETCore.App",))
    except (RuntimeError, OSError) as e:
        sys.exit(f"app_rootfs.py: {e}")
