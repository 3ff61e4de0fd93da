"""`gdsbench kvcache`: MLPerf Storage v3.0's KV-cache offload workload (mlcommons/storage's
kv_cache_benchmark), emulated: LLM inference users whose KV cache spills from memory to
storage, prefill writing each request's KV entry and decode reading it back, the storage
tier read and written through gdsbench's engines.

models.py (KV bytes per token), workload.py (users and their requests, seeded),
tiers.py (budgets and LRU spill, pure bookkeeping), session.py (the run)."""
