"""Build every zoo training graph at both granularities; print a table and write JSON.

Reports ops and tensors, forward layers, MACs, saved bytes, the store-all peak, and
the wall time of building (ONNX construction + import), e.g. for GPT-2 small.

    python scripts/bench_graphs.py --out bench_graphs.json
"""

from __future__ import annotations

import argparse
import json
import time

from rich.console import Console
from rich.table import Table

from monet_ilp.graph import from_onnx, summarize, zoo

MODELS = [
    ("mlp", {}),
    ("resnet18", {"variant": "cifar"}),
    ("resnet18", {"variant": "imagenet"}),
    ("vgg16", {}),
    ("mobilenet_v2", {}),
    ("gpt2", {"preset": "tiny"}),
    ("gpt2", {"preset": "small"}),
]


def measure(name: str, params: dict, granularity: str, optimizer: str) -> dict:
    start = time.perf_counter()
    model = zoo.onnx_model(name, **params)
    built = time.perf_counter()
    graph = from_onnx(model, granularity=granularity, optimizer=optimizer, name=name)
    imported = time.perf_counter()
    s = summarize(graph)
    return {
        "model": name + "".join(f" {k}={v}" for k, v in params.items()),
        "granularity": granularity,
        "optimizer": optimizer,
        "ops": len(graph.ops),
        "ops_by_kind": s.ops_by_kind,
        "tensors": s.tensors,
        "layers": s.layers,
        "forward_macs": s.forward_macs,
        "backward_macs": s.backward_macs,
        "saved_bytes": s.saved_bytes,
        "weight_bytes": s.weight_bytes,
        "store_all_peak_bytes": s.store_all_peak.total_bytes,
        "onnx_build_s": round(built - start, 3),
        "import_s": round(imported - built, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="bench_graphs.json")
    parser.add_argument("--optimizer", default="adam")
    args = parser.parse_args()
    rows = [measure(n, p, g, args.optimizer) for n, p in MODELS for g in ("layer", "op")]
    table = Table(title=f"zoo training graphs (optimizer={args.optimizer})")
    for col in ("model", "gran.", "ops", "tensors", "layers", "fwd GMACs", "saved MiB", "peak MiB",
                "onnx s", "import s"):
        table.add_column(col, justify="left" if col in ("model", "gran.") else "right")
    for r in rows:
        table.add_row(r["model"], r["granularity"], str(r["ops"]), str(r["tensors"]), str(r["layers"]),
                      f"{r['forward_macs'] / 1e9:.3f}", f"{r['saved_bytes'] / 2**20:.1f}",
                      f"{r['store_all_peak_bytes'] / 2**20:.1f}", f"{r['onnx_build_s']:.2f}",
                      f"{r['import_s']:.2f}")
    Console(width=140).print(table)
    with open(args.out, "w") as f:
        json.dump(rows, f, indent=1)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
