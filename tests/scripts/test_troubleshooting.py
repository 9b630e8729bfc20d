#!/usr/bin/env python3
"""test_troubleshooting.py - docs/troubleshooting.md quotes the library's messages: every quoted part in the left
column of its tables must still occur, to the letter, in the sources that write the messages (src/, graphs/; a number
in the quote may stand for a printf conversion there), so the page cannot drift from what users see.
Usage: test_troubleshooting.py REPO_ROOT"""
import glob
import os
import re
import sys

from checks import check, finish  # tests/scripts/checks.py

root = sys.argv[1]
sources = ""
for path in sorted(glob.glob(os.path.join(root, "src", "**", "*.c"), recursive=True) +
                   glob.glob(os.path.join(root, "graphs", "*.c"))):
    sources += open(path, encoding="utf-8").read()
# A message's text in the sources may be split over string literals: join adjacent ones ("..." "...").
sources = re.sub(r'"\s*\n\s*"', "", sources)

quoted = []
for line in open(os.path.join(root, "docs", "troubleshooting.md"), encoding="utf-8"):
    cells = line.split("|")
    if line.startswith("| `") and len(cells) > 2:
        quoted += re.findall(r"`([^`]+)`", cells[1])
check(len(quoted) >= 20, f"the page quotes messages ({len(quoted)})")
for text in quoted:
    # a number in the quote ("16-byte") may stand for a printf conversion in the source ("%d-byte")
    pattern = re.sub(r"\\d\+", r"(?:\\d+|%[-+ #0-9.]*[a-z]+)", re.sub(r"\d+", r"\\d+", re.escape(text)))
    check(re.search(pattern, sources) is not None, f"quoted in the sources: {text}")
finish("TROUBLESHOOTING")
