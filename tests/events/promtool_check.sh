#!/bin/sh
# SPDX-License-Identifier: MIT
# Pipes the Prometheus text of prom_sample (a rich sample set, two processes) to Debian's
# `promtool check metrics` (package prometheus). promtool 2.42 exits 0 when clean, 3 when the
# text parses but lint rules complain (dotnet-monitor-compatible names such as `_ms` units or
# "no help text"), and 1 when the text does not parse (duplicate label names, a second HELP for
# a name, bad escapes...). Only a parse failure fails this test; lint output is shown.
# Usage: promtool_check.sh <prom_sample binary>
set -u
sample=$1
promtool=${PROMTOOL:-$(command -v promtool)}
if [ -z "$promtool" ]; then
    echo "skipped: promtool not found (apt-get install prometheus; see Makefile TEST_PACKAGES)"
    exit 77
fi
text=$(mktemp) || exit 1
trap 'rm -f "$text"' EXIT
"$sample" >"$text" || { echo "FAIL: $sample exited $?"; exit 1; }
lines=$(wc -l <"$text")
if [ "$lines" -lt 40 ]; then
    echo "FAIL: only $lines lines rendered"; cat "$text"; exit 1
fi
report=$("$promtool" check metrics <"$text" 2>&1)
rc=$?
echo "promtool check metrics: exit $rc, $lines lines"
[ -n "$report" ] && printf '%s\n' "$report"
case $rc in
    0|3) ;;
    *) echo "FAIL: promtool rejected the text"; cat -A "$text"; exit 1 ;;
esac
if printf '%s\n' "$report" | grep -q 'error while linting'; then
    echo "FAIL: parse error"; exit 1
fi
# The text parser merges families and accepts repeated series; check what it does not.
dup=$(awk '/^#/{next} {k=$0; i=match(k, /}[^}]*$/); if (i) k=substr(k, 1, i); else sub(/ .*/, "", k);
               print k}' "$text" | sort | uniq -d)
if [ -n "$dup" ]; then echo "FAIL: repeated series:"; printf '%s\n' "$dup"; exit 1; fi
helps=$(grep '^# HELP ' "$text" | cut -d' ' -f3 | sort | uniq -d)
if [ -n "$helps" ]; then echo "FAIL: repeated HELP: $helps"; exit 1; fi
# Each family contiguous: the metric names of the sample lines change only at a HELP (a
# histogram's lines are its name with _bucket, _sum or _count).
awk '/^# HELP /{cur=$3; if (seen[cur]++) bad=1; next} /^# TYPE /{type=$4; next} /^#/{next}
     {n=$0; sub(/[{ ].*/, "", n); if (type == "histogram") sub(/_(bucket|sum|count)$/, "", n);
      if (n != cur) bad=1} END{exit bad}' "$text" ||
    { echo "FAIL: a family is not contiguous"; exit 1; }
echo "ok"
exit 0
