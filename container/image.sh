#!/bin/sh
# SPDX-License-Identifier: MIT
#
# image.sh [--tag NAME]... [--archive FILE] [--workdir DIR]
#
# Builds dotmon's image with buildah, without a registry or a Docker engine (`make image`):
#   1. container/build-rootfs.sh lays out the image's files in DIR/context/rootfs, the recipe
#      container/Dockerfile's build stage runs (this host must be Debian 12, as that stage is);
#   2. container/Dockerfile's final stage (FROM scratch, its one COPY pointed at that folder
#      instead of the build stage) is built with `buildah bud`, so USER, ENTRYPOINT, CMD, EXPOSE
#      and the labels come from the Dockerfile itself;
#   3. the OCI annotations version, revision, source and created are set on the manifest and as
#      labels, and the build time is the last commit's (SOURCE_DATE_EPOCH overrides it);
#   4. with --archive, `podman save --format oci-archive` writes FILE (load it elsewhere with
#      `podman load -i FILE`; `skopeo copy oci-archive:FILE docker-daemon:dotmon:latest` for Docker).
# Tags default to localhost/dotmon:<version> and localhost/dotmon:latest. The engine's usual
# configuration applies (CONTAINERS_CONF, CONTAINERS_STORAGE_CONF select others). Prints the image
# id on the last line of standard output.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
workdir=$src/build/image
archive=
tags=

while [ $# -gt 0 ]; do
    case $1 in
    --tag) tags="$tags $2"; shift 2 ;;
    --archive) archive=$2; shift 2 ;;
    --workdir) workdir=$2; shift 2 ;;
    *) echo "usage: image.sh [--tag NAME]... [--archive FILE] [--workdir DIR]" >&2; exit 2 ;;
    esac
done

for tool in buildah readelf strip cmake; do
    command -v "$tool" >/dev/null || { echo "image.sh: $tool not found (make image installs it)" >&2; exit 1; }
done
if [ -n "$archive" ] && ! command -v podman >/dev/null; then
    echo "image.sh: podman not found (needed for --archive)" >&2
    exit 1
fi

# 1. The files.
ctx=$workdir/context
rm -rf "$ctx"
mkdir -p "$ctx"
sh "$here/build-rootfs.sh" "$src" "$workdir/build" "$ctx/rootfs"
libdir=$ctx/rootfs/usr/lib/dotmon
loader=$(find "$libdir" -name 'ld-linux*' | head -n 1)
version=$("$loader" --library-path "$libdir" "$ctx/rootfs/usr/local/bin/dotmon" --version)

# 2. The Dockerfile's final stage, reading the files from the build context.
awk '/^FROM /{n=NR} {l[NR]=$0} END{for(i=n;i<=NR;i++) print l[i]}' "$here/Dockerfile" |
    sed -e 's|^COPY --from=build /rootfs/ /$|COPY rootfs/ /|' \
        -e 's|^COPY --from=build --chown=1654:1654 /rootfs/home/ /home/$|COPY --chown=1654:1654 rootfs/home/ /home/|' \
        >"$ctx/Containerfile"
if ! grep -qx 'FROM scratch' "$ctx/Containerfile" || ! grep -qx 'COPY rootfs/ /' "$ctx/Containerfile" ||
    grep -q 'from=build' "$ctx/Containerfile"; then
    echo "image.sh: container/Dockerfile's final stage is not FROM scratch + COPY --from=build /rootfs/ / (+ /home/app)" >&2
    exit 1
fi

# 3. Annotations.
revision=$(git -C "$src" rev-parse HEAD 2>/dev/null || echo unknown)
if [ "$revision" != unknown ] && [ -n "$(git -C "$src" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
    revision=$revision-dirty
fi
source=${IMAGE_SOURCE:-$(git -C "$src" config --get remote.origin.url 2>/dev/null || echo unknown)}
epoch=${SOURCE_DATE_EPOCH:-$(git -C "$src" log -1 --format=%ct 2>/dev/null || date +%s)}
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
[ -n "$tags" ] || tags="localhost/dotmon:$version localhost/dotmon:latest"

set --
for t in $tags; do
    set -- "$@" --tag "$t"
done
for kv in "version=$version" "revision=$revision" "source=$source" "created=$created"; do
    set -- "$@" --annotation "org.opencontainers.image.$kv"
done
set -- "$@" --label "org.opencontainers.image.created=$created"
buildah bud --quiet --format oci --layers=false --timestamp "$epoch" --identity-label=false \
    --build-arg "VERSION=$version" --build-arg "REVISION=$revision" --build-arg "SOURCE=$source" \
    "$@" --iidfile "$workdir/image-id" -f "$ctx/Containerfile" "$ctx" >/dev/null
id=$(cat "$workdir/image-id")
id=${id#sha256:}

# 4. The archive.
if [ -n "$archive" ]; then
    rm -f "$archive"
    # shellcheck disable=SC2086 # one word per tag
    first=$(printf '%s\n' $tags | head -n 1)
    podman save --quiet --format oci-archive -o "$archive" "$first"
fi
echo "dotmon $version ($revision): image$(printf ' %s' $tags)${archive:+, archive $archive}" >&2
echo "$id"
