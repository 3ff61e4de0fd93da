"""One KV-cache run: users (threads) asking requests for a while, each request's
KV entry stored in the tiers (tiers.py) and read back as decode reads it.

The tiers' bytes really move:
- host memory: each entry a numpy array of its size, written by copying into it
  and read by copying out of it in 16 MiB pieces (the reference copies numpy
  arrays too), timed around the copies;
- storage: each entry a file of its own in a folder this run makes under DIR
  (as the reference's one .npy a key), written whole and fsync'd, read whole,
  through gdsbench's native engines (--engine, --bs chunks, --qd in flight,
  O_DIRECT where the file system takes it; into GPU memory in the GPU modes). A
  storage operation's time is taken twice: the engine's own (first chunk issued
  to last landed, the fsync included: "device") and around the whole operation
  in Python (the file's creation or page-cache drop included: "total").

Only files this run made are written, and the run's folder is removed at the end."""

from __future__ import annotations

import os
import queue
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from gdsbench import _native
from gdsbench.execution import loops
from gdsbench.execution.parts import check_cache_choice_in
from gdsbench.job.errors import IoFailure, UsageError
from gdsbench.job.result import histogram_to_dict
from gdsbench.job.spec import JobSpec
from gdsbench.kvcache.models import KVModel
from gdsbench.kvcache.tiers import UNLIMITED, Entry, Move, NoRoom, TieredCache
from gdsbench.kvcache.workload import GENERATION_S_PER_TOKEN, User, users
from gdsbench.results.schema import SCHEMA_VERSION
from gdsbench.system import pattern

HOST, STORAGE = "host", "storage"
COPY_PIECE = 1 << 20
# The reference's pass criteria (its "latency" profile): storage's device time per kind, host's total
# time over its reads and writes together
CRITERIA = ((STORAGE, ("write",), 500.0), (STORAGE, ("read",), 200.0), (HOST, ("read", "write"), 150.0))
MIN_HIT_RATE = 0.30


@dataclass(frozen=True)
class KVRun:
    model: KVModel
    users: int
    duration_s: float
    directory: str  # where the run's folder of storage entries is made
    read_spec: JobSpec  # resolved: how storage entries are read (engine, bs, qd, direct, mode)
    write_spec: JobSpec  # the same, writing (fsync_end)
    host_budget: float = 0
    storage_budget: float = UNLIMITED
    generation: str = "none"
    seed: int = 0
    multi_turn: bool = True
    io_threads: int = 8  # storage readers and writers shared by the users
    requests: int = 0  # each user's requests (0: as many as the duration allows)

    def entry_bytes(self, tokens: int) -> int:
        return tokens * self.model.bytes_per_token


@dataclass
class OpLog:
    """One tier's operations of one kind: bytes and both times of each."""
    bytes: int = 0
    total_ns: list[int] = field(default_factory=list)
    device_ns: list[int] = field(default_factory=list)

    def add(self, nbytes: int, total_ns: int, device_ns: int | None = None) -> None:
        self.bytes += nbytes
        self.total_ns.append(total_ns)
        if device_ns is not None:
            self.device_ns.append(device_ns)


@dataclass
class Tally:
    """What the users did inside the run's window (requests that ended after it are not counted)."""
    ops: dict[tuple[str, str], OpLog] = field(default_factory=dict)
    requests: int = 0
    tokens_generated: int = 0
    context_tokens: int = 0
    end_to_end_ns: list[int] = field(default_factory=list)
    io_ns: list[int] = field(default_factory=list)  # per request: its operations' total times summed, every tier
    turn_hits: int = 0  # a continued conversation's previous turn found in a tier
    turn_misses: int = 0
    lookups: int = 0
    lookup_hits: int = 0
    window_s: float = 0.0  # the users' time: the duration, or less where the run was stopped
    interrupted: bool = False

    def op(self, tier: str, kind: str) -> OpLog:
        return self.ops.setdefault((tier, kind), OpLog())


class _Stopped(Exception):
    """The run is ending (its time is over, Ctrl-C, another user's failure): this user stops here."""


class _Mover:
    """A storage reader and writer pair (native), lent to one user at a time. Each holds its own
    buffers: --qd x --bs each, twice per --io-threads."""

    def __init__(self, run: KVRun):
        gpu = run.read_spec.gpu[0] if run.read_spec.gpu else 0
        (self.writer,) = loops.sample_writers(run.write_spec, gpu, 1)
        (self.reader,) = loops.sample_readers(run.read_spec, gpu, 1)


class KVSession:
    def __init__(self, run: KVRun):
        self.run = run
        self.cache = TieredCache([HOST, STORAGE], [run.host_budget, run.storage_budget])
        self._created: set[str] = set()
        self._host: dict[str, np.ndarray] = {}
        self._source = np.frombuffer(os.urandom(COPY_PIECE), dtype=np.uint8)  # what host writes copy in
        self._tally_lock = threading.Lock()
        self.tally = Tally()
        self.stop = threading.Event()
        self.failure: BaseException | None = None
        self.deadline = 0.0
        self._last_end = 0  # when the last counted request ended
        self.folder = None
        self._movers: queue.Queue[_Mover] = queue.Queue()
        for _ in range(run.io_threads):
            self._movers.put(_Mover(run))
        self.folder = _make_folder(run.directory)  # after what can refuse the job: no folder left behind
        try:
            self._check_cache_choice()
        except BaseException:
            self.close()
            raise

    def _check_cache_choice(self) -> None:
        """run's check of O_DIRECT or --uncached (parts.check_cache_choice), asked of a probe file in the run's folder before
        anything is measured: refused in run's words naming DIR, not as a user's failed write."""
        probe = self._path("probe")
        os.close(os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        self._created.add(probe)
        try:
            check_cache_choice_in(self.run.write_spec, probe, self.run.directory)
        finally:
            os.unlink(probe)
            self._created.discard(probe)

    # ---- the tiers' bytes ----

    def _path(self, key: str) -> str:
        return os.path.join(self.folder, f"{key}.kv")

    def _lend(self) -> _Mover:
        while True:
            try:
                return self._movers.get(timeout=0.1)
            except queue.Empty:
                if self.stop.is_set():
                    raise _Stopped from None

    def _write(self, tier: str, key: str, size: int, log: list) -> None:
        """Each operation logs (tier, kind, bytes, total ns, device ns or None, when it ended)."""
        if self.stop.is_set():
            raise _Stopped
        if tier == HOST:
            started = time.perf_counter_ns()
            array = np.empty(size, dtype=np.uint8)
            for at in range(0, size, COPY_PIECE):
                n = min(COPY_PIECE, size - at)
                array[at:at + n] = self._source[:n]
            self._host[key] = array
            ended = time.perf_counter_ns()
            log.append((HOST, "write", size, ended - started, None, ended))
            return
        path = self._path(key)

        def write(mover: _Mover):
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))  # ours, new
            self._created.add(path)
            return mover.writer.write(path, 0, size)

        # each entry its own bytes (pattern.file_seed), as the reference's random arrays are: the
        # mover's buffers refilled before the timed write (making bytes is not the storage's time)
        def own_bytes(mover: _Mover):
            mover.writer.reseed(pattern.file_seed(self.run.seed, key))

        self._on_storage("write", path, size, log, write, before=own_bytes)

    def _read(self, tier: str, key: str, size: int, log: list, scratch: np.ndarray) -> None:
        if self.stop.is_set():
            raise _Stopped
        if tier == HOST:
            started = time.perf_counter_ns()
            array = self._host[key]
            for at in range(0, size, COPY_PIECE):
                n = min(COPY_PIECE, size - at)
                scratch[:n] = array[at:at + n]
            ended = time.perf_counter_ns()
            log.append((HOST, "read", size, ended - started, None, ended))
            return
        path = self._path(key)

        def read(mover: _Mover):
            if not (self.run.read_spec.direct or self.run.read_spec.uncached):  # as the reference does: storage,
                # not the page cache, answers (uncached, the kernel dropped the entry's pages already)
                fd = os.open(path, os.O_RDONLY)
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)
            return mover.reader.read(path, 0, size)

        self._on_storage("read", path, size, log, read)

    def _on_storage(self, kind: str, path: str, size: int, log: list, operation, before=None) -> None:
        """operation(mover) -> (bytes, chunks, engine ns) on a lent mover, timed whole, after before(mover),
        not timed; a short one fails."""
        mover = self._lend()  # a wait for a free mover is the harness's, not the storage's: not timed
        try:
            if before:
                before(mover)
            started = time.perf_counter_ns()
            nbytes, _, device_ns = operation(mover)
        finally:
            self._movers.put(mover)
        ended = time.perf_counter_ns()
        if nbytes != size:
            raise IoFailure(f"{path}: {'wrote' if kind == 'write' else 'read'} {nbytes} of the entry's {size} bytes")
        log.append((STORAGE, kind, nbytes, ended - started, device_ns, ended))

    def _drop(self, tier: str, key: str) -> None:
        if tier == HOST:
            self._host.pop(key, None)
        else:
            path = self._path(key)
            os.unlink(path)
            self._created.discard(path)

    def _move(self, move: Move, log: list, scratch: np.ndarray) -> None:
        source, key, size = self.cache.names[move.source], move.entry.key, move.entry.size
        if move.to is not None:  # the bytes come from where they were: read there, written below
            self._read(source, key, size, log, scratch)
            self._write(self.cache.names[move.to], key, size, log)
        self._drop(source, key)
        self.cache.moved(move)

    def _ready(self, entry: Entry) -> None:
        """Wait until the entry's bytes are where it says; a run ending meanwhile stops the wait (an
        entry whose move failed is never ready: that failure ends the run)."""
        while not entry.ready.wait(0.1):
            if self.stop.is_set():
                raise _Stopped

    def _read_entry(self, entry: Entry, log: list, scratch: np.ndarray) -> None:
        try:
            self._ready(entry)
            self._read(self.cache.names[entry.tier], entry.key, entry.size, log, scratch)
        finally:
            self.cache.unpin(entry)

    def _store(self, key: str, size: int):
        """The entry's place, and the moves that make room there; while every entry that could move
        is being read or written, wait for one to be free."""
        while True:
            try:
                return self.cache.store(key, size)
            except NoRoom:
                if self.stop.wait(0.01):
                    raise _Stopped from None

    # ---- the users ----

    def _request(self, request, log: list, scratch: np.ndarray, counts: dict) -> None:
        """Prefill, decode and generation of one request, its operations into `log`, its lookups into
        `counts` (as they happen: a request the run's end cuts short still counts what it did)."""
        if request.previous_key is not None:
            entry = self.cache.lookup(request.previous_key)
            counts["lookups"] += 1
            if entry is None:
                counts["turn_misses"] += 1
            else:
                counts["turn_hits"] += 1
                counts["lookup_hits"] += 1
                self._read_entry(entry, log, scratch)
        size = self.run.entry_bytes(request.context_tokens)
        entry, moves = self._store(request.key, size)
        try:
            for move in moves:
                self._move(move, log, scratch)
            self._write(self.cache.names[entry.tier], entry.key, size, log)
        except BaseException:
            self.cache.forget(entry)
            raise
        self.cache.written(entry)
        for _ in range(request.decode_reads):
            again = self.cache.lookup(request.key)
            counts["lookups"] += 1
            if again is None:  # moved out by others' requests: the rest of decode has nothing to read
                break
            counts["lookup_hits"] += 1
            self._read_entry(again, log, scratch)
        if self.stop.wait(request.generate_tokens * GENERATION_S_PER_TOKEN[self.run.generation]):
            raise _Stopped

    def _user(self, user: User) -> None:
        scratch = np.empty(COPY_PIECE, dtype=np.uint8)
        try:
            while not self.stop.is_set() and not (self.run.requests and user.asked >= self.run.requests):
                request = user.next_request()
                if self.stop.wait(request.think_s):
                    return
                log: list = []
                counts = {"lookups": 0, "lookup_hits": 0, "turn_hits": 0, "turn_misses": 0}
                started = time.perf_counter_ns()
                try:
                    self._request(request, log, scratch, counts)
                except _Stopped:
                    self._count(log, counts)
                    return
                ended = time.perf_counter_ns()
                self._count(log, counts, request if ended <= self.deadline else None, ended - started, ended)
        except BaseException as e:  # the first failure ends the run; the main thread raises it
            with self._tally_lock:
                self.failure = self.failure or e
            self.stop.set()

    def _count(self, log: list, counts: dict, request=None, elapsed_ns: int = 0, ended: int = 0) -> None:
        """Every operation that ended inside the window (the reference counts each as it ends); the
        request itself only where it ended inside it."""
        with self._tally_lock:
            t = self.tally
            for tier, kind, nbytes, total_ns, device_ns, ended in log:
                if ended <= self.deadline:
                    t.op(tier, kind).add(nbytes, total_ns, device_ns)
            t.lookups += counts["lookups"]
            t.lookup_hits += counts["lookup_hits"]
            t.turn_hits += counts["turn_hits"]
            t.turn_misses += counts["turn_misses"]
            if request is None:
                return
            self._last_end = max(self._last_end, ended)
            t.requests += 1
            t.tokens_generated += request.generate_tokens
            t.context_tokens += request.context_tokens
            t.end_to_end_ns.append(elapsed_ns)
            t.io_ns.append(sum(total for _, _, _, total, _, _ in log))

    def run_users(self) -> Tally:
        """Every user until the duration is over, or until every user has asked --requests; the
        requests under way when the time is over stop at their next operation (what ended inside
        the window is counted)."""
        threads = [threading.Thread(target=self._user, args=(u,), name=f"kv-user-{u.index}", daemon=True)
                   for u in users(self.run.users, self.run.seed, self.run.multi_turn)]
        started = time.perf_counter_ns()
        self.deadline = started + self.run.duration_s * 1e9
        for t in threads:
            t.start()
        try:
            while not self.stop.wait(0.1) and time.perf_counter_ns() < self.deadline:
                if not any(t.is_alive() for t in threads):  # every user asked its --requests: the window
                    self.deadline = self._last_end              # ends with the last of them
                    break
        except KeyboardInterrupt:
            self.tally.interrupted = True
            self.deadline = time.perf_counter_ns()  # what ends from now on is not counted
        self.stop.set()
        self.tally.window_s = (min(time.perf_counter_ns(), self.deadline) - started) / 1e9
        for t in threads:  # each stops at its next operation: an engine's transfer under way ends first
            while t.is_alive():
                try:
                    t.join(0.1)
                except KeyboardInterrupt:  # already stopping; the files are removed once they have
                    self.tally.interrupted = True
        if self.failure is not None:
            failure, self.failure = self.failure, None
            if isinstance(failure, OSError):
                raise IoFailure(f"{failure.filename or self.folder}: {failure.strerror or failure}") from None
            if isinstance(failure, MemoryError):
                raise IoFailure("the host memory tier could not be allocated: lower --host-mem or --users") from None
            raise failure
        if self.tally.interrupted:
            raise KeyboardInterrupt
        return self.tally

    def close(self) -> None:
        """Remove every file this run made, then its folder (after every user has stopped)."""
        for path in list(self._created):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        self._created.clear()
        self._host.clear()
        if self.folder is not None:
            try:
                os.rmdir(self.folder)
            except OSError:
                pass


def _make_folder(directory: str) -> str:
    """A new folder for this run's entries, made here (never one that was there)."""
    if not os.path.isdir(directory):
        raise UsageError(f"DIR {directory}: not a directory; make it, or name one where the storage tier's entries "
                         "may go")
    for n in range(1000):
        path = os.path.join(directory, f"gdsbench-kvcache-{os.getpid()}-{n}")
        try:
            os.mkdir(path)
            return path
        except FileExistsError:
            continue
        except OSError as e:
            raise UsageError(f"DIR {directory}: cannot make the run's folder there ({e.strerror})") from None
    raise UsageError(f"DIR {directory}: no free name for the run's folder")


def _percentiles_ms(values: list[int]) -> dict:
    if not values:
        return {"p50_ms": None, "p95_ms": None, "p99_ms": None, "max_ms": None}
    a = np.asarray(values, dtype=np.float64) / 1e6
    return {"p50_ms": float(np.percentile(a, 50)), "p95_ms": float(np.percentile(a, 95)),
            "p99_ms": float(np.percentile(a, 99)), "max_ms": float(a.max())}


def _histogram(values: list[int]) -> dict:
    h = _native.LatencyHistogram()
    if values:
        h.add(np.asarray(values, dtype=np.uint64))
    return histogram_to_dict(h)


def summarise(run: KVRun, tally: Tally, cache: TieredCache, data_path: str) -> dict:
    """The run's figures, named as the reference names them where it has them."""
    seconds = tally.window_s or run.duration_s
    tiers = {}
    for (tier, kind), log in sorted(tally.ops.items()):
        row = {"ops": len(log.total_ns), "bytes": log.bytes, "bytes_per_s": log.bytes / seconds,
               "total": _percentiles_ms(log.total_ns), "total_histogram": _histogram(log.total_ns)}
        if tier == STORAGE:
            row["device"] = _percentiles_ms(log.device_ns)
            row["device_histogram"] = _histogram(log.device_ns)
        tiers.setdefault(tier, {})[kind] = row
    criteria = []
    for tier, kinds, limit_ms in CRITERIA:
        logs = [tally.ops[(tier, k)] for k in kinds if (tier, k) in tally.ops]
        if not logs:
            continue
        times = [ns for log in logs for ns in (log.device_ns if tier == STORAGE else log.total_ns)]
        p95 = _percentiles_ms(times)["p95_ms"]
        criteria.append({"what": f"{tier} {'+'.join(kinds)} p95", "limit_ms": limit_ms, "p95_ms": p95,
                         "pass": p95 < limit_ms})
    hit_rate = tally.lookup_hits / tally.lookups if tally.lookups else None
    if hit_rate is not None:
        criteria.append({"what": "cache hit rate", "at_least": MIN_HIT_RATE, "value": hit_rate,
                         "pass": hit_rate > MIN_HIT_RATE})
    storage = tiers.get(STORAGE, {})
    return {
        "model": run.model.to_dict(),
        "kv_bytes_per_token": run.model.bytes_per_token,
        "users": run.users,
        "duration_s": seconds,
        "interrupted": tally.interrupted,
        "seed": run.seed,
        "generation_mode": run.generation,
        "requests_per_user": run.requests or None,
        "multi_turn": run.multi_turn,
        "budgets_bytes": {HOST: run.host_budget,
                          STORAGE: None if run.storage_budget == UNLIMITED else run.storage_budget},
        "data_path": data_path,
        "requests_completed": tally.requests,
        "requests_per_s": tally.requests / seconds,
        "tokens_generated": tally.tokens_generated,
        "tokens_per_s": tally.tokens_generated / seconds,
        "context_tokens": tally.context_tokens,
        "storage_read_bytes_per_s": storage.get("read", {}).get("bytes_per_s", 0.0),
        "storage_write_bytes_per_s": storage.get("write", {}).get("bytes_per_s", 0.0),
        "tiers": tiers,
        "end_to_end": _percentiles_ms(tally.end_to_end_ns),
        "io_per_request": _percentiles_ms(tally.io_ns),
        "multi_turn_hits": tally.turn_hits,
        "multi_turn_misses": tally.turn_misses,
        "cache_hit_rate": hit_rate,
        "moves": [{"from": a, "to": b, "entries": n} for (a, b), n in sorted(cache.moves.items())],
        "criteria": criteria,
        "passed": all(c["pass"] for c in criteria) if criteria else None,  # None: nothing ended to judge
    }


def entries_fit(run: KVRun, largest_context: int) -> None:
    """UsageError where the largest entry one of the run's users can ask fits no tier."""
    need = run.entry_bytes(largest_context)
    if need > max(run.host_budget, run.storage_budget):
        from gdsbench.job.units import format_size
        raise UsageError(f"--storage-budget {format_size(run.storage_budget)}: smaller than the largest KV entry these "
                         f"users may ask ({largest_context} tokens x {run.model.bytes_per_token} B = "
                         f"{format_size(need)}); raise it, or leave it out (no limit)")


def tier_rows(figures: dict) -> list[dict]:
    """A saved row per tier and operation (results/kinds.py's kvcache fields)."""
    rows = []
    for tier, kinds in figures["tiers"].items():
        for kind, row in kinds.items():
            device = row.get("device", {})
            rows.append({"point_key": f"{tier}-{kind}", "schema_version": SCHEMA_VERSION, "tier": tier, "op": kind,
                         "ops": row["ops"], "bytes": row["bytes"],
                         "bytes_per_s": row["bytes_per_s"],
                         **{f"total_{p}_ms": row["total"][f"{p}_ms"] for p in ("p50", "p95", "p99")},
                         **{f"device_{p}_ms": device.get(f"{p}_ms") for p in ("p50", "p95", "p99")}})
    return rows


def headline(figures: dict) -> dict:
    """The run's figures without the per-tier detail and histograms (run.json's "figures")."""
    return {k: v for k, v in figures.items() if k != "tiers"}


def check_memory(run: KVRun) -> None:
    """UsageError where the run's own memory is more than is available: the host tier's budget, each
    mover's reader and writer buffers (--qd x --bs each), each user's copy piece."""
    from gdsbench.job.units import format_size
    from gdsbench.system.environment import meminfo

    buffers = run.io_threads * 2 * run.read_spec.qd * run.read_spec.bs
    need = run.host_budget + buffers + run.users * COPY_PIECE
    available = meminfo("MemAvailable")
    if available is not None and need > available:
        raise UsageError(f"--host-mem {format_size(run.host_budget)} + --io-threads {run.io_threads} x 2 x --qd "
                         f"{run.read_spec.qd} x --bs {format_size(run.read_spec.bs)} of buffers: {format_size(need)}, "
                         f"more than the memory available ({format_size(available)}); lower one of them")

