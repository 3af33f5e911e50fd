# SPDX-License-Identifier: MIT
"""The settings dotmon reads, taken from its C sources' own tables (no build needed): the known,
whole-section and not-implemented keys of config/config.c, the rows of config/timeouts.h, the
settings of the egress providers (egress/s3_conf.c, egress/egress.c, egress/egress_fs.c) and the
trigger and action types of rules/ with the settings each reads. check_schema.py holds them
against docs/schema.json."""

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def source(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        text = f.read()
    # Comments out (a quoted word in a comment is not a table row).
    return re.sub(r"/\*.*?\*/", "", text, flags=re.S)


def c_array(text, name):
    """The string literals of `... name[] = { ... };`."""
    m = re.search(r"\b" + re.escape(name) + r"\[\]\s*=\s*\{(.*?)\};", text, re.S)
    if not m:
        raise ValueError(f"no array {name}")
    return re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(1))


def config_tables():
    """(known keys, known prefixes, foreign prefixes) of config/config.c."""
    t = source("config/config.c")
    return c_array(t, "known_keys"), c_array(t, "known_prefixes"), c_array(t, "foreign_prefixes")


def timeout_rows():
    """[(name, default, min, max, what)] of config/timeouts.h's TIMEOUTS_TABLE."""
    t = source("config/timeouts.h").replace("\\\n", "\n")
    rows = []
    for m in re.finditer(r'\bX\(\s*(\w+),\s*"(\w+)",\s*(\d+),\s*(\d+),\s*(\d+),\s*(NULL|"[^"]*"),'
                         r'\s*\w+,((?:\s*"(?:[^"\\]|\\.)*")+)\s*\)', t):
        what = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(7)))
        rows.append((m.group(2), int(m.group(3)), int(m.group(4)), int(m.group(5)), what))
    if not rows:
        raise ValueError("no rows in config/timeouts.h")
    return rows


def setting_names(text, func):
    """The names a setter compares its setting with: ascii_ieq(setting, "X") in func's body."""
    m = re.search(r"\n\w[^\n]*\b" + re.escape(func) + r"\(.*?\n\}\n", text, re.S)
    if not m:
        raise ValueError(f"no function {func}")
    return re.findall(r'ascii_ieq\(setting,\s*"(\w+)"\)', m.group(0))


def s3_settings():
    t = source("egress/s3_conf.c")
    m = re.search(r"\}\s*strings\[\]\s*=\s*\{(.*?)\n    \};", t, re.S)
    names = re.findall(r'\{"(\w+)",', m.group(1))
    names += setting_names(t, "egress_s3_set")
    refs = re.findall(r'\{EGRESS_S3,\s*"(\w+)",', source("egress/egress.c"))
    return sorted(set(names + refs))


def fs_settings():
    return sorted(set(setting_names(source("egress/egress_fs.c"), "egress_fs_set")))


def field_macros(text):
    """{macro: setting} of the field macros whose row names its setting itself (F_EGRESS)."""
    joined = text.replace("\\\n", " ")
    return dict(re.findall(r'#define (F_\w+)(?:\([^)]*\))?\s+\{\s*"(\w+)"', joined))


def field_table(text, name):
    """The setting names of a rules_field table: each row's name (first string) or macro."""
    m = re.search(r"\b" + re.escape(name) + r"\[\]\s*=\s*\{(.*?)\};", text, re.S)
    if not m:
        raise ValueError(f"no field table {name}")
    body = m.group(1)
    names = re.findall(r'\{\s*"(\w+)",', body)
    names += re.findall(r'\bF_\w+\(\s*"(\w+)"', body)
    names += [v for k, v in field_macros(text).items() if re.search(r"\b" + k + r"\b", body)]
    return names


def functions(text):
    """{name: body} of the static functions defined in text."""
    out = {}
    for m in re.finditer(r"\nstatic \w+ \*?(\w+)\([^;{]*\)\s*\{(.*?)\n\}\n", text, re.S):
        out[m.group(1)] = m.group(2)
    return out


def post_keys(text, func, seen=None):
    """Settings a post function reads itself or through the file's functions it calls:
    rules__key(c, <section>, "X") and rules__required(c, <section>, "X")."""
    fns = functions(text)
    seen = set() if seen is None else seen
    if func not in fns or func in seen:
        return []
    seen.add(func)
    body = fns[func]
    names = re.findall(r'rules__(?:key|required)\(c,\s*\w+,\s*"(\w+)"\)', body)
    for callee in re.findall(r"\b(\w+)\(", body):
        if callee in fns and callee != func:
            names += post_keys(text, callee, seen)
    return names


def rule_types():
    """({trigger: (fields, more)}, {action: (fields, more)}, [types refused as unsupported]):
    fields are the settings of the type's field table, more the names its post function reads
    (its own settings, and nested ones or other types' when the function is shared)."""
    tt = source("rules/rules_trigger_cfg.c")
    triggers = {"Startup": ([], [])} if '{{"Startup"' in tt else {}
    for m in re.finditer(r'\bTRIGGER\(\s*"(\w+)",\s*\w+,\s*(\w+),\s*(\w+),', tt):
        triggers[m.group(1)] = (field_table(tt, m.group(2)), post_keys(tt, m.group(3)))
    at = source("rules/rules_action_cfg.c")
    actions, unsupported = {}, c_array(at, "unsupported_types")
    fns = functions(at)
    for m in re.finditer(r'\bACTION\(\s*"(\w+)",\s*\w+,\s*(\w+),\s*(\w+),', at):
        if "is not supported by dotmon" in fns.get(m.group(3), ""):
            unsupported.append(m.group(1))  # parsed for its messages, then refused (LoadProfiler)
            continue
        actions[m.group(1)] = (field_table(at, m.group(2)), post_keys(at, m.group(3)))
    return triggers, actions, unsupported


def action_common():
    """Settings of every action, beside Type and Settings (CollectionRuleActionOptions)."""
    return field_table(source("rules/rules_action_cfg.c"), "f_action")
