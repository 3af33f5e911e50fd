#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Every setting of dotnet-monitor's documentation/schema.json and what dotmon does with it,
looked up in dotmon's docs/schema.json (which config_schema keeps true to the sources):

    honoured         dotmon's schema has it
    not implemented  dotmon's schema has it, described "Not implemented by dotmon" (accepted and
                     ignored, named at start-up)
    refused          dotmon's schema lacks it (a start-up error or an unknown setting)

A trigger's or action's settings are listed once per type (`Settings[CPUUsage]:GreaterThan`);
the repeats under Templates are left out. Not a test (dotnet-monitor's schema is not part of the
project): a maintainer's tool, run against a copy of that file.

Usage: audit_schema.py <dotnet-monitor's schema.json> [--summary]
"""

import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_schema import NOT_IMPLEMENTED, SCHEMA_PATH, Schema  # noqa: E402


def their_paths(doc):
    """(path, description) of every setting of a draft-04 schema with definitions, the trigger
    and action settings under `Settings[<Type>]`."""
    defs = doc.get("definitions", {})

    def res(n):
        while "$ref" in n:
            n = defs[n["$ref"].split("/")[-1]]
        return n

    def walk(node, path, seen):
        name = node.get("$ref", "").split("/")[-1]
        if name and name in seen:
            return  # a recursive definition
        seen = seen | {name} if name else seen
        n = res(node)
        subs = list(n.get("properties", {}).items())
        for key in ("additionalProperties", "items"):
            if isinstance(n.get(key), dict):
                subs.append(("*", n[key]))
        for alt in n.get("oneOf", []):
            typ = alt.get("properties", {}).get("Type", {}).get("const")
            if typ is not None:
                subs.append((f"Settings[{typ}]", alt["properties"].get("Settings", {})))
            elif "$ref" in alt or "properties" in alt:
                r = res(alt)
                subs += list(r.get("properties", {}).items())
                for key in ("additionalProperties", "items"):
                    if isinstance(r.get(key), dict):
                        subs.append(("*", r[key]))
        subs = [(k, v) for k, v in subs if not (k == "Settings" and any(
            s.startswith("Settings[") for s, _ in subs))]
        if not subs:
            if path and path != ["*"]:
                yield ":".join(path), n.get("description", node.get("description", ""))
            return
        for k, v in subs:
            if path == [] and k == "Templates":
                continue
            yield from walk(v, path + [k], seen)

    seen_paths = set()
    for p, d in walk(doc, [], frozenset()):
        if p not in seen_paths:
            seen_paths.add(p)
            yield p, d


def ours(schema, path):
    """dotmon's schema of a path of theirs, or None."""
    m = re.match(r"^(.*?):Settings\[(\w+)\](?::(.*))?$", path)
    if not m:
        node = schema.doc
        for seg in path.split(":"):
            node = schema.child(node, seg)
            if node is None:
                return None
            node = schema.resolve(node)
            if node.get("description", "").startswith(NOT_IMPLEMENTED) and "properties" not in node:
                return node  # a whole section accepted and ignored
        return node
    base, typ, rest = m.groups()
    if schema.at(base + ":Type") is None or typ not in schema.at(base + ":Type").get("enum", []):
        return None
    node = schema.doc["definitions"].get(f"{typ}Settings")
    if rest is None:
        return {"description": "(no settings)"}
    for seg in rest.split(":"):
        node = schema.child(node, seg) if node is not None else None
    return schema.resolve(node) if node is not None else None


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    with open(sys.argv[1], encoding="utf-8") as f:
        theirs = json.load(f)
    with open(SCHEMA_PATH, encoding="utf-8") as f:
        schema = Schema(json.load(f))
    counts = {}
    for path, _ in their_paths(theirs):
        node = ours(schema, path)
        if node is None:
            verdict = "refused"
        elif node.get("description", "").startswith(NOT_IMPLEMENTED):
            verdict = "not implemented"
        else:
            verdict = "honoured"
        counts[verdict] = counts.get(verdict, 0) + 1
        if "--summary" not in sys.argv:
            print(f"{verdict:16} {path}")
    print(", ".join(f"{v}: {n}" for v, n in sorted(counts.items())), f"(of {sum(counts.values())})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
