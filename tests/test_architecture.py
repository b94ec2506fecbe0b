"""ARCHITECTURE.md's tree names every module and package of ``monet_ilp/``.

The tree is the fenced block under ``## The tree``.  A line indented two spaces opens
an entry of the package root (``graph/ ...``, or ``errors.py progress.py ...`` for
top-level modules), one indented four spaces an entry of a subpackage (``p1/`` under
``problems/``), and deeper lines continue the entry above.  A module is named when its
name (with or without ``.py``) is a word of its package's entry; a package without an
entry of its own is named as ``name/ (...)`` in its parent's, its modules inside the
parentheses.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "monet_ilp"


def tree_entries() -> tuple[set[str], dict[str, str]]:
    """The top-level modules the tree names, and each package's entry text by its path."""
    text = (ROOT / "ARCHITECTURE.md").read_text()
    block = re.search(r"^## The tree\n+```\n(.*?)^```", text, re.DOTALL | re.MULTILINE)
    assert block, "ARCHITECTURE.md has no fenced block under '## The tree'"
    lines = block.group(1).splitlines()
    assert lines[0].strip() == "monet_ilp/"
    top: set[str] = set()
    entries: dict[str, str] = {}
    parent = current = ""
    for line in lines[1:]:
        indent = len(line) - len(line.lstrip(" "))
        words = line.split()
        if not words:
            continue
        if indent == 2 and words[0].endswith("/"):
            parent = current = words[0].rstrip("/")
            entries[current] = line
        elif indent == 2:
            names = [w for w in words if w.endswith(".py")]
            names = names[: next((i for i, w in enumerate(words) if not w.endswith(".py")), len(words))]
            top.update(names)
            current = ""
        elif indent == 4 and words[0].endswith("/"):
            current = f"{parent}/{words[0].rstrip('/')}"
            entries[current] = line
        elif current:
            entries[current] += "\n" + line
    return top, entries


def _group(text: str, package: str) -> str | None:
    """The parenthesised list after ``package/`` in ``text``, or ``None``."""
    start = re.search(rf"(?<![\w/]){re.escape(package)}/ \(", text)
    if not start:
        return None
    depth, i = 1, start.end()
    while depth and i < len(text):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        i += 1
    return text[start.end(): i - 1]


def _names(text: str, name: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(name)}(\.py)?(?!\w)", text) is not None


def unnamed() -> list[str]:
    top, entries = tree_entries()
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if len(parts) == 1:
            if path.name not in top:
                missing.append(path.name)
            continue
        # The deepest package with an entry of its own; the rest must be named inside it.
        depth = max(d for d in range(1, len(parts)) if "/".join(parts[:d]) in entries or d == 1)
        text = entries.get("/".join(parts[:depth]))
        for package in parts[depth:-1]:
            text = None if text is None else _group(text, package)
        name = parts[-1]
        if text is None or (name != "__init__" and not _names(text, name)):
            missing.append(str(path.relative_to(PACKAGE)))
    return missing


def test_the_tree_names_every_module():
    assert unnamed() == []


def test_the_check_finds_a_module_the_tree_leaves_out():
    top, entries = tree_entries()
    assert "errors.py" in top and "__init__.py" in top
    assert _names(entries["graph"], "zoo") and not _names(entries["graph"], "no_such_module")
    assert _group(entries["problems/p1"], "cpsat") is not None
    assert _names(_group(entries["problems/p1"], "cpsat") or "", "hints")
