"""The system under the job: targets and their storage, the page cache, GPUs, the host, pattern files."""
