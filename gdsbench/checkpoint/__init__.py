"""MLPerf Storage's checkpoint workload: its models, DLIO's layout, and a run of it."""

# How each file is written and read: the job options `gdsbench checkpoint` takes (and `gdsbench
# kvcache`, whose entries are whole objects through one engine too), and (less --gpu, which each
# rank's result names) those a checkpoint run records. Here, not in session.py: the command line
# reads it without loading the session's modules.
JOB_OPTIONS = ("mode", "engine", "bs", "qd", "direct", "uncached", "gpu", "gpu_backend", "gpu_memory")
RECORDED_JOB_OPTIONS = tuple(name for name in JOB_OPTIONS if name != "gpu")
