"""Compiled modules, used only while they match their source.

``setup.py`` compiles the modules in :data:`COMPILED` with mypyc when the package is
installed, and records the SHA-256 of each source it compiled
(``monet_ilp/_compiled_from.json``).  Python imports a compiled extension in preference to
the ``.py`` beside it, so :func:`prefer_fresh` (run when the package is imported) puts a
finder first on ``sys.meta_path`` that loads the source instead wherever the compiled
module is missing, was built from other source (an edited or updated checkout of an
editable install), or ``MONET_ILP_PURE_PYTHON`` is set.  :func:`status` says which is
used, and why.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
from importlib.abc import MetaPathFinder
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType

__all__ = ["COMPILED", "prefer_fresh", "status"]

#: The modules ``setup.py`` compiles (the GA's decoder and fast scoring path).
COMPILED = ("monet_ilp.heuristics.decoder", "monet_ilp.heuristics.fast")

_ROOT = Path(__file__).parent
_RECORD = _ROOT / "_compiled_from.json"
_STATUS: dict[str, str] = {}


def _paths(name: str) -> tuple[Path, list[Path]]:
    """The source of module ``name`` and the compiled extensions beside it."""
    base = _ROOT.joinpath(*name.split(".")[1:])
    return base.with_suffix(".py"), [p for s in EXTENSION_SUFFIXES if (p := base.with_name(base.name + s)).exists()]


def _reasons() -> dict[str, str]:
    """Module -> why its source is used instead of a compiled module ('' when compiled is used)."""
    try:
        record = json.loads(_RECORD.read_text())
    except (OSError, ValueError):
        record = {}
    pure = os.environ.get("MONET_ILP_PURE_PYTHON")
    out = {}
    for name in COMPILED:
        source, built = _paths(name)
        key = source.relative_to(_ROOT.parent).as_posix()
        if not built:
            out[name] = "not compiled (pip install with a C compiler compiles it)"
        elif pure:
            out[name] = "MONET_ILP_PURE_PYTHON is set"
        elif record.get(key) != hashlib.sha256(source.read_bytes()).hexdigest():
            out[name] = "the source changed after it was compiled (reinstall to compile it again)"
        else:
            out[name] = ""
    return out


class _SourceFirst(MetaPathFinder):
    """Loads the listed modules from their ``.py`` files."""

    def __init__(self, sources: dict[str, Path]):
        self.sources = sources

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        source = self.sources.get(fullname)
        return None if source is None else importlib.util.spec_from_file_location(fullname, source)


def prefer_fresh() -> None:
    """Load from source every module of :data:`COMPILED` whose compiled form is not current."""
    if _STATUS:
        return
    sources = {}
    for name, reason in _reasons().items():
        _STATUS[name] = "compiled (mypyc)" if not reason else f"source: {reason}"
        if reason and _paths(name)[1]:
            sources[name] = _paths(name)[0]
    if sources:
        sys.meta_path.insert(0, _SourceFirst(sources))


def status() -> dict[str, str]:
    """Module -> ``"compiled (mypyc)"`` or ``"source: <why>"``, as imported in this process."""
    prefer_fresh()
    out = dict(_STATUS)
    for name in COMPILED:  # what was actually imported, where it was
        module = sys.modules.get(name)
        if module is not None and (module.__file__ or "").endswith(".py") and out[name].startswith("compiled"):
            out[name] = "source: imported before the compiled module was checked"
    return out
