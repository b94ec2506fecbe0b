"""Build hook: compile the GA's hot modules with mypyc when it can (pure Python otherwise).

Everything else about the package is in ``pyproject.toml``.  The modules in
``monet_ilp._native.COMPILED`` are compiled to C extensions with mypyc (a build
requirement); each one runs the same code about twice as fast as its source
(``scripts/bench_ga.py``).  The SHA-256 of each compiled source is written to
``monet_ilp/_compiled_from.json``: at import, ``monet_ilp._native`` uses a compiled
module only if its source has not changed since (an editable install whose source was
edited falls back to the source, never to stale code).

Set ``MONET_ILP_PURE_PYTHON=1`` to install without compiling (and, at run time, to use the
sources even where compiled modules exist).  Without a C compiler, or if mypyc fails,
the build goes on in pure Python and says so.
"""

import hashlib
import json
import os
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).parent
# The same list as monet_ilp._native.COMPILED (the package cannot be imported here).
COMPILED = ["monet_ilp/heuristics/decoder.py", "monet_ilp/heuristics/fast.py"]
RECORD = HERE / "monet_ilp" / "_compiled_from.json"


def ext_modules() -> list:
    RECORD.unlink(missing_ok=True)
    if os.environ.get("MONET_ILP_PURE_PYTHON"):
        print("monet-ilp: MONET_ILP_PURE_PYTHON is set: not compiling", flush=True)
        return []
    try:
        from mypyc.build import mypycify

        # Only the compiled modules are type-checked here (the build environment has
        # none of the run-time dependencies); what they import is taken as Any.
        modules = mypycify(["--follow-imports=silent", "--ignore-missing-imports", *COMPILED],
                           opt_level="3", separate=True)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 (any failure of mypyc: install the sources)
        print(f"monet-ilp: mypyc could not compile {COMPILED} ({exc!r}): pure Python", flush=True)
        return []
    for module in modules:  # no C compiler: setuptools warns and installs the sources alone
        module.optional = True
    RECORD.write_text(json.dumps({path: hashlib.sha256((HERE / path).read_bytes()).hexdigest()
                                  for path in COMPILED}, indent=1) + "\n")
    return modules


setup(ext_modules=ext_modules())
