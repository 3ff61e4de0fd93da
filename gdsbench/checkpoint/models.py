"""The models MLPerf Storage v2.0 checkpoints, and the files each rank of one
writes, as DLIO lays them out (dlio_benchmark's checkpointing/
base_checkpointing.py on its mlperf_storage_v2.0 branch, commit 295c1c7, which
mlcommons/storage v2.0 runs; the dimensions are its configs/dlio/workload/
llama3_*.yaml).

A transformer of L layers, hidden size h, feed-forward size f, vocabulary V,
a heads of which kv carry keys and values (d_kv = (h // a) kv, floored as
DLIO floors it: llama3-1t's 25872 / 192 is not whole) has

    P = 2 V h + L (2 h + h (h + 2 d_kv) + h^2 + 3 h f) + h   parameters.

Ranks are TP x PP x DP; rank r has tp = r % TP, pp = (r // TP) % PP, mp = r %
(TP PP), dp = r // (TP PP). Pipeline stage pp holds a contiguous share of the
layers, the first stage the embedding (layer 0) as well, the last the output
head (L + 1) and the final norm (L + 2). The model is fp16: each layer's
tensors split over TP (the norms are not), and with ZeRO-3 over DP as well.
The optimizer is fp32: 3 values per parameter of the rank's share, P / (DP TP
PP), plus 3 x 5 h. Files, in the folder global_epoch1_step{k}/ of checkpoint k:

    ZeRO-3 (PP = 1)        every rank:  zero_pp_rank_{dp}_mp_rank_{mp}_model_states.pt
    ZeRO-1/2, PP > 1       dp = 0 only: layer_{i}-model_{mp}_model_states.pt, each layer of its stage
    ZeRO-1/2, PP = 1       dp = 0 only: model_{mp}_model_states.pt
    every rank:                         zero_pp_rank_{dp}_mp_rank_{mp}_optim_states.pt

gdsbench writes each file's raw tensor bytes (torch.save adds a few KiB of zip
framing), rounded up to whole 4 KiB pattern blocks.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from gdsbench.job import tomlfile
from gdsbench.job.errors import UsageError

BLOCK = 4096


@dataclass(frozen=True)
class Model:
    name: str
    layers: int
    hidden: int
    ffn_hidden: int
    heads: int
    kv_heads: int
    vocab: int
    tp: int  # tensor parallel
    pp: int  # pipeline parallel
    dp: int  # data parallel: ranks = tp x pp x dp
    zero_stage: int
    model_bytes_per_value: int = 2  # fp16
    optimizer_bytes_per_value: int = 4  # fp32

    @property
    def ranks(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def parameters(self) -> int:
        h, f, v = self.hidden, self.ffn_hidden, self.vocab
        d_kv = h // self.heads * self.kv_heads
        return 2 * v * h + self.layers * (2 * h + h * (h + 2 * d_kv) + h * h + 3 * h * f) + h

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# mlcommons/storage v2.0, configs/dlio/workload/llama3_*.yaml, and Submission_guidelines.md's table 2
BUILT_IN = {m.name: m for m in (
    Model("llama3-8b", layers=32, hidden=4096, ffn_hidden=14336, heads=32, kv_heads=8, vocab=128256, tp=1, pp=1, dp=8,
          zero_stage=3),
    Model("llama3-70b", layers=80, hidden=8192, ffn_hidden=28672, heads=128, kv_heads=8, vocab=128256, tp=8, pp=1, dp=8,
          zero_stage=3),
    Model("llama3-405b", layers=126, hidden=16384, ffn_hidden=53248, heads=128, kv_heads=8, vocab=128256, tp=8, pp=32,
          dp=2, zero_stage=1),
    Model("llama3-1t", layers=128, hidden=25872, ffn_hidden=98304, heads=192, kv_heads=32, vocab=128256, tp=8, pp=64,
          dp=2, zero_stage=1),
)}
FIELDS = tuple(f.name for f in dataclasses.fields(Model) if f.name != "name")


@dataclass(frozen=True)
class CheckpointFile:
    name: str  # inside the checkpoint's folder
    tensor_bytes: int  # its tensors' bytes, as DLIO counts them

    @property
    def size(self) -> int:
        """What gdsbench writes: the tensor bytes in whole 4 KiB pattern blocks (at least one)."""
        return max(BLOCK, -(-self.tensor_bytes // BLOCK) * BLOCK)


def load(name: str, overrides: dict | None = None) -> Model:
    """A built-in model by name, or one a TOML file describes ([model] with every field), with
    overrides (layers, vocab, dp, ...) applied and checked as DLIO checks them."""
    if name in BUILT_IN:
        model = BUILT_IN[name]
    elif name.endswith(".toml"):
        section = tomlfile.read(name, "--model")[0].get("model")
        if not isinstance(section, dict):
            raise UsageError(f"--model {name}: no [model] table; give name and {', '.join(FIELDS)}")
        missing = [f for f in ("name", *FIELDS[:11]) if f not in section]
        unknown = sorted(set(section) - {"name", *FIELDS})
        if missing or unknown:
            raise UsageError(f"--model {name}: [model] " + (f"lacks {', '.join(missing)}" if missing else
                                                             f"has unknown keys {', '.join(unknown)}"))
        model = Model(**section)
    else:
        raise UsageError(f"--model {name}: unknown; choose one of {', '.join(BUILT_IN)}, a FILE.toml, or a DLIO "
                         "checkpoint workload FILE.yaml")
    return shaped(model, overrides)


def shaped(model: Model, overrides: dict | None = None) -> Model:
    """The model with overrides (layers, vocab, dp, ...) applied, checked as DLIO checks it."""
    model = dataclasses.replace(model, **(overrides or {}))
    check(model)
    return model


def check(m: Model) -> None:
    """UsageError for a model DLIO would refuse, or one that cannot be laid out."""
    for f in FIELDS:
        if not isinstance(getattr(m, f), int) or isinstance(getattr(m, f), bool) or getattr(m, f) < (0 if f == "layers"
                                                                                                   else 1):
            raise UsageError(f"model {m.name}: {f} {getattr(m, f)!r} must be a positive whole number")
    if m.zero_stage not in (1, 2, 3):
        raise UsageError(f"model {m.name}: zero_stage {m.zero_stage}: DLIO emulates ZeRO stages 1, 2 and 3")
    if m.layers < m.pp:
        raise UsageError(f"model {m.name}: {m.layers} layers over {m.pp} pipeline stages: at least one layer per stage")
    if m.pp > 1 and m.zero_stage == 3:
        raise UsageError(f"model {m.name}: ZeRO-3 with pipeline parallelism ({m.pp}) is refused, as DLIO refuses it")


def stage_layers(m: Model, stage: int) -> range:
    """The layer numbers pipeline stage `stage` holds (0: embedding; L + 1, L + 2: head and norm)."""
    share, extra = divmod(m.layers, m.pp)
    first = stage * (share + 1) + 1 if stage < extra else extra * (share + 1) + (stage - extra) * share + 1
    last = first + share if stage < extra else first + share - 1
    return range(0 if stage == 0 else first, (m.layers + 2 if stage == m.pp - 1 else last) + 1)


def layer_values(m: Model, layer: int) -> int:
    """fp16 values of one layer on one rank: split over TP (the norms are not), and over DP with ZeRO-3."""
    h, split = m.hidden, m.dp if m.zero_stage == 3 else 1
    if layer in (0, m.layers + 1):  # embedding, output head
        return h * m.vocab // m.tp // split
    if layer == m.layers + 2:  # final norm
        return h // split
    d_kv = h // m.heads * m.kv_heads
    return (2 * (h // split) + h * (h + 2 * d_kv) // m.tp // split + h * h // m.tp // split
            + 2 * h * m.ffn_hidden // m.tp // split + h * m.ffn_hidden // m.tp // split)


def rank_files(m: Model, rank: int, scale: float = 1.0) -> list[CheckpointFile]:
    """The files rank `rank` writes in one checkpoint; `scale` shrinks every tensor's bytes."""
    mp_ranks = m.tp * m.pp
    stage, mp, dp = (rank // m.tp) % m.pp, rank % mp_ranks, rank // mp_ranks
    layers = stage_layers(m, stage)
    model_bytes = {i: layer_values(m, i) * m.model_bytes_per_value for i in layers}
    files = []
    if m.zero_stage == 3:
        files.append((f"zero_pp_rank_{dp}_mp_rank_{mp}_model_states.pt", sum(model_bytes.values())))
    elif dp == 0 and m.pp > 1:
        files += [(f"layer_{i}-model_{mp}_model_states.pt", b) for i, b in model_bytes.items()]
    elif dp == 0:
        files.append((f"model_{mp}_model_states.pt", sum(model_bytes.values())))
    share = m.parameters // (m.dp * mp_ranks)
    files.append((f"zero_pp_rank_{dp}_mp_rank_{mp}_optim_states.pt", 3 * (share + 5 * m.hidden) * m.optimizer_bytes_per_value))
    return [CheckpointFile(name, math.ceil(b * scale)) for name, b in files]


def layout(m: Model, scale: float = 1.0) -> list[list[CheckpointFile]]:
    """Every rank's files in one checkpoint, rank by rank."""
    return [rank_files(m, r, scale) for r in range(m.ranks)]


def folder(checkpoint: int) -> str:
    """Checkpoint k's folder, as DLIO names the k-th of a run's checkpoints."""
    return f"global_epoch1_step{checkpoint}"
