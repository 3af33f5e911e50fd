#!/bin/sh
# SPDX-License-Identifier: MIT
#
# build-rootfs.sh SRC BUILDDIR ROOTFS
#
# The one recipe for the image's files, run by both ways of building the image:
#   - container/Dockerfile's build stage (docker/podman/buildah build, Debian 12 build image);
#   - container/image.sh (`make image`), on a Debian 12 host, with buildah.
# Both then take ROOTFS as the whole image: the final stage is FROM scratch + COPY of ROOTFS.
#
# Steps: configure SRC in BUILDDIR (release hardening, no tests) with the loader and library
# folder of the image (/usr/lib/dotmon), build dotmon, strip it, lay it out with
# container/rootfs.sh, and, as root, run it in a chroot of ROOTFS as the image's user (uid 1654)
# to prove the tree is complete. ROOTFS must not exist or be empty.
set -eu

if [ $# -ne 3 ]; then
    echo "usage: build-rootfs.sh SRC BUILDDIR ROOTFS" >&2
    exit 2
fi
src=$1
build=$2
rootfs=$3
here=$(cd "$(dirname "$0")" && pwd)

if [ -d "$rootfs" ] && [ -n "$(ls -A "$rootfs")" ]; then
    echo "build-rootfs.sh: $rootfs is not empty" >&2
    exit 1
fi

# The loader's file name as this system's binaries request it (ld-linux-x86-64.so.2 on amd64,
# ld-linux-aarch64.so.1 on arm64).
loader=$(readelf -l /bin/sh | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')
loader=${loader##*/}
if [ -z "$loader" ]; then
    echo "build-rootfs.sh: cannot read the dynamic loader of /bin/sh" >&2
    exit 1
fi

cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAGENT_TESTS=OFF -DAGENT_HARDEN=ON \
    -DCMAKE_EXE_LINKER_FLAGS="-Wl,--dynamic-linker=/usr/lib/dotmon/${loader} -Wl,-rpath,/usr/lib/dotmon" \
    >/dev/null
cmake --build "$build" -j"$(nproc)" --target dotmon >/dev/null
strip --strip-unneeded -o "$build/dotmon.stripped" "$build/dotmon"

mkdir -p "$rootfs"
sh "$here/rootfs.sh" "$build/dotmon.stripped" "$rootfs" >/dev/null

if [ "$(id -u)" = 0 ]; then
    chroot --userspec=1654:1654 "$rootfs" /usr/local/bin/dotmon --version >/dev/null
else
    echo "build-rootfs.sh: not root, the chroot check of $rootfs is skipped" >&2
fi
