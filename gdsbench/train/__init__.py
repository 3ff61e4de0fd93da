"""`gdsbench train` and `gdsbench predict`: will this storage keep my GPUs busy?

    workloads.py     what a training job reads: a built-in workload (DLIO's H100 configs), a TOML file or a DLIO YAML
    formats.py       every dataset format: how its samples lie in files, which loader's rule reads them
    dataset.py       a file set in a workload's shape (prepare --workload), and how samples are dealt to accelerators
    pipeline.py      one emulated accelerator: read threads, prefetch, compute as sleep, the step barrier
    accelerators.py  N of them: processes held by a shared-memory barrier, or MPI ranks
    metrics.py       AU as DLIO computes it, throughput, step and wait times, the cost of stragglers
    session.py       a train run: one emulation per accelerator count, saved as a run folder
    predict.py       the answer in minutes: a short probe of the storage and a model of the pipeline
"""

# The job options a train or predict run's readers take from the command line (their --bs is the workload's
# transfer size; the rest of a run is the workload's, or the emulation's own): one list for the parser, which
# must not import the session and with it the results store, and for the record the session writes
READER_OPTIONS = ("mode", "engine", "qd", "direct", "uncached", "verify", "gpu", "gpu_backend", "gds_register", "http2",
                  "timeout_ns", "retries")
