"""A P4 plan in the ecosystem's formats (``formulations/p4_problem.md`` P4.E).

:func:`megatron_args` gives the Megatron-LM command-line arguments of a plan (the
degrees, micro and global batch, sequence parallelism, recomputation, the distributed
optimizer, uneven end stages, the rank order and the model's shape); :func:`torchtitan_toml`
the ``[training]``, ``[parallelism]`` and ``[activation_checkpoint]`` sections of a
torchtitan job file (its TOML keys as of v0.2.2, before torchtitan moved its
configuration to Python).  Where the tool cannot say exactly what the plan does, the
emitted setting errs towards less memory and the difference is returned as a note;
where it cannot say it at all, :class:`MonetError` names the field and the fix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from monet_ilp.errors import MonetError

if TYPE_CHECKING:
    from monet_ilp.problems.p4.model import TransformerConfig
    from monet_ilp.problems.p4.plan import Plan

__all__ = ["EMITTERS", "Emitted", "megatron_args", "torchtitan_toml"]


@dataclass(frozen=True)
class Emitted:
    """The emitted text, and what it does differently from the plan."""

    text: str
    notes: tuple[str, ...]


def _per_stage(plan: Plan, option: str) -> list[int]:
    return [sum(plan.recompute[i] == option for i in layers) for layers in plan.stage_layers()]


def _refuse_offload(plan: Plan, tool: str, fix: str) -> None:
    if "offload" in plan.recompute:
        raise MonetError(f"the plan offloads activations of {plan.recompute.count('offload')} layers, which {tool} "
                         "cannot express with pipeline stages or recomputation", field="recompute", fix=fix)


def megatron_args(plan: Plan, model: TransformerConfig) -> Emitted:
    """P4.E1: Megatron-LM's arguments for ``plan`` (``pretrain_gpt.py``)."""
    notes: list[str] = []
    args: list[str] = [
        f"--tensor-model-parallel-size {plan.tensor}",
        f"--pipeline-model-parallel-size {plan.pipeline}",
        "--context-parallel-size 1",
        f"--micro-batch-size {plan.micro_batch}",
        f"--global-batch-size {plan.global_batch}",
    ]
    if plan.sequence_parallel:
        args.append("--sequence-parallel")
    if plan.placement == "tpd":  # tensor, then pipeline, then data (Megatron's default: tensor, data, pipeline)
        args.append("--use-tp-pp-dp-mapping")
    if plan.pipeline > 1 and plan.schedule != "1f1b":
        raise MonetError(f"the plan runs {plan.schedule}; Megatron-LM pipelines run 1F1B", field="schedule",
                         fix="emit torchtitan (it runs GPipe), or plan 1F1B only")
    stages = list(plan.stages)
    if plan.pipeline > 1 and len(set(stages)) > 1:
        inner = stages[1:-1]
        if len(set(inner)) > 1 or (inner and (model.layers - stages[0] - stages[-1]) % len(inner)):
            raise MonetError(f"stages {stages}: Megatron-LM takes uneven first and last stages only",
                             field="stages", fix="emit torchtitan (one module list per stage)")
        middle = inner[0] if inner else None
        if middle is None or stages[0] != middle:
            args.append(f"--decoder-first-pipeline-num-layers {stages[0]}")
        if middle is None or stages[-1] != middle:
            args.append(f"--decoder-last-pipeline-num-layers {stages[-1]}")
    _refuse_offload(plan, "Megatron-LM", "plan without offload (its --cpu-offloading-num-layers takes no pipeline "
                                          "and no recomputation)")
    full, selective = _per_stage(plan, "full"), _per_stage(plan, "selective")
    if any(full):
        if all(r == "full" for r in plan.recompute):
            args += ["--recompute-granularity full", "--recompute-method uniform", "--recompute-num-layers 1"]
        else:
            # the first N layers of every stage; a stage's selective layers are recomputed in full too
            heavy = [f + s for f, s in zip(full, selective, strict=True)]
            most = max(heavy)
            args += ["--recompute-granularity full", "--recompute-method block", f"--recompute-num-layers {most}"]
            if any(selective):
                notes.append(f"{sum(selective)} layers recompute selectively in the plan; Megatron-LM takes one "
                             "granularity, so they recompute in full here (more recomputation, less memory)")
            if len(set(heavy)) > 1:
                notes.append(f"full recomputation of {heavy} layers per stage: Megatron-LM recomputes the first "
                             f"{most} of every stage (more recomputation, less memory than the plan)")
    elif any(selective):
        args.append("--recompute-granularity selective")
        if sum(selective) < model.layers:
            notes.append(f"the plan recomputes {sum(selective)} of {model.layers} layers selectively; Megatron-LM "
                         "recomputes the attention core of every layer (more recomputation, less memory)")
    if plan.zero >= 2:
        # Megatron-LM's distributed optimizer shards the fp32 main weights and Adam's
        # moments (ZeRO-1); its gradient buffer stays whole on every rank.
        raise MonetError(f"the plan shards the gradients{' and the weights' if plan.zero >= 3 else ''} "
                         f"(ZeRO-{plan.zero}); Megatron-LM's distributed optimizer shards the optimizer state only",
                         field="zero", fix="plan with --zero 0,1 for Megatron-LM, or emit torchtitan (FSDP)")
    if plan.zero == 1:
        args.append("--use-distributed-optimizer")
    kv = model.kv
    args += [f"--num-layers {model.layers}", f"--hidden-size {model.hidden}", f"--ffn-hidden-size {model.ffn}",
             f"--num-attention-heads {model.heads}"]
    if kv != model.heads:
        args += ["--group-query-attention", f"--num-query-groups {kv}"]
    args += [f"--seq-length {model.seq}", f"--max-position-embeddings {model.seq}"]
    if model.gated:
        args += ["--swiglu", "--normalization RMSNorm", "--disable-bias-linear"]
    args.append("--position-embedding-type " + ("learned_absolute" if model.learned_positions else "rope"))
    if not model.tied:
        args.append("--untie-embeddings-and-output-weights")
    if not model.dropout:
        args += ["--attention-dropout 0", "--hidden-dropout 0"]
    args.append("--bf16")
    head = (f"# {model.name}: {plan.devices} GPUs = tensor {plan.tensor} x pipeline {plan.pipeline} x data "
            f"{plan.data} (Megatron-LM derives data-parallel {plan.data} from the world size)")
    return Emitted(head + "\n" + " \\\n".join(args) + "\n", tuple(notes))


def torchtitan_toml(plan: Plan, model: TransformerConfig) -> Emitted:
    """P4.E2: torchtitan's ``[training]``, ``[parallelism]`` and ``[activation_checkpoint]``."""
    notes: list[str] = []
    _refuse_offload(plan, "torchtitan", "plan without offload (torchtitan offloads FSDP state, not activations)")
    training = [f"seq_len = {model.seq}", f"global_batch_size = {plan.global_batch}"]
    parallel = [f"tensor_parallel_degree = {plan.tensor}", f"pipeline_parallel_degree = {plan.pipeline}",
                "context_parallel_degree = 1"]
    if plan.pipeline > 1:
        # the micro-batches of a step go through the pipeline: local batch = b x m
        training.insert(0, f"local_batch_size = {plan.micro_batch * plan.micro_batches}")
        parallel += [f"pipeline_parallel_microbatch_size = {plan.micro_batch}",
                     'pipeline_parallel_schedule = "' + {"1f1b": "1F1B", "gpipe": "GPipe"}[plan.schedule] + '"']
        if len(set(plan.stages)) == 1:
            parallel.append(f"pipeline_parallel_layers_per_stage = {plan.stages[0]}")
        else:
            parts = []
            for s, layers in enumerate(plan.stage_layers()):
                names = (["tok_embeddings"] if s == 0 else []) + [f"layers.{i}" for i in layers] + (
                    ["norm", "output"] if s == plan.pipeline - 1 else [])
                parts.append("[" + ", ".join(f'"{n}"' for n in names) + "]")
            parallel.append("module_fqns_per_model_part = [" + ", ".join(parts) + "]")
    else:  # no pipeline: the micro-batches are gradient accumulation steps
        training.insert(0, f"local_batch_size = {plan.micro_batch}")
    if plan.zero == 0:
        parallel += [f"data_parallel_replicate_degree = {plan.data}", "data_parallel_shard_degree = 1"]
    else:
        parallel += ["data_parallel_replicate_degree = 1", f"data_parallel_shard_degree = {plan.data}",
                     'fsdp_reshard_after_forward = "' + ("always" if plan.zero >= 3 else "never") + '"']
        if plan.zero == 1:
            notes.append("ZeRO-1 in the plan; FSDP shards the gradients too (ZeRO-2: less memory, the same traffic)")
    if plan.tensor > 1 and not plan.sequence_parallel:
        notes.append("torchtitan's tensor parallelism splits the norms along the sequence as well (sequence "
                     "parallelism: less memory than the plan)")
    options = set(plan.recompute)
    if options == {"none"}:
        ac = ['mode = "none"']
    elif options == {"full"}:
        ac = ['mode = "full"']
    elif options <= {"none", "selective"}:
        ac = ['mode = "selective"', 'selective_ac_option = "op"']
        notes.append("selective recomputation is torchtitan's op-level policy on every layer (the plan: "
                     f"{plan.recompute.count('selective')} of {model.layers} layers, the attention core)")
    else:  # full on some layers: every N-th layer in full, the plan's selective ones counted as full
        heavy = [i for i, r in enumerate(plan.recompute) if r != "none"]
        every = next((n for n in range(1, model.layers + 1)
                      if [i for i in range(model.layers) if (i + 1) % n == 0] == heavy), None)
        if every is None:
            every = max(1, model.layers // len(heavy))  # at least as many layers as the plan's
            notes.append(f"the plan recomputes {len(heavy)} layers ({plan.recompute_runs()}); torchtitan "
                         f"recomputes every {every}-th layer in full ({model.layers // every} layers: more "
                         "recomputation, and per stage it may differ)")
        elif "selective" in options:
            notes.append("the plan's selective layers recompute in full here: torchtitan takes one policy")
        ac = ['mode = "selective"', f'selective_ac_option = "{every}"']
    text = ("# " + f"{model.name}: {plan.devices} GPUs = tensor {plan.tensor} x pipeline {plan.pipeline} x data "
            f"{plan.data}\n[training]\n" + "\n".join(training) + "\n\n[parallelism]\n" + "\n".join(parallel)
            + "\n\n[activation_checkpoint]\n" + "\n".join(ac) + "\n")
    return Emitted(text, tuple(notes))


EMITTERS = {"megatron": megatron_args, "torchtitan": torchtitan_toml}
