"""One emulated accelerator: the input pipeline of a data-parallel training
job, with compute replaced by sleep, as DLIO runs it. Each DLIO reader is
emulated as DLIO runs it:

  npz (PyTorch's DataLoader, Loader below)
    read threads   each takes whole batches, round-robin (batch b goes to
                   thread b mod R), and reads their samples one after another
                   with its own native SampleReader: whole, in transfer-size
                   chunks, into host or GPU memory
    prefetch       at most read_threads x ceil(prefetch / read_threads)
                   batches are asked for ahead of the accelerator (PyTorch's
                   DataLoader, as DLIO configures it)
  tfrecord (tf.data, StreamLoader below)
    streams        R streams read the rank's files whole and in order, a
                   chunk at a time, records interleaved round-robin into
                   batches; reading runs ahead by prefetch + 1 batches
  parquet (v3.0 DLIO's row-group reader, RowGroupLoader below)
    workers        R workers each read every R-th file's footer, then those
                   files' row groups, up to 64 at once (a reader each) and
                   64 past the one needed at most; a worker cuts a batch
                   whenever `batch` rows have landed in order

    step           wait for the next batch, sleep the compute time, then wait
                   at the step barrier for every other accelerator

Every time is taken on the monotonic clock: the step's start (the previous
barrier's release), the batch's arrival, the end of compute, and the release.
"""

from __future__ import annotations

import math
import os
import queue
import threading
import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from gdsbench import _native
from gdsbench.job.errors import GdsbenchError, IoFailure
from gdsbench.train import parquet
from gdsbench.train.dataset import Dataset, shard, steps_per_epoch
from gdsbench.train.workloads import Workload

READ_JOIN_S = 2.0  # how long an ending epoch waits for each read thread
TORCH_PREFETCH = 2  # batches PyTorch's DataLoader asks of each worker ahead (its default prefetch_factor)


def _hand_over(loader, error: BaseException) -> None:
    """A reader thread's failure, for the accelerator waiting on the loader to raise (_raise_handed)."""
    with loader.cond:
        loader.error = error
        loader.cond.notify_all()


def _stop_threads(loader) -> None:
    """End a loader's reading: its threads told to stop and woken, each waited for READ_JOIN_S at most
    (a read that never returns, on a dead mount, must not hold the run: they are daemon threads)."""
    loader.stop.set()
    with loader.cond:
        loader.cond.notify_all()
    for t in loader.threads:
        t.join(timeout=READ_JOIN_S)


def _raise_handed(error: BaseException):
    """In the accelerator's thread: a reader's failure as gdsbench reports it (a storage failure unless it says more)."""
    raise error if isinstance(error, GdsbenchError) else IoFailure(str(error))


@dataclass
class EpochRecord:
    """One accelerator's epoch, step by step (ns on the monotonic clock)."""

    start_ns: int
    end_ns: int  # after the last step's barrier
    step_start_ns: np.ndarray  # previous barrier's release (the epoch's start for step 0)
    loaded_ns: np.ndarray  # the batch was there
    computed_ns: np.ndarray  # compute (sleep) over
    released_ns: np.ndarray  # every accelerator had finished the step
    compute_s: np.ndarray  # the compute time asked for, per step (what AU counts, as DLIO)
    barrier_wait_ns: np.ndarray  # how long this accelerator waited at the barrier
    batch_bytes: np.ndarray

    def to_dict(self) -> dict:
        return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in vars(self).items()}

    @classmethod
    def from_dict(cls, d: dict) -> EpochRecord:
        arrays = {k: np.asarray(v) for k, v in d.items() if isinstance(v, list)}
        return cls(start_ns=d["start_ns"], end_ns=d["end_ns"], **arrays)


@dataclass
class AcceleratorRecord:
    rank: int
    host: str
    epochs: list[EpochRecord] = field(default_factory=list)
    bytes_read: int = 0
    samples_read: int = 0
    latency: object = None  # _native.LatencyHistogram: every chunk, issue to landing
    verified_blocks: int = 0
    verify_mismatches: int = 0
    first_mismatch: str | None = None  # "path at offset N"
    cpu_s: float = 0.0  # this process, the whole run
    cached_fraction: float | None = None
    # its host's, taken where it ran (DLIO's summary.json lists them per host)
    host_cpus: int = field(default_factory=lambda: os.cpu_count() or 0)
    host_memory_bytes: int = field(default_factory=lambda: os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


class Loader:
    """The batches of one epoch, read ahead by the read threads."""

    def __init__(self, readers: list, dataset: Dataset, batches: list[np.ndarray], in_flight: int, stop: threading.Event):
        self.readers, self.dataset, self.batches, self.in_flight = readers, dataset, batches, in_flight
        self.stop = stop
        self.queues = [queue.SimpleQueue() for _ in readers]
        self.ready: dict[int, int] = {}  # batch -> bytes read
        self.cond = threading.Condition()
        self.error: BaseException | None = None
        self.bytes = self.samples = 0
        self.threads = [threading.Thread(target=self._read, args=(w,), daemon=True) for w in range(len(readers))]
        for t in self.threads:
            t.start()
        for b in range(min(in_flight, len(batches))):
            self._ask(b)

    def _ask(self, b: int) -> None:
        self.queues[b % len(self.readers)].put(b)

    def _read(self, w: int) -> None:
        reader = self.readers[w]
        while True:
            b = self.queues[w].get()
            if b is None or self.stop.is_set():
                return
            try:
                total = 0
                for i in self.batches[b]:
                    path, offset, length = self.dataset.sample(int(i))
                    total += reader.read(path, offset, length)[0]
            except BaseException as e:  # noqa: BLE001 - handed to the accelerator, which raises it
                _hand_over(self, e)
                return
            with self.cond:
                self.ready[b] = total
                self.bytes += total
                self.samples += len(self.batches[b])
                self.cond.notify_all()

    def take(self, b: int) -> int:
        """Wait for batch b; ask for the one `in_flight` batches after it. Its bytes."""
        with self.cond:
            while b not in self.ready and self.error is None and not self.stop.is_set():
                self.cond.wait(0.1)
            if self.error is not None:
                _raise_handed(self.error)
            nbytes = self.ready.pop(b, 0)
        if b + self.in_flight < len(self.batches):
            self._ask(b + self.in_flight)
        return nbytes

    def close(self) -> None:
        self.stop.set()
        for q in self.queues:
            q.put(None)
        for t in self.threads:  # a read that never returns (a dead mount) must not hold the run: daemon threads
            t.join(timeout=READ_JOIN_S)


class StreamLoader:
    """tf.data's rule, as DLIO's TFRecord reader (reader/tf_reader.py) runs it: the rank's files
    (every n-th of the sorted list, or all of them where there are fewer files than ranks, each
    rank then keeping every n-th record) are read whole and in order by R streams
    (TFRecordDataset's num_parallel_reads): each stream reads a file from start to end in
    transfer-size chunks (its buffer_size), one chunk at a time, then takes the next file not yet
    taken. Records are interleaved round-robin over the streams into batches. Reading runs ahead
    of the accelerator by the prefetch's batches and the one being made: each stream holds at most
    its share of them."""

    def __init__(self, readers: list, dataset: Dataset, rank: int, ranks: int, batch: int, ahead: int, chunk: int,
                 stop: threading.Event):
        self.readers, self.dataset, self.batch, self.chunk, self.stop = readers, dataset, batch, chunk, stop
        files = list(range(len(dataset.paths)))
        self.keep = (rank, ranks) if len(files) < ranks else None  # fewer files than ranks: shard the records
        self.files = iter(files if self.keep else files[rank::ranks])
        self.claim = threading.Lock()
        by_file = np.argsort(dataset.file_index * (dataset.offset.max() + 1) + dataset.offset, kind="stable")
        starts = np.searchsorted(dataset.file_index[by_file], np.arange(len(dataset.paths) + 1))
        self.records = [by_file[starts[f]:starts[f + 1]] for f in range(len(dataset.paths))]  # in file order
        self.cap = max(1, math.ceil(ahead * batch / len(readers)))  # records a stream holds ahead
        self.ready = [deque() for _ in readers]  # per stream: (sample, bytes) read, not yet taken
        self.finished = [False] * len(readers)
        self.cond = threading.Condition()
        self.error: BaseException | None = None
        self.bytes = self.samples = self.taken = 0
        self.turn = 0  # the stream the next record comes from
        self.threads = [threading.Thread(target=self._stream, args=(w,), daemon=True) for w in range(len(readers))]
        for t in self.threads:
            t.start()

    def _next_file(self) -> int | None:
        with self.claim:
            return next(self.files, None)

    def _stream(self, w: int) -> None:
        reader = self.readers[w]
        try:
            while (f := self._next_file()) is not None and not self.stop.is_set():
                path, size = self.dataset.paths[f], int(self.dataset.file_sizes[f])
                pending = deque(int(i) for i in self.records[f])
                for at in range(0, size, self.chunk):
                    with self.cond:  # a stream holds at most its share of what runs ahead
                        while len(self.ready[w]) >= self.cap and not self.stop.is_set():
                            self.cond.wait(0.1)
                    if self.stop.is_set():
                        return
                    got = reader.read(path, at, min(self.chunk, size - at))[0]
                    with self.cond:
                        self.bytes += got
                        while pending and self.dataset.offset[pending[0]] + self.dataset.length[pending[0]] <= at + got:
                            i = pending.popleft()
                            self.ready[w].append((i, int(self.dataset.length[i])))
                        self.cond.notify_all()
        except BaseException as e:  # noqa: BLE001 - handed to the accelerator, which raises it
            _hand_over(self, e)
            return
        with self.cond:
            self.finished[w] = True
            self.cond.notify_all()

    def _record(self) -> int:
        """The next record in interleave order (its bytes), waiting for its stream; -1 at the end of the data."""
        with self.cond:
            while True:
                if self.error is not None:
                    _raise_handed(self.error)
                live = [w for w in range(len(self.readers)) if self.ready[w] or not self.finished[w]]
                if not live or self.stop.is_set():
                    return -1
                w = self.turn % len(self.readers)
                if w not in live:  # this stream has read its last file: the cycle goes on without it
                    self.turn += 1
                    continue
                if self.ready[w]:
                    self.turn += 1
                    _, nbytes = self.ready[w].popleft()
                    self.cond.notify_all()
                    return nbytes
                self.cond.wait(0.1)

    def take(self, b: int) -> int:
        """Batch b's bytes, once its records have been read (batches are taken in order)."""
        total = count = 0
        while count < self.batch:
            nbytes = self._record()
            if nbytes < 0:
                break
            self.taken += 1
            if self.keep and (self.taken - 1) % self.keep[1] != self.keep[0]:
                continue  # another rank's record (DLIO's dataset.shard)
            total += nbytes
            count += 1
        self.samples += count
        return total

    def close(self) -> None:
        _stop_threads(self)


class RowGroupLoader:
    """v3.0 DLIO's parquet rule, as its fork reads a local folder (data_loader/torch_data_loader.py's
    TorchIterableDataset driving reader/parquet_reader_file_iterable.py, at cbe2001). Each of R
    workers takes every R-th file of the dataset in name order (every rank the same files: that
    loader does not shard by rank, each rank stops after its steps) and reads all its files'
    footers; once every worker has, its files' row groups in order, each one read of the span its
    selected columns cover, as many at once as it has readers (DLIO: a thread each), none more than
    `window` row groups past the one its next batch needs. A worker cuts a batch whenever `batch` rows have
    landed in order, across row groups and files, and drops its last partial one. Batches come
    from the workers in turn (PyTorch's DataLoader), each worker asked at most TORCH_PREFETCH
    batches ahead of the accelerator."""

    def __init__(self, readers: list, workers: int, dataset: Dataset, batch: int, window: int,
                 stop: threading.Event):
        self.dataset, self.batch, self.window, self.stop = dataset, batch, window, stop
        per = max(1, len(readers) // workers)
        self.slots = [readers[w * per:(w + 1) * per] for w in range(workers)]  # a worker's reads in flight
        by_file = np.lexsort((dataset.offset, dataset.file_index))  # units in file order, then offset
        starts = np.searchsorted(dataset.file_index[by_file], np.arange(len(dataset.paths) + 1))
        files = list(range(len(dataset.paths)))
        self.files = [files[w::workers] for w in range(workers)]
        self.units = [np.concatenate([by_file[starts[f]:starts[f + 1]] for f in mine]) if mine
                      else np.zeros(0, dtype=np.int64) for mine in self.files]
        self.cum_rows = [np.cumsum(dataset.rows[u]) for u in self.units]
        left = [int(c[-1]) // batch if len(c) else 0 for c in self.cum_rows]  # whole batches each worker cuts
        self.order: list[int] = []  # the worker each batch comes from: in turn, an exhausted one left out
        while any(left):
            for w in range(workers):
                if left[w]:
                    self.order.append(w)
                    left[w] -= 1
        self.batch_count = len(self.order)
        self.row_bytes = [float(dataset.length[u].sum()) / max(1, int(c[-1])) if len(c) else 0.0
                          for u, c in zip(self.units, self.cum_rows)]
        self.taken = [0] * workers  # batches the accelerator has taken from each worker
        # each worker's footers are read: row groups start once every worker's are (DLIO's workers,
        # processes spawned together, read theirs before any stream fills the storage's queue)
        self.footed = [False] * workers
        self.claimed = [0] * workers  # row groups each worker has started, in order
        self.done = [np.zeros(len(u), dtype=bool) for u in self.units]
        self.in_order = [0] * workers  # row groups landed with none missing before them
        self.cond = threading.Condition()
        self.error: BaseException | None = None
        self.bytes = self.samples = 0
        self.threads = [threading.Thread(target=self._slot, args=(w, k), daemon=True)
                        for w in range(workers) for k in range(len(self.slots[w]))]
        for t in self.threads:
            t.start()

    @staticmethod
    def readers_per_worker(dataset: Dataset, workers: int, window: int) -> int:
        """The reads a worker may have in flight: its window, or all its row groups where fewer."""
        per_file = np.bincount(dataset.file_index, minlength=len(dataset.paths))
        most = max(int(per_file[w::workers].sum()) for w in range(workers))
        return max(1, min(window, most))

    def _landed_rows(self, w: int) -> int:
        """Rows of worker w's row groups landed with none missing before them: what its batches are cut from."""
        return int(self.cum_rows[w][self.in_order[w] - 1]) if self.in_order[w] else 0

    def _may_read(self, w: int, j: int) -> bool:
        """Whether worker w may start its j-th row group: the row group its furthest asked-for batch
        needs, plus the window."""
        asked_rows = (self.taken[w] + TORCH_PREFETCH) * self.batch
        needed = int(np.searchsorted(self.cum_rows[w], asked_rows))
        return j <= needed + self.window

    def _footers(self, w: int, reader) -> None:
        """Every footer of the worker's files, before any row group (pyarrow's ParquetFile of each)."""
        d = self.dataset
        for f in self.files[w]:
            if self.stop.is_set():
                return
            got = reader.read(d.paths[f], int(d.footers[f][0]), int(d.footers[f][1]))[0]
            with self.cond:
                self.bytes += got
        with self.cond:
            self.footed[w] = True
            self.cond.notify_all()

    def _slot(self, w: int, k: int) -> None:
        """One of worker w's reads in flight: the next row group it may start, again and again."""
        reader, units = self.slots[w][k], self.units[w]
        try:
            if k == 0:
                self._footers(w, reader)
            while True:
                with self.cond:
                    while not self.stop.is_set() and self.claimed[w] < len(units) and not (
                            all(self.footed) and self._may_read(w, self.claimed[w])):
                        self.cond.wait(0.1)
                    if self.stop.is_set() or self.claimed[w] >= len(units):
                        return
                    j = self.claimed[w]
                    self.claimed[w] += 1
                got = reader.read(*self.dataset.sample(int(units[j])))[0]
                with self.cond:
                    self.bytes += got
                    self.done[w][j] = True
                    while self.in_order[w] < len(units) and self.done[w][self.in_order[w]]:
                        self.in_order[w] += 1
                    self.cond.notify_all()
        except BaseException as e:  # noqa: BLE001 - handed to the accelerator, which raises it
            _hand_over(self, e)

    def take(self, b: int) -> int:
        """Batch b, once its worker's rows for it have landed; the bytes its rows were read with."""
        w = self.order[b]
        with self.cond:
            while self._landed_rows(w) < (self.taken[w] + 1) * self.batch and self.error is None \
                    and not self.stop.is_set():
                self.cond.wait(0.1)
            if self.error is not None:
                _raise_handed(self.error)
            self.taken[w] += 1
            self.samples += self.batch
            self.cond.notify_all()
        return round(self.batch * self.row_bytes[w])

    def close(self) -> None:
        _stop_threads(self)


class Accelerator:
    """One rank: its readers, and its steps through each epoch."""

    def __init__(self, rank: int, ranks: int, workload: Workload, dataset: Dataset, readers: list, barrier,
                 max_steps: int = 0, should_stop=lambda: False, on_arrival=None):
        self.rank, self.ranks, self.workload, self.dataset = rank, ranks, workload, dataset
        self.readers, self.barrier, self.max_steps = readers, barrier, max_steps
        self.should_stop = should_stop
        self.on_arrival = on_arrival  # on_arrival(epoch, step): this accelerator reached the step's barrier
        self.rng = np.random.default_rng(workload.seed + 7919 * rank)

    def steps(self) -> int:
        steps = steps_per_epoch(self.dataset.samples, self.workload.batch, self.ranks)
        return min(steps, self.max_steps) if self.max_steps else steps

    def compute_time(self) -> float:
        w = self.workload
        if w.compute_stdev_s > 0:  # DLIO: random.normal(computation_time, computation_time_stdev)
            return max(0.0, float(self.rng.normal(w.compute_s, w.compute_stdev_s)))
        return w.compute_s

    def _loader(self, epoch: int, n: int, stop: threading.Event):
        """The epoch's loader, by the rule the format is read with."""
        w = self.workload
        if w.file_format.row_groups:  # v3.0 DLIO's parquet reader
            return RowGroupLoader(self.readers, w.read_threads, self.dataset, w.batch, parquet.WINDOW, stop)
        if w.file_format.streams:  # tf.data's rule, as DLIO's TFRecord reader; else PyTorch's DataLoader's
            return StreamLoader(self.readers, self.dataset, self.rank, self.ranks, w.batch, w.prefetch_batches + 1,
                                w.transfer_size, stop)
        mine = shard(self.dataset.samples, self.rank, self.ranks, epoch, w.seed)
        return Loader(self.readers, self.dataset, [mine[s * w.batch:(s + 1) * w.batch] for s in range(n)],
                      w.batches_in_flight, stop)

    def run_epoch(self, epoch: int) -> tuple[EpochRecord, int, int]:
        """One epoch; the record, and the bytes and samples read."""
        n = self.steps()
        stop = threading.Event()
        start = time.monotonic_ns()
        loader = self._loader(epoch, n, stop)
        if isinstance(loader, RowGroupLoader):  # its workers may cut fewer whole batches than the rows make
            n = min(n, loader.batch_count)
        cols = {k: np.zeros(n, dtype=np.int64) for k in ("step_start_ns", "loaded_ns", "computed_ns", "released_ns",
                                                          "barrier_wait_ns", "batch_bytes")}
        compute = np.zeros(n)
        try:
            step_start = start
            for s in range(n):
                if self.should_stop():
                    raise KeyboardInterrupt
                cols["step_start_ns"][s] = step_start
                cols["batch_bytes"][s] = loader.take(s)
                cols["loaded_ns"][s] = time.monotonic_ns()
                compute[s] = self.compute_time()
                time.sleep(compute[s])
                cols["computed_ns"][s] = time.monotonic_ns()
                if self.on_arrival:
                    self.on_arrival(epoch, s)
                cols["barrier_wait_ns"][s] = self.barrier.wait()
                step_start = cols["released_ns"][s] = time.monotonic_ns()
        finally:
            loader.close()
        record = EpochRecord(start_ns=start, end_ns=int(step_start), compute_s=compute, **cols)
        return record, loader.bytes, loader.samples


class SoloBarrier:
    """The step barrier of a single accelerator: nobody to wait for."""

    parties = 1

    def wait(self) -> int:
        return 0

    def abort(self) -> None:
        pass


class MpiBarrier:
    """The step barrier across MPI ranks (one accelerator per rank)."""

    def __init__(self, comm):
        self.comm = comm
        self.parties = comm.Get_size()

    def wait(self) -> int:
        began = time.monotonic_ns()
        self.comm.Barrier()
        return time.monotonic_ns() - began

    def abort(self) -> None:
        self.comm.Abort(1)


def shared_barrier(memory, parties: int = 0):
    """The native step barrier in shared memory (parties > 0: create it; 0: join it)."""
    return _native.StepBarrier(memory, parties)
