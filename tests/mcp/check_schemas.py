#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks what test_mcp_tools wrote with MCP_TOOLS_DUMP=<folder> with a full JSON Schema validator
(python3-jsonschema, Draft 2020-12): every tool's input and output schema is a valid schema, and
every structuredContent the tools built from the fixtures validates against its tool's output
schema. Usage: check_schemas.py <folder>; exit 77 (skipped) without python3-jsonschema."""
import glob
import json
import os
import sys

try:
    from jsonschema import Draft202012Validator
except ImportError:
    print("skipped: python3-jsonschema is not installed")
    sys.exit(77)

folder = sys.argv[1]
schemas = {}
bad = 0
for path in sorted(glob.glob(os.path.join(folder, "*.*-schema.json"))):
    tool, what = os.path.basename(path).split(".")[:2]
    with open(path, encoding="utf-8") as f:
        schema = json.load(f)
    try:
        Draft202012Validator.check_schema(schema)
    except Exception as e:  # noqa: BLE001 - any schema error is a finding
        print(f"{tool} {what}: not a valid schema: {e}")
        bad += 1
    schemas[(tool, what)] = schema
outs = sorted(glob.glob(os.path.join(folder, "*.out.*.json")))
for path in outs:
    tool = os.path.basename(path).split(".")[0]
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    errors = list(Draft202012Validator(schemas[(tool, "output-schema")]).iter_errors(doc))
    for e in errors:
        print(f"{os.path.basename(path)}: {e.json_path}: {e.message}")
        bad += 1
tools = {t for t, _ in schemas}
print(f"{len(tools)} tools, {len(schemas)} schemas, {len(outs)} structuredContent checked; "
      f"{bad} problems")
if len(tools) != 14 or len(outs) == 0:
    bad += 1
sys.exit(1 if bad else 0)
