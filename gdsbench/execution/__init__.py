"""Execution: running a job in this process, in local processes or on MPI ranks, natively or through kvikio."""
