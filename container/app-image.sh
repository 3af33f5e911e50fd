#!/bin/sh
# SPDX-License-Identifier: MIT
#
# app-image.sh [-t TAG] [-w WORKDIR] [-a APP_DIR -e APPHOST]
#
# Builds an image of a .NET app with buildah, without a registry (`make app-image`): for the pod
# example (docs: Kubernetes), where the app beside dotmon must be an image. By default the app is
# `hello`, the walk-through's console app: made here with `dotnet new console`, printing a line and
# allocating a little every second until stopped. With -a, APP_DIR is your own framework-dependent
# `dotnet publish` output and APPHOST its apphost's file name. The image (container/app.Containerfile) holds the
# app, this machine's .NET host and runtime and the libraries they load (container/app_rootfs.py),
# runs as uid 1654 and is tagged localhost/dotmon-hello:latest unless -t says otherwise. WORKDIR
# (default build/app-image) holds the app's project, its build and the image's context. The
# engine's usual configuration applies (CONTAINERS_CONF, CONTAINERS_STORAGE_CONF select others).
# Prints the image id on the last line of standard output.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
workdir=$src/build/app-image
tag=localhost/dotmon-hello:latest
app=
entry=hello

usage="usage: app-image.sh [-t TAG] [-w WORKDIR] [-a APP_DIR -e APPHOST]"
while getopts t:w:a:e: opt; do
    case $opt in
    t) tag=$OPTARG ;;
    w) workdir=$OPTARG ;;
    a) app=$OPTARG ;;
    e) entry=$OPTARG ;;
    *) echo "$usage" >&2; exit 2 ;;
    esac
done
missing=
for tool in buildah python3 dotnet ldd; do
    command -v "$tool" >/dev/null || missing="$missing $tool"
done
[ -z "$missing" ] || { echo "app-image.sh: not found:$missing" >&2; exit 1; }
case $entry in
*/* | '' | *[!A-Za-z0-9._-]*) echo "app-image.sh: -e must be the apphost's file name" >&2; exit 2 ;;
esac

mkdir -p "$workdir"
if [ -z "$app" ]; then
    # The walk-through's app, its Program.cs written whole (no edit of the template's file).
    rm -rf "$workdir/hello" "$workdir/publish"
    dotnet new console -n hello -o "$workdir/hello" >/dev/null
    cat >"$workdir/hello/Program.cs" <<'CS'
var n = 0;
var kept = new List<byte[]>();
while (true)
{
    Console.WriteLine($"hello {n++}");
    kept.Add(new byte[16 * 1024]);
    if (kept.Count > 64)
    {
        kept.RemoveAt(0);
    }
    Thread.Sleep(1000);
}
CS
    dotnet publish "$workdir/hello" -c Release -o "$workdir/publish" >/dev/null
    app=$workdir/publish
fi
[ -x "$app/$entry" ] || { echo "app-image.sh: $app/$entry is not an apphost" >&2; exit 1; }

ctx=$workdir/context
rm -rf "$ctx"
mkdir -p "$ctx"
python3 "$here/app_rootfs.py" "$app" "$ctx/rootfs"
sed "s|APP_ENTRY|$entry|" "$here/app.Containerfile" >"$ctx/Containerfile"
buildah bud --quiet --layers=false --format oci -t "$tag" -f "$ctx/Containerfile" "$ctx"
