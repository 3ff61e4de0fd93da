"""The models whose KV cache the emulation stores, as the reference defines them
(mlcommons/storage kv_cache_benchmark/kv-cache.py, MODEL_CONFIGS). A token's
KV entry holds a key and a value per layer and KV head:

    bytes per token = layers x KV heads x head dimension x 2 (K and V) x bytes per element

with head dimension = hidden size / attention heads (llama3.1-8b: 32 x 8 x 128
x 2 x 2 = 128 KiB)."""

from __future__ import annotations

from dataclasses import dataclass

from gdsbench.job.errors import UsageError

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "int8": 1}


@dataclass(frozen=True)
class KVModel:
    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int  # grouped-query attention: fewer than heads
    dtype: str = "float16"

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def bytes_per_token(self) -> int:
        return self.layers * self.kv_heads * self.head_dim * 2 * DTYPE_BYTES[self.dtype]

    def to_dict(self) -> dict:
        return {"name": self.name, "layers": self.layers, "hidden": self.hidden, "heads": self.heads,
                "kv_heads": self.kv_heads, "dtype": self.dtype, "kv_bytes_per_token": self.bytes_per_token}


BUILT_IN = {m.name: m for m in (
    KVModel("tiny-1b", layers=12, hidden=1024, heads=8, kv_heads=4),
    KVModel("mistral-7b", layers=32, hidden=4096, heads=32, kv_heads=8),
    KVModel("llama2-7b", layers=32, hidden=4096, heads=32, kv_heads=32),
    KVModel("llama3.1-8b", layers=32, hidden=4096, heads=32, kv_heads=8),
    KVModel("llama3.1-70b-instruct", layers=80, hidden=8192, heads=64, kv_heads=8),
)}


def model_named(name: str) -> KVModel:
    try:
        return BUILT_IN[name]
    except KeyError:
        raise UsageError(f"--model {name}: not a model the KV-cache workload knows; use one of "
                         f"{', '.join(BUILT_IN)}") from None
