#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench/report.py without running a real bench: marker rewriting, the output's markdown, a
fake bench end to end (written block, header line, a failure leaving the block), and
BENCHMARKS.md holding one block per bench of the tool's table."""

import contextlib
import io
import os
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import report  # noqa: E402

DOC = """# Title

Prose before.

<!-- bench:one begin -->
old one
<!-- bench:one end -->

Prose between.

<!-- bench:two begin -->
old two
<!-- bench:two end -->
Prose after.
"""


class Rewrite(unittest.TestCase):
    def test_replaces_only_its_block(self):
        out = report.rewrite(DOC, "one", ["new 1", "new 2"])
        self.assertIn("<!-- bench:one begin -->\nnew 1\nnew 2\n<!-- bench:one end -->", out)
        self.assertNotIn("old one", out)
        # Everything outside the block is byte for byte the same.
        self.assertEqual(out.replace("new 1\nnew 2\n", "old one\n"), DOC)
        again = report.rewrite(out, "one", ["third"])
        self.assertEqual(again.replace("third\n", "old one\n"), DOC)

    def test_name_is_exact(self):
        doc = DOC.replace("bench:two", "bench:one-two")
        out = report.rewrite(doc, "one", ["x"])
        self.assertIn("old two", out)
        with self.assertRaises(ValueError):
            report.rewrite(doc, "two", ["x"])

    def test_missing_or_duplicate_markers(self):
        with self.assertRaises(ValueError):
            report.rewrite(DOC, "three", ["x"])
        with self.assertRaises(ValueError):
            report.rewrite(DOC + DOC, "one", ["x"])
        with self.assertRaises(ValueError):  # a begin without its end
            report.rewrite(DOC.replace("<!-- bench:two end -->", ""), "two", ["x"])


class Markdown(unittest.TestCase):
    def test_tables_kept_text_fenced(self):
        lines = ["| a | b |", "|---|---|", "| 1 | 2 |", "", "apps: 10", "ratio 0.5x", "",
                 "| c |", "|---|", ""]
        self.assertEqual(report.to_markdown(lines), [
            "| a | b |", "|---|---|", "| 1 | 2 |", "",
            "```text", "apps: 10", "ratio 0.5x", "```",
            "| c |", "|---|"])

    def test_text_only(self):
        self.assertEqual(report.to_markdown(["x", "", "y", ""]), ["```text", "x", "", "y", "```"])


class Contents(unittest.TestCase):
    DOC = """# Title

## Contents

<!-- toc begin -->
stale
<!-- toc end -->

## How to read: these (1)

## Current
### Trace relay, `GET /trace`
```text
## not a heading
```
### Trace relay, `GET /trace`
#### too deep
"""

    def test_headings_and_anchors(self):
        self.assertEqual(report.toc(self.DOC), [
            "- [How to read: these (1)](#how-to-read-these-1)",
            "- [Current](#current)",
            "  - [Trace relay, `GET /trace`](#trace-relay-get-trace)",
            "  - [Trace relay, `GET /trace`](#trace-relay-get-trace-1)"])

    def test_rewrite_in_place(self):
        out = report.rewrite_toc(self.DOC)
        self.assertNotIn("stale", out)
        self.assertIn("<!-- toc begin -->\n- [How to read", out)
        self.assertEqual(report.rewrite_toc(out), out)
        self.assertEqual(report.rewrite_toc("no markers\n"), "no markers\n")


class EndToEnd(unittest.TestCase):
    def run_main(self, doc_path, names, table):
        saved = report.benches, sys.argv
        report.benches = lambda: table
        sys.argv = ["report.py", "--doc", doc_path, *names]
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                return report.main()
        finally:
            report.benches, sys.argv = saved

    def test_fake_benches(self):
        py = sys.executable
        table = [
            report.Bench("one", "prints a table", "", [
                [py, "-c", "import os, sys; print('| x | y |'); print('|---|---|');"
                 "print('| 1 |', os.environ['BENCH_FAKE'], '|'); print('progress', file=sys.stderr)"]],
                {"BENCH_FAKE": "2"}),
            report.Bench("two", "fails after printing", "", [
                [py, "-c", "import sys; print('| half |'); sys.exit(3)"]]),
            report.Bench("slot", "no commands yet"),
        ]
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "B.md")
            with open(path, "w") as f:
                f.write(DOC + "<!-- bench:slot begin -->\nslot text\n<!-- bench:slot end -->\n")
            self.assertEqual(self.run_main(path, ["one", "two", "slot"], table), 1)
            with open(path) as f:
                out = f.read()
        self.assertIn("old two", out)        # the failed bench's block is unchanged
        self.assertNotIn("| half |", out)
        self.assertIn("slot text", out)      # a slot is skipped
        self.assertNotIn("old one", out)
        block = out.split("<!-- bench:one begin -->\n")[1].split("<!-- bench:one end -->")[0]
        first, blank, *rest = block.rstrip("\n").split("\n")
        self.assertTrue(first.startswith("_Generated by `make bench` at `"))
        self.assertIn("`BENCH_FAKE=2 ", first)  # the bench's own environment, shown
        for word in ("UTC", "load average", "cores", "Linux", "before the run"):
            self.assertIn(word, first)
        self.assertEqual(blank, "")
        self.assertEqual(rest, ["| x | y |", "|---|---|", "| 1 | 2 |"])  # not standard error
        self.assertTrue(out.startswith("# Title\n\nProse before.\n"))
        self.assertIn("Prose between.", out)
        self.assertIn("Prose after.", out)

    def test_unknown_marker_fails_before_running(self):
        marker = os.path.join(tempfile.gettempdir(), f"bench_report_ran_{os.getpid()}")
        table = [report.Bench("three", "no block", "", [["touch", marker]])]
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "B.md")
            with open(path, "w") as f:
                f.write(DOC)
            with self.assertRaises(ValueError):
                self.run_main(path, ["three"], table)
        self.assertFalse(os.path.exists(marker))


class RealDocument(unittest.TestCase):
    def test_one_block_per_bench(self):
        with open(os.path.join(ROOT, "BENCHMARKS.md")) as f:
            doc = f.read()
        names = [b.name for b in report.benches()]
        self.assertEqual(len(names), len(set(names)))
        for name in ("trace", "foundation", "memory", "dump", "metrics-scrape"):
            self.assertIn(name, names)
        for n in names:
            report.rewrite(doc, n, [])  # raises unless there is exactly one block


if __name__ == "__main__":
    unittest.main()
