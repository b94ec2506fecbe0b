"""The same command builds the same graph in every process.

Python salts string hashes per process (``PYTHONHASHSEED``), so iterating a set of tensor
ids gives another order in each run.  A graph built that way has the same ops with their
inputs in another order: another instance fingerprint, so a schedule solved in one
process is refused by ``monet-ilp evaluate`` in the next, and a solver's model is built
in another order.  Two child processes with different salts must agree.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

SCRIPT = """
import hashlib, json
from monet_ilp.graph import random_layered_literature, zoo
from monet_ilp.hardware.presets import preset
from monet_ilp.make import make_instance
graphs = {name: zoo.build(name) for name in zoo.MODELS}
graphs["random_layered_literature"] = random_layered_literature(60, seed=1)
for name, graph in graphs.items():
    print(name, hashlib.sha256(json.dumps(graph.to_dict(), sort_keys=True).encode()).hexdigest())
inst = make_instance(zoo.build("gpt2_tiny", n_layer=2, batch=1), preset("edge_tpu", n_pe_x=2, n_pe_y=1),
                     problem="P3", objective="latency")
print("instance", inst.fingerprint)
"""


def built_with(salt: str) -> list[str]:
    env = {**os.environ, "PYTHONHASHSEED": salt}
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, check=True)
    return done.stdout.splitlines()


@pytest.mark.slow  # 10-30 s: the slow tier (CI runs it after the default one)
def test_every_zoo_graph_and_an_instance_are_the_same_under_another_hash_salt():
    first, second = built_with("1"), built_with("2")
    assert len(first) > 10 and first[-1].startswith("instance")
    differ = [a.split()[0] for a, b in zip(first, second, strict=True) if a != b]
    assert not differ, f"built differently under another PYTHONHASHSEED: {differ}"
