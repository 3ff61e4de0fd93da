"""--mode kvikio's reader for `gdsbench train`."""

from __future__ import annotations

import time

import numpy as np

from gdsbench import _native
from gdsbench.execution.kvikio_mode.files import open_for_reading
from gdsbench.execution.kvikio_mode.settings import configure, configure_remote, import_kvikio, modules
from gdsbench.job.errors import IoFailure
from gdsbench.job.spec import JobSpec
from gdsbench.system.pattern import bad_blocks
from gdsbench.system.targets import protocol_of


class SampleReader:
    """--mode kvikio in `gdsbench train`: the native SampleReader's interface,
    reading each sample whole with one CuFile.pread into a cupy buffer on this
    accelerator's GPU; kvikio splits it into --kvikio-task-size tasks on its
    thread pool, as a RAPIDS data loader would. A sample is one latency sample
    (pread to its future returning). Verification checks the blocks on the GPU."""

    def __init__(self, spec: JobSpec, gpu: int):
        self.cupy, self.kvikio = import_kvikio()
        configure(modules()[0], spec)  # kvikio's settings are global: the same for every reader
        if protocol_of(spec.path) is not None:
            configure_remote(self.kvikio, modules()[0], spec)
        self.spec, self.gpu = spec, gpu
        self.files: dict[str, object] = {}  # path -> kvikio.CuFile, opened on first read
        self.buffer = None  # grown to the largest sample read so far
        self.latency = _native.LatencyHistogram()
        self.verified_blocks = 0
        self._bad: set[tuple[str, int]] = set()  # distinct bad blocks: read again, counted once
        self.first_mismatch_path: str | None = None
        self.first_mismatch_offset = 0

    @property
    def verify_mismatches(self) -> int:
        return len(self._bad)

    def read(self, path: str, offset: int, length: int) -> tuple[int, int, int]:
        """Read one sample: (bytes, 1, ns from pread() to its future returning)."""
        with self.cupy.cuda.Device(self.gpu):
            if self.buffer is None or self.buffer.size < length:
                self.buffer = self.cupy.empty(length, dtype=self.cupy.uint8)
            handle = self.files.get(path)
            if handle is None:
                handle = self.files[path] = open_for_reading(self.kvikio, path)
            started = time.monotonic_ns()
            try:
                got = handle.pread(self.buffer, length, offset).get()
            except RuntimeError as e:
                raise IoFailure(f"kvikio read of {length} bytes at offset {offset} of {path}: {e}") from None
            took = time.monotonic_ns() - started
            if got != length:
                raise IoFailure(f"short read: kvikio read {got} of {length} bytes at offset {offset} of {path}")
            if self.spec.verify:
                bad = bad_blocks(self.cupy, self.buffer[:length], offset)
                self.verified_blocks += length // _native.PATTERN_BLOCK
                if bad and self.first_mismatch_path is None:
                    self.first_mismatch_path, self.first_mismatch_offset = path, min(bad)
                self._bad.update((path, b) for b in bad)
        self.latency.add(np.asarray([took], dtype=np.uint64))
        return got, 1, took


