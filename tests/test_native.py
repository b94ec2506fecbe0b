"""The compiled modules (setup.py, mypyc) against their sources, and the guard that
never lets a compiled module older than its source run.

When the package was installed with compilation, ``monet_ilp.heuristics.decoder`` and
``monet_ilp.heuristics.fast`` are C extensions; these tests load the ``.py`` sources beside them
as separate modules and require the same decodings and the same metrics on random
decisions.  The guard is checked in fresh interpreters on a copy of the package: an edited
source, and ``MONET_ILP_PURE_PYTHON``, both mean the source is imported.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest

import monet_ilp
from monet_ilp import _native
from monet_ilp.ga.genome import Genome
from monet_ilp.graph import zoo
from monet_ilp.hardware.presets import preset
from monet_ilp.heuristics import decoder as heuristics_decoder
from monet_ilp.heuristics import fast as heuristics_fast
from monet_ilp.make import make_instance

if TYPE_CHECKING:
    from types import ModuleType

PACKAGE = Path(monet_ilp.__file__).parent
COMPILED = _native.status()["monet_ilp.heuristics.decoder"].startswith("compiled")
needs_compiled = pytest.mark.skipif(not COMPILED, reason="the package was installed without compiling")


def _source_twin(module: ModuleType, alias: str) -> ModuleType:
    """The ``.py`` source of ``module``, loaded as a separate module called ``alias``."""
    path = Path(module.__file__ or "")
    spec = importlib.util.spec_from_file_location(alias, path.with_name(path.name.split(".")[0] + ".py"))
    assert spec is not None and spec.loader is not None
    twin = importlib.util.module_from_spec(spec)
    sys.modules[alias] = twin  # dataclasses look their module up while the class is made
    try:
        spec.loader.exec_module(twin)
    finally:
        del sys.modules[alias]
    return twin


def test_status_says_what_was_imported():
    status = _native.status()
    assert set(status) == set(_native.COMPILED)
    for name, module in (("monet_ilp.heuristics.decoder", heuristics_decoder), ("monet_ilp.heuristics.fast", heuristics_fast)):
        compiled = not (module.__file__ or "").endswith(".py")
        assert status[name].startswith("compiled" if compiled else "source: "), status[name]


@needs_compiled
@pytest.mark.parametrize("case", ["resnet18_2x2_pins", "resnet18_P2", "mlp4_hetero_quad"])
def test_compiled_decoder_and_fast_path_equal_their_sources(case):
    instance = {
        "resnet18_2x2_pins": lambda: make_instance(zoo.resnet18(batch=1), preset("edge_tpu", n_pe_x=2, n_pe_y=2),
                                                   problem="P3", objective="latency", sram_budget=3 * 2**20),
        "resnet18_P2": lambda: make_instance(zoo.resnet18(batch=1), preset("edge_tpu", n_pe_x=1, n_pe_y=1),
                                             problem="P2", objective="energy", budget=0.5),
        "mlp4_hetero_quad": lambda: make_instance(zoo.mlp(depth=4), preset("hetero_quad"), problem="P3",
                                                  objective="energy"),
    }[case]()
    source_decoder = _source_twin(heuristics_decoder, "monet_ilp_source_decoder")
    source_fast = _source_twin(heuristics_fast, "monet_ilp_source_fast")
    genome = Genome(instance)
    rng = np.random.default_rng(7)
    for _ in range(150):
        policy, cores, pins = genome.split(rng.integers(genome.lower, genome.upper + 1))
        compiled = heuristics_decoder.decode_raw(instance, policy, cores, pins)
        source = source_decoder.decode_raw(instance, policy, cores, pins)
        assert tuple(compiled) == tuple(source)
        a, b = heuristics_fast.fast_metrics(instance, compiled), source_fast.fast_metrics(instance, source)
        assert (a.latency_cycles, a.energy, dict(a.peak_bytes), dict(a.violation_counts), a.objective_value) == (
            b.latency_cycles, b.energy, dict(b.peak_bytes), dict(b.violation_counts), b.objective_value)


def _imported_from(root: Path, **env: str) -> str:
    """Where a fresh interpreter with ``root`` first on its path imports the decoder from."""
    code = "import monet_ilp.heuristics.decoder as d, monet_ilp._native as n; print(d.__file__)"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(root), **env}, cwd=root)
    return run.stdout.strip()


@needs_compiled
def test_an_edited_source_is_imported_instead_of_its_compiled_module(tmp_path):
    copy = tmp_path / "monet_ilp"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert _imported_from(tmp_path).endswith(".so")
    assert _imported_from(tmp_path, MONET_ILP_PURE_PYTHON="1").endswith("decoder.py")
    source = copy / "heuristics" / "decoder.py"
    source.write_text(source.read_text() + "\n# edited after the build\n")
    assert _imported_from(tmp_path).endswith("decoder.py")
