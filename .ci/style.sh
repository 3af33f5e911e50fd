#!/usr/bin/env bash
# House style that a compiler does not check (docs/style.md): every C file is clang-format clean
# (.clang-format), dotmon's own sources pass clang-tidy's bug-prone and function-size checks
# (.clang-tidy), and the release preset builds a hardened binary. Needs clang-format and
# clang-tidy (Debian: clang-format, clang-tidy; `make style` installs them).
#
# clang-tidy reads the compile commands of the normal build ($BUILD, default build/) when it has
# been configured (CI builds it first); otherwise it configures a build-tidy of its own (nothing
# is compiled for it either way: the commands are all it needs).
set -euo pipefail
cd "$(dirname "$0")/.."

mapfile -t cfiles < <(git ls-files '*.c' '*.h')
echo "style: clang-format on ${#cfiles[@]} files"
clang-format --dry-run --Werror "${cfiles[@]}"

build=${BUILD:-build}
own_build=
if [ ! -f "$build/compile_commands.json" ]; then
    build=build-tidy own_build=1
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAGENT_TESTS=OFF >/dev/null
fi
tidy_log=$(mktemp "${TMPDIR:-/tmp}/dotmon-tidy.XXXXXX")
mapfile -t srcs < <(git ls-files 'common/*.c' 'tls/*.c' 'ipc/*.c' 'http/*.c' 'auth/*.c' 'events/*.c' 'otlp/*.c' 'mcp/*.c' 'egress/*.c' 'rules/*.c' 'config/*.c' 'collect/*.c' 'agent/*.c')  # agent/*.c: its subfolders too (a pathspec's * crosses /)
echo "style: clang-tidy on ${#srcs[@]} files"
# gcc-only warning flags in the compile commands are unknown to clang: not findings.
printf '%s\n' "${srcs[@]}" | xargs -P "$(nproc)" -n 4 \
    clang-tidy -p "$build" --quiet --extra-arg=-Wno-unknown-warning-option 2>/dev/null \
    >"$tidy_log" || { cat "$tidy_log" >&2; rm -f "$tidy_log"; exit 1; }
if grep -q "warning:\|error:" "$tidy_log"; then cat "$tidy_log" >&2; rm -f "$tidy_log"; exit 1; fi
rm -f "$tidy_log"
[ -z "$own_build" ] || rm -rf "$build"

# The release preset: hardened (PIE, full RELRO, immediate binding, fortified calls).
rm -rf build-release
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" >/dev/null
bin=build-release/dotmon
# (outputs taken whole first: `grep -q` closing a pipe early would fail it under pipefail)
hdr=$(readelf -h "$bin"); seg=$(readelf -lW "$bin"); dyn=$(readelf -d "$bin"); syms=$(nm -D "$bin")
grep -q "DYN (Position-Independent Executable" <<<"$hdr" || { echo "style: $bin is not PIE" >&2; exit 1; }
grep -q GNU_RELRO <<<"$seg" || { echo "style: $bin has no RELRO" >&2; exit 1; }
grep -q "BIND_NOW" <<<"$dyn" || { echo "style: $bin is not bound now" >&2; exit 1; }
grep -q "_chk@" <<<"$syms" || { echo "style: $bin has no fortified calls" >&2; exit 1; }
"$bin" --version >/dev/null
rm -rf build-release
echo "style: ok"
