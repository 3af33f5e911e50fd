#!/usr/bin/env bash
# The repository stands alone (issue 29): no tracked file points at reference material outside it
# (a reference folder beside the checkout, or the protocol/events/monitor/style notes it once held), and every
# "docs/<file>.md §<section>" a file cites names a file and a section heading that exist in docs/.
set -euo pipefail
cd "$(dirname "$0")/.."

# The patterns are spelled so that this script does not match itself.
outside='[.][.]/shared|(PROTOCOL|EVENTS|DOTNET-MONITOR|STYLE)[.]md'
if git grep -I -n -E "$outside" -- . ':!.ci/standalone.sh'; then
  echo "files above refer to material outside the repository; cite docs/ instead" >&2
  exit 1
fi

# Every docs/<name>.md a file names exists.
for f in $(git grep -I -h -o -E '(^|[^[:alnum:]_/.-])docs/[a-z-]+[.]md' -- . ':!.ci/standalone.sh' \
             | grep -oE 'docs/[a-z-]+[.]md' | sort -u); do
  if [ ! -f "$f" ]; then
    git grep -n -F "$f" -- . ':!.ci/standalone.sh' >&2 || true
    echo "$f does not exist" >&2
    exit 1
  fi
done

# Citations: "docs/ipc.md §4.2", "nettrace.md §3.1, §6", "api.md §7.2-7.4". A section N needs a
# heading "## N." in that file, a section N.M a heading "### N.M ".
docs='ipc|nettrace|events|profiles|api|rules|gcdump|otlp|deviations|style'
bad=0
while IFS= read -r hit; do
  where=${hit%%:*}
  rest=${hit#*:}
  line=${rest%%:*}
  ref=${rest#*:}
  name=$(printf '%s\n' "$ref" | grep -oE "($docs)[.]md" | head -n1)
  file="docs/$name"
  if [ ! -f "$file" ]; then
    echo "$where:$line: $ref: no $file" >&2
    bad=1
    continue
  fi
  for sec in $(printf '%s\n' "$ref" | grep -oE '§[0-9]+([.][0-9]+)?' | tr -d '§'); do
    case $sec in
    *.*) pat="^### ${sec//./[.]} " ;;
    *) pat="^## ${sec}[.] " ;;
    esac
    if ! grep -qE "$pat" "$file"; then
      echo "$where:$line: $ref: $file has no section $sec" >&2
      bad=1
    fi
  done
done < <(git grep -I -n -o -E "(^|[^[:alnum:]_/-])(docs/)?($docs)[.]md\)?( §[0-9]+([.][0-9]+)?(-[0-9.]+)?(, §[0-9]+([.][0-9]+)?)*)?" -- . ':!.ci/standalone.sh' \
           | grep '§' || true)
if [ "$bad" -ne 0 ]; then
  echo "citations of docs/ above name a missing file or section" >&2
  exit 1
fi
