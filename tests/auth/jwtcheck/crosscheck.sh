#!/bin/sh
# SPDX-License-Identifier: MIT
# ctest auth_jwt_dotnet_crosscheck: builds jwtcheck (framework only) into the build tree, has
# test_auth print a fresh auth_generate() result, and checks it with .NET.
# usage: crosscheck.sh TEST_AUTH_BINARY DOTNET PROJECT OUTDIR
set -eu
test_bin=$1
dotnet=$2
project=$3
out=$4
mkdir -p "$out"
if ! "$dotnet" build "$project" -c Release -o "$out/bin" --nologo -v q \
        -p:BaseIntermediateOutputPath="$out/obj/" -p:BaseOutputPath="$out/binbase/" \
        >"$out/build.log" 2>&1; then
    cat "$out/build.log"
    exit 1
fi
"$test_bin" --print-generated >"$out/generated.txt"
key=$(sed -n 1p "$out/generated.txt")
subject=$(sed -n 2p "$out/generated.txt")
token=$(sed -n 3p "$out/generated.txt")
exec "$dotnet" "$out/bin/jwtcheck.dll" "$key" "$subject" "$token"
