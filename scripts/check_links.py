#!/usr/bin/env python3
"""Checks every relative link in README.md, docs/*.md and docs/results/*.md: the file or folder exists, and a
#fragment names a heading of the target (GitHub's anchors: lower case, punctuation dropped, spaces to hyphens).
Links inside fenced code are skipped. Prints each broken link and exits 1 if there is one.

Usage: scripts/check_links.py [REPO_ROOT]   (default: the repository this script is in)
"""
import glob
import os
import re
import sys

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
files = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")) +
                                                  glob.glob(os.path.join(root, "docs", "results", "*.md")))


def slug(heading):
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path):
    found, fenced = set(), False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            found.add(slug(line.lstrip("#")))
    return found


links = broken = 0
for f in files:
    text = re.sub(r"```.*?```", "", open(f, encoding="utf-8").read(), flags=re.S)
    for m in re.finditer(r"\[[^\]]*\]\(([^)\s]+)\)", text):
        target = m.group(1)
        if re.match(r"^[a-z]+:", target):
            continue
        links += 1
        path, _, fragment = target.partition("#")
        resolved = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
        if not os.path.exists(resolved):
            print(f"{os.path.relpath(f, root)}: {target}: no such file")
            broken += 1
        elif fragment and resolved.endswith(".md") and fragment not in anchors(resolved):
            print(f"{os.path.relpath(f, root)}: {target}: no such heading")
            broken += 1
print(f"{links} relative links, {broken} broken")
sys.exit(1 if broken else 0)
