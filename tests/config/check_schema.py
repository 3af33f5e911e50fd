#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""docs/schema.json, dotmon's settings schema, held against dotmon and its settings files.

1. The schema against the C sources' tables (dotmon_tables.py): every key config/config.c reads
   is in the schema and every key of the schema is read by dotmon or named in config.c's list of
   dotnet-monitor settings it does not implement (then the schema's description says so); the
   Timeouts rows of config/timeouts.h with their bounds; the settings of the FileSystem and
   S3Storage egress providers; the trigger and action types of rules/ and their settings.
2. ajv (strict) over every settings file the project uses: the docs' json blocks marked
   `settings` (tests/docs/check_docs.py's parser) and the settings the test scripts write (their
   dict literals made of settings sections; what a literal computes is not checked). A literal
   that a test feeds to dotmon to be refused carries `# schema: invalid` on its first line or
   the line before: the schema must refuse it too.
3. A few deliberately wrong files, each refused for the reason it was built with.

Usage: check_schema.py --tables-only | <node> <node_modules>
"""

import ast
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dotmon_tables as tables  # noqa: E402

ROOT = tables.ROOT
SCHEMA_PATH = os.path.join(ROOT, "docs", "schema.json")
NOT_IMPLEMENTED = "Not implemented by dotmon"
sys.path.insert(0, os.path.join(ROOT, "tests", "docs"))
import check_docs  # noqa: E402

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


# ---- the schema as a tree of settings

class Schema:
    def __init__(self, doc):
        self.doc = doc

    def resolve(self, node):
        """node with its $ref, and the $refs of its allOf/anyOf members, merged in."""
        out = dict(node)
        while "$ref" in out:
            target = self.doc
            for part in out.pop("$ref").lstrip("#/").split("/"):
                target = target[part]
            out = {**target, **out}
        for key in ("allOf", "anyOf"):
            for member in out.get(key, []):
                if "$ref" in member or "properties" in member or "items" in member:
                    m = self.resolve(member)
                    for k in ("properties", "items", "additionalProperties", "description"):
                        if k in m and k not in out:
                            out[k] = m[k]
        return out

    def child(self, node, segment):
        """The schema of node's child `segment` ('*': any array element or map entry)."""
        node = self.resolve(node)
        if segment == "*":
            if isinstance(node.get("items"), dict):
                return node["items"]
            if isinstance(node.get("additionalProperties"), dict):
                return node["additionalProperties"]
            return None
        for name, sub in node.get("properties", {}).items():
            if name.lower() == segment.lower():
                return sub
        # A map's key or an array's index, as .NET's configuration writes them ("Filters:0").
        if isinstance(node.get("items"), dict) and segment.isdigit():
            return node["items"]
        if isinstance(node.get("additionalProperties"), dict):
            return node["additionalProperties"]
        return None

    def at(self, path):
        node = self.doc
        for seg in path.split(":"):
            node = self.child(node, seg) if node is not None else None
        return self.resolve(node) if node is not None else None

    def leaves(self, node=None, path=""):
        """(path, node) of every setting: a property with no named properties under it ('*'
        for a map entry or an array element)."""
        node = self.resolve(self.doc if node is None else node)
        props = node.get("properties", {})
        subs = list(props.items())
        if isinstance(node.get("items"), dict):
            subs.append(("*", node["items"]))
        if isinstance(node.get("additionalProperties"), dict):
            subs.append(("*", node["additionalProperties"]))
        if not subs:
            yield path, node
            return
        for name, sub in subs:
            if name == "$schema":
                continue
            yield from self.leaves(sub, f"{path}:{name}" if path else name)


def key_matches(key, pattern):
    """config.c's key_matches: '*' stands for one section, case-insensitive, whole key."""
    k, p = key.lower().split(":"), pattern.lower().split(":")
    return len(k) == len(p) and all(pp == "*" or pp == kk for kk, pp in zip(k, p))


def under(key, prefix):
    return key.lower() == prefix.lower() or key.lower().startswith(prefix.lower() + ":")


def check_tables(schema):
    known, whole, foreign = tables.config_tables()
    # config.c's keys: each one a setting of the schema.
    for pattern in known:
        if pattern == "Timeouts:*":
            continue
        check(schema.at(pattern) is not None, f"config.c reads {pattern}; the schema has it")
    # The schema's settings: each read by dotmon, or named not implemented in both places.
    leaves = list(schema.leaves())
    for path, node in leaves:
        root = path.split(":")[0]
        if root in ("Egress", "Timeouts") or any(under(path, w) for w in whole):
            continue
        said = node.get("description", "").startswith(NOT_IMPLEMENTED)
        if any(key_matches(path, p) for p in known):
            check(not said, f"{path}: read by dotmon, and the schema does not call it not implemented")
        elif any(under(path, f) for f in foreign):
            check(said, f"{path}: in config.c's not-implemented list, and the schema says so")
        else:
            check(False, f"{path}: in the schema, but config.c neither reads it nor names it")
    # Timeouts: the table's rows, their default and bounds.
    rows = tables.timeout_rows()
    t = schema.at("Timeouts")
    check(sorted(t.get("properties", {})) == sorted(f"{r[0]}Ms" for r in rows),
          f"Timeouts: the schema has the {len(rows)} rows of config/timeouts.h and no other")
    for name, default, lo, hi, _ in rows:
        p = schema.at(f"Timeouts:{name}Ms") or {}
        check((p.get("default"), p.get("minimum"), p.get("maximum")) == (default, lo, hi),
              f"Timeouts:{name}Ms: default {default}, from {lo} to {hi}")
    check(t.get("additionalProperties") is False, "Timeouts: no other key (timeouts.c refuses one)")
    # Egress: the provider types and their settings.
    e = schema.at("Egress")
    check(sorted(e["properties"]) == ["FileSystem", "Properties", "S3Storage"],
          "Egress: FileSystem, S3Storage and Properties (egress.c refuses other types)")
    for kind, names in (("S3Storage", tables.s3_settings()), ("FileSystem", tables.fs_settings())):
        got = sorted(schema.at(f"Egress:{kind}:*").get("properties", {}))
        check(got == names, f"Egress:{kind}: the schema's settings {got} are those egress/ reads {names}")
    # Rules: the types and the settings of each.
    triggers, actions, unsupported = tables.rule_types()
    for what, table, defname in (("trigger", triggers, "Trigger"), ("action", actions, "Action")):
        node = schema.resolve(schema.doc["definitions"][defname])
        got = node["properties"]["Type"].get("enum", [])
        check(sorted(got) == sorted(table), f"{what} types: the schema's {sorted(got)} are rules/'s")
        check(not set(got) & set(unsupported), f"{what} types: none that rules/ refuses ({unsupported})")
        for name, (fields, more) in table.items():
            d = schema.doc["definitions"].get(f"{name}Settings", {"properties": {}})
            have = set(d["properties"])
            check(set(fields) <= have, f"{name}: rules/ reads {sorted(fields)}; the schema has them")
            read = sorted(set(fields) | set(more))
            check(have <= set(read), f"{name}: the schema's settings {sorted(have)} are read by rules/ ({read})")
    common = schema.resolve(schema.doc["definitions"]["Action"])["properties"]
    check(set(tables.action_common()) <= set(common), "Action: Name and WaitForCompletion")


# ---- settings files

PLACEHOLDER = "\u0000computed"


def literal(node):
    """A dict literal as data; anything computed becomes PLACEHOLDER."""
    if isinstance(node, ast.Dict):
        out = {}
        for k, v in zip(node.keys, node.values):
            if k is None:
                continue  # **spread: not checked
            key = literal(k)
            out[key if isinstance(key, str) else PLACEHOLDER] = literal(v)
        return out
    if isinstance(node, (ast.List, ast.Tuple)):
        return [literal(e) for e in node.elts]
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        return -node.operand.value
    return PLACEHOLDER


def test_settings():
    """[(name, settings, want_invalid)] of the test scripts' settings literals: dicts whose keys
    are all settings sections, outermost only."""
    sections = check_docs.SETTINGS_SECTIONS
    out = []
    for top, dirs, files in os.walk(os.path.join(ROOT, "tests")):
        dirs[:] = sorted(d for d in dirs if d != "node_modules")
        if os.path.abspath(top) == os.path.dirname(os.path.abspath(__file__)):
            continue  # this script's own wrong files
        for f in sorted(files):
            if not f.endswith(".py"):
                continue
            path = os.path.join(top, f)
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
            lines = text.split("\n")
            inner = set()
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, ast.Dict) and id(node) not in inner:
                    keys = [k.value if isinstance(k, ast.Constant) else None for k in node.keys]
                    if keys and all(isinstance(k, str) and k in sections | {"$schema"} for k in keys):
                        for sub in ast.walk(node):
                            if sub is not node:
                                inner.add(id(sub))
                        around = " ".join(lines[max(0, node.lineno - 2):node.lineno])
                        rel = os.path.relpath(path, ROOT)
                        out.append((f"{rel}:{node.lineno}", literal(node), "# schema: invalid" in around))
    return out


def docs_settings():
    out = []
    for name in check_docs.doc_files(ROOT):
        with open(os.path.join(ROOT, name), encoding="utf-8") as f:
            blocks, _ = check_docs.parse_markdown(f.read(), name)
        for b in blocks:
            if b.lang == "json" and b.marker == "settings":
                out.append((b.where(), json.loads(b.text), False))
    return out


# Deliberately wrong files: (name, settings, the instance path ajv must name).
WRONG = [
    ("a typo'd section", {"Metric": {"Enabled": False}}, ""),
    ("a typo'd key", {"Storage": {"DumpTempFoldr": "/tmp"}}, "/Storage"),
    ("a wrong enum", {"DiagnosticPort": {"ConnectionMode": "Listening"}}, "/DiagnosticPort"),
    ("a wrong dump type", {"CollectionRules": {"R": {"Trigger": {"Type": "Startup"}, "Actions": [
        {"Type": "CollectDump", "Settings": {"Type": "Huge", "Egress": "e"}}]}}},
     "/CollectionRules/R/Actions/0/Settings/Type"),
    ("an unknown trigger", {"CollectionRules": {"R": {"Trigger": {"Type": "Sometimes"}}}},
     "/CollectionRules/R/Trigger/Type"),
    ("an action dotmon refuses", {"CollectionRules": {"R": {"Trigger": {"Type": "Startup"}, "Actions": [
        {"Type": "LoadProfiler", "Settings": {"Path": "p.so"}}]}}}, "/CollectionRules/R/Actions/0/Type"),
    ("a trigger setting of another type", {"CollectionRules": {"R": {"Trigger": {
        "Type": "CPUUsage", "Settings": {"RequestCount": 5}}}}}, "/CollectionRules/R/Trigger/Settings"),
    ("a timeout out of bounds", {"Timeouts": {"IpcExchangeMs": 10}}, "/Timeouts/IpcExchangeMs"),
    ("a counter interval under dotnet-monitor's 1 s", {"GlobalCounter": {"IntervalSeconds": 0.5}},
     "/GlobalCounter/IntervalSeconds"),
    ("a counter interval in a locale's format", {"GlobalCounter": {"IntervalSeconds": "1,5"}},
     "/GlobalCounter/IntervalSeconds"),
    ("an unknown timeout", {"Timeouts": {"IpcExchange": 1000}}, "/Timeouts"),
    ("a typo'd S3 setting", {"Egress": {"S3Storage": {"s3": {"BucketName": "b", "Region": "x"}}}},
     "/Egress/S3Storage/s3"),
    ("an egress type dotmon refuses", {"Egress": {"AzureBlobStorage": {"a": {"AccountUri": "https://x"}}}},
     "/Egress"),
    ("a TimeSpan that is not one", {"Kestrel": {"Limits": {"KeepAliveTimeout": "ten minutes"}}},
     "/Kestrel/Limits/KeepAliveTimeout"),
    ("a log level dotmon does not know", {"Logging": {"LogLevel": {"Default": "Verbose"}}},
     "/Logging/LogLevel/Default"),
]


def at_placeholder(settings, path):
    node = settings
    for part in [p for p in path.split("/") if p]:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, list):
            node = node[int(part)] if part.isdigit() and int(part) < len(node) else None
        elif isinstance(node, dict):
            node = node.get(part)
        if node == PLACEHOLDER:
            return True
    return False


def real_errors(settings, errors):
    """What a test computes is not checked: errors about a computed value (or key) do not count,
    nor the if/anyOf summaries of such errors alone."""
    def computed(e):
        return at_placeholder(settings, e["path"]) or PLACEHOLDER in e["message"]
    real = [e for e in errors if e["keyword"] not in ("if", "anyOf") and not computed(e)]
    return real + [e for e in errors if e["keyword"] in ("if", "anyOf") and not computed(e) and
                   any(r["path"].startswith(e["path"]) for r in real)]


def check_variables(schema):
    """The DotnetMonitor_ variables that the docs and the Kubernetes manifests set name settings
    of the schema ("__" for ':')."""
    import glob
    import re
    names = set()
    for path in [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))) + \
            sorted(glob.glob(os.path.join(ROOT, "container", "k8s", "*.yaml"))):
        with open(path, encoding="utf-8") as f:
            names |= set(re.findall(r"\bDotnetMonitor_(\w+)", f.read()))
    names = sorted(n for n in names if not n.endswith("_"))
    check(len(names) >= 10, f"the docs' and manifests' DotnetMonitor_ variables are found ({len(names)})")
    for n in names:
        key = n.replace("__", ":")
        check(schema.at(key) is not None, f"DotnetMonitor_{n}: the schema has {key}")


def check_files(node, modules):
    docs, scripts = docs_settings(), test_settings()
    check(len(docs) >= 5, f"the docs' settings examples are found ({len(docs)})")
    check(len(scripts) >= 20, f"the test scripts' settings are found ({len(scripts)})")
    cases = docs + scripts
    all_cases = [(n, s, inv, None) for n, s, inv in cases] + [(n, s, True, p) for n, s, p in WRONG]
    with tempfile.TemporaryDirectory(prefix="dmschema") as tmp:
        path = os.path.join(tmp, "cases.json")
        with open(path, "w") as f:
            json.dump([{"name": n, "settings": s} for n, s, _, _ in all_cases], f)
        r = subprocess.run([node, os.path.join(os.path.dirname(os.path.abspath(__file__)), "validate.js"),
                            modules, SCHEMA_PATH, path], capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, f"ajv ran: {r.stderr.strip()[-2000:]}")
    results = {}
    for line in r.stdout.splitlines():
        o = json.loads(line)
        results[o["name"]] = o["errors"]
    for name, settings, want_invalid, want_path in all_cases:
        errors = results.get(name)
        if errors is None:
            check(False, f"{name}: no answer from ajv")
            continue
        real = real_errors(settings, errors)
        said = "; ".join(f"{e['path'] or '/'}: {e['message']}" for e in real[:6])
        if want_path is not None:
            check(any(e["path"] == want_path for e in real), f"{name}: refused at {want_path or '/'} ({said})")
        elif want_invalid:
            check(bool(real), f"{name}: refused, as the test expects dotmon to ({said or 'valid'})")
        else:
            check(not real, f"{name}: valid ({said})" if real else f"{name}: valid")


def main():
    with open(SCHEMA_PATH, encoding="utf-8") as f:
        schema = Schema(json.load(f))
    check(schema.doc.get("$schema") == "http://json-schema.org/draft-07/schema#", "draft-07")
    check_tables(schema)
    check_variables(schema)
    if sys.argv[1:] != ["--tables-only"]:
        if len(sys.argv) != 3:
            print(__doc__)
            return 2
        check_files(sys.argv[1], sys.argv[2])
    if failures:
        print(f"\n{len(failures)} check(s) failed:\n  " + "\n  ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
