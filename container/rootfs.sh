#!/bin/sh
# SPDX-License-Identifier: MIT
#
# rootfs.sh BINARY DESTDIR
#
# Lays out, under DESTDIR, every file of dotmon's image (container/Dockerfile's final stage is
# FROM scratch with this tree and nothing else; container/image.sh builds the same tree):
#   DESTDIR/usr/local/bin/dotmon            the binary
#   DESTDIR/usr/lib/dotmon/<soname>         every shared library `ldd BINARY` resolves
#                                           (libssl, libcrypto, libcjson, libuv, libc) and the dynamic
#                                           loader, copied under their run-time names
#   DESTDIR/etc/passwd, DESTDIR/etc/group   root, the image's user `app` (1654, as Microsoft's .NET
#                                           images) and nobody, so tools show names, not numbers
#   DESTDIR/etc/ssl/certs/ca-certificates.crt  the system's CA bundle, for TLS to egress stores
#   DESTDIR/tmp                             empty, mode 1777 (a pod mounts its shared volume here)
#   DESTDIR/home/app                        empty, mode 0700, owned by app (1654): the user's HOME,
#                                           never shared (dotmon reads ~/.config/dotnet-monitor/
#                                           settings.json from it; a HOME of /tmp let another uid
#                                           plant that file, issue 28)
#
# The libraries live in a folder of their own rather than in /lib/<triplet>, so nothing depends
# on how the base image lays out /lib and /lib64 (merged-/usr or not) and nothing shadows a C
# library the base might bring. The image's binary is linked with
#   -Wl,--dynamic-linker=/usr/lib/dotmon/<loader> -Wl,-rpath,/usr/lib/dotmon
# (container/Dockerfile) so it finds both there. A binary linked the usual way still runs from
# this tree with: /usr/lib/dotmon/<loader> --library-path /usr/lib/dotmon /usr/local/bin/dotmon.
#
# The list is whatever ldd says, so it is exact for the binary at hand (an ASan build also gets
# libasan). A library ldd cannot find stops the script. Prints the files it copied.
set -eu

if [ $# -ne 2 ]; then
    echo "usage: rootfs.sh BINARY DESTDIR" >&2
    exit 2
fi
bin=$1
dest=$2
libdir=/usr/lib/dotmon

mkdir -p "$dest/usr/local/bin" "$dest$libdir"
cp "$bin" "$dest/usr/local/bin/dotmon"
chmod 0755 "$dest/usr/local/bin/dotmon"
echo "/usr/local/bin/dotmon"

# ldd goes to a file, not a pipe, so a failure inside the loop stops the script (dash has no
# pipefail).
list=$(mktemp)
trap 'rm -f "$list"' EXIT
ldd "$bin" >"$list"

n=0
while read -r line; do
    case $line in
    *"not found"*)
        echo "rootfs.sh: $bin needs a library ldd cannot find: $line" >&2
        exit 1
        ;;
    *" => "*)
        path=${line#* => }
        path=${path%% (*}
        ;;
    /*)
        # The loader itself: "/lib64/ld-linux-x86-64.so.2 (0x...)".
        path=${line%% (*}
        ;;
    *)
        # linux-vdso.so.1 and friends come from the kernel.
        continue
        ;;
    esac
    name=${path##*/}
    cp -L "$path" "$dest$libdir/$name"
    chmod 0755 "$dest$libdir/$name"
    echo "$libdir/$name"
    n=$((n + 1))
done <"$list"

if [ "$n" -eq 0 ]; then
    echo "rootfs.sh: ldd found no shared libraries in $bin (a static binary needs no rootfs.sh)" >&2
    exit 1
fi

mkdir -p "$dest/etc/ssl/certs"
printf '%s\n' 'root:x:0:0:root:/root:/sbin/nologin' 'app:x:1654:1654:app:/home/app:/sbin/nologin' \
    'nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin' >"$dest/etc/passwd"
printf '%s\n' 'root:x:0:' 'app:x:1654:' 'nogroup:x:65534:' >"$dest/etc/group"
chmod 0644 "$dest/etc/passwd" "$dest/etc/group"
echo "/etc/passwd"
echo "/etc/group"
bundle=/etc/ssl/certs/ca-certificates.crt
if [ ! -s "$bundle" ]; then
    echo "rootfs.sh: no CA bundle at $bundle (Debian: apt-get install ca-certificates)" >&2
    exit 1
fi
cp -L "$bundle" "$dest$bundle"
chmod 0644 "$dest$bundle"
echo "$bundle"
mkdir -p "$dest/tmp"
chmod 1777 "$dest/tmp"
echo "/tmp/"
mkdir -p "$dest/home/app"
chmod 0755 "$dest/home"
chmod 0700 "$dest/home/app"
if [ "$(id -u)" = 0 ]; then
    chown 1654:1654 "$dest/home/app"
else
    # Owned by the builder: dotmon (uid 1654) then refuses ~/.config there, which is safe.
    echo "rootfs.sh: not root, $dest/home/app is not given to uid 1654" >&2
fi
echo "/home/"
echo "/home/app/"
