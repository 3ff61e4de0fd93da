"""`gdsbench objects s3://BUCKET/PREFIX/`: object operations as warp (MinIO's S3 benchmark)
measures them, for datasets of many small objects (MLPerf Storage v3.0's retinanet reads 1.17
million of about 315 KiB: where object stores hurt). One operation at a time over a set of objects
gdsbench makes, PREFIX/obj-0000000 ...: PUT (each object new, whole, with the pattern and
gdsbench's mark), HEAD, GET (whole), LIST (the prefix, every page) and DELETE, each a rate with
latency percentiles. Requests run natively (native/object_ops.hpp, the curl engine's transport):
--qd in flight on each of --threads threads (kept connections), the objects dealt out over the
threads, and over MPI ranks (each op starts after a barrier; rank 0 sums).

The set is known by its manifest, PREFIX/gdsbench-objects.json (the count, size and seed; complete
once every object was put), and each object by its name and its ETag (the MD5 of the pattern it
was put with). A PUT run first removes the set an earlier run left, and refuses a prefix holding
anything else; a run without PUT checks and then uses the set the manifest names; DELETE removes
the set, then the manifest.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import threading
from dataclasses import dataclass, field

from gdsbench import _native
from gdsbench.execution import mpi
from gdsbench.job.errors import UsageError
from gdsbench.job.units import format_size
from gdsbench.system import object_store

OPS = ("put", "head", "get", "list", "delete")  # warp's, in the order a set's life takes them
REPEATED = ("head", "get", "list")  # what --duration repeats: they leave the set as it is
MANIFEST = "gdsbench-objects.json"
PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class ObjectsRun:
    prefix: str  # s3://BUCKET/PREFIX/ (ends in /)
    ops: tuple[str, ...]
    objects: int
    size: int  # bytes of each object
    qd: int  # requests in flight per thread
    threads: int
    lists: int  # whole listings of the prefix, over every thread and rank
    asking: dict = field(default_factory=dict)  # the curl engine's options: timeout_ns, retries, http2
    duration: float = 0.0  # seconds head, get and list go on for, the set again and again (0: once)
    batch: int = 1  # objects a delete request removes (S3's DeleteObjects above 1)
    seed: int = 1

    def duration_of(self, op: str) -> float:
        """How long an op asks the set again and again (warp's --duration): head, get and list;
        put and delete make and remove each object once (0)."""
        return self.duration if op in REPEATED else 0.0

    def name(self, i: int) -> str:
        return f"{self.prefix}obj-{i:07d}"

    def info(self) -> dict:
        return {"kind": "objects", "prefix": self.prefix, "ops": list(self.ops), "objects": self.objects,
                "object_bytes": self.size, "qd": self.qd, "threads": self.threads, "lists": self.lists,
                "duration_s": self.duration, "delete_batch": self.batch,
                "ranks": _rank_and_size()[1], "data_path": "S3, curl engine: one request an object (a LIST a page), --qd in "
                                                  "flight per thread on kept connections, into host memory"}


def check_prefix(prefix: str) -> str:
    """The prefix as an S3 folder (ending in /), or UsageError."""
    if not prefix.startswith("s3://"):
        raise UsageError(f"PATH {prefix}: object operations are measured on S3; give s3://BUCKET/PREFIX/")
    bucket, key = object_store.split(prefix)
    if not key.strip("/"):
        raise UsageError(f"PATH {prefix}: give a prefix of the bucket's (s3://{bucket}/PREFIX/), where gdsbench makes "
                         "its objects")
    return prefix if prefix.endswith("/") else prefix + "/"


# ---- the set of objects ----

def _manifest(s3, run: ObjectsRun) -> dict | None:
    """The set's manifest, where it is gdsbench's and whole (its count, size and seed numbers)."""
    try:
        m = json.loads(object_store.get_text(s3, run.prefix + MANIFEST) or "null")
        ok = m.get("gdsbench_objects") == 1 and all(int(m[k]) >= 0 for k in ("objects", "size", "seed"))
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    return m if ok else None


def etag_of(size: int, seed: int) -> str:
    """The ETag every object of a set has (one PUT of the pattern: S3's ETag is its body's MD5)."""
    return '"' + hashlib.md5(object_store.pattern_bytes(0, size, seed)).hexdigest() + '"'


def _ours(s3, run: ObjectsRun, m: dict | None) -> list[str]:
    """Every object under the prefix, each checked to be the set's: the manifest, or one of its
    objects (its name and number, and its ETag: the pattern as gdsbench put it). UsageError naming
    the first that is not, which is left as it is."""
    entries = object_store.list_entries(s3, run.prefix)
    if m is None and entries:
        raise UsageError(f"PATH {run.prefix}: holds objects and no manifest of gdsbench's ({entries[0].url}, ...); "
                         "gdsbench writes only into a prefix of its own: give another prefix")
    expected = etag_of(int(m["size"]), int(m["seed"])) if m else ""
    for e in entries:
        name = e.url[len(run.prefix):]
        number = re.fullmatch(r"obj-(\d{7,})", name)
        theirs = name != MANIFEST and (not number or int(number[1]) >= int(m["objects"]) or e.etag != expected)
        if theirs:
            raise UsageError(f"PATH {run.prefix}: holds {e.url}, which gdsbench did not make (or which was changed "
                             "since); it is left as it is: give another prefix")
    return [e.url for e in entries]


def make_room(s3, run: ObjectsRun) -> str | None:
    """Before a PUT: the set an earlier run left removed (the returned note says so), the manifest of
    this one put; a prefix holding anything else is refused, left as it is."""
    urls = _ours(s3, run, _manifest(s3, run))
    note = None
    if urls:
        object_store.delete_objects(s3, [u for u in urls if not u.endswith(MANIFEST)])
        object_store.delete_objects(s3, [run.prefix + MANIFEST])
        note = f"removed the {len(urls) - 1} objects an earlier run left under {run.prefix}"
    put_manifest(s3, run, complete=False)
    return note


def put_manifest(s3, run: ObjectsRun, complete: bool) -> None:
    object_store.put_text(s3, run.prefix + MANIFEST, json.dumps(
        {"gdsbench_objects": 1, "objects": run.objects, "size": run.size, "seed": run.seed, "complete": complete}))


def the_set(s3, run: ObjectsRun) -> ObjectsRun:
    """A run without PUT reads the set the manifest names (its count and size), every object under
    the prefix checked to be the set's first (a DELETE removes only those)."""
    m = _manifest(s3, run)
    if m is None or m.get("complete") is not True:
        raise UsageError(f"PATH {run.prefix}: no complete set of gdsbench's objects there; put one first "
                         f"(--ops put,{','.join(run.ops)})")
    _ours(s3, run, m)
    return dataclasses.replace(run, objects=int(m["objects"]), size=int(m["size"]), seed=int(m["seed"]))


# ---- one operation over every thread (and rank) ----

def _rank_and_size() -> tuple[int, int]:
    comm = mpi.world()
    return (comm.Get_rank(), comm.Get_size()) if comm is not None else (0, 1)


def _names(run: ObjectsRun, op: str) -> list[str]:
    """This rank's share of the op's requests: its objects, or its whole listings of the prefix."""
    rank, ranks = _rank_and_size()
    if op == "list":
        return [run.prefix] * len(range(rank, run.lists, ranks))
    return [run.name(i) for i in range(rank, run.objects, ranks)]


def op_here(run: ObjectsRun, op: str) -> list[dict]:
    """This rank's part of one op: a native run on each thread over its share; their answers."""
    names = _names(run, op)
    shares = [names[t::run.threads] for t in range(run.threads)]
    mark = json.dumps({"size": run.size, "seed": run.seed})
    answers: list = [None] * run.threads
    errors: list[BaseException] = []

    def one(t: int) -> None:
        try:
            answers[t] = _native.object_ops(op, shares[t], run.qd, run.size, mark, run.seed, run.asking,
                                            int(run.duration_of(op) * 1e9), run.batch if op == "delete" else 1)
        except BaseException as e:  # noqa: BLE001 - raised again in the caller's thread
            errors.append(e)

    # daemonic: a Ctrl-C ends the command while native requests are in flight (their process goes with it)
    workers = [threading.Thread(target=one, args=(t,), daemon=True) for t in range(run.threads) if shares[t]]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if errors:
        raise errors[0]
    return [a for a in answers if a is not None]


def summarise(run: ObjectsRun, op: str, answers: list[dict]) -> dict:
    """One op's row: its rate over the slowest thread's time, its latency's percentiles."""
    latency, first = _native.LatencyHistogram(), _native.LatencyHistogram()
    for a in answers:
        latency.merge(a["latency"])
        first.merge(a["first_byte"])
    seconds = max((a["ns"] for a in answers), default=0) / 1e9
    ops = sum(a["ops"] for a in answers)
    row = {"op": op, "point_key": f"op={op}", "ops": ops, "seconds": seconds,
           "ops_per_s": ops / seconds if seconds else 0.0,
           "bytes": sum(a["bytes"] for a in answers), "listed": sum(a["listed"] for a in answers),
           "connections": sum(a["connections"] for a in answers), "retries": sum(a["retries"] for a in answers),
           "objects": run.objects, "object_bytes": run.size, "qd": run.qd, "threads": run.threads, "ranks": _rank_and_size()[1],
           "duration_s": run.duration_of(op), "batch": run.batch if op == "delete" else 1,
           "objects_per_s": sum(a["objects"] for a in answers) / seconds if seconds else 0.0,
           "lat_max_us": latency.max / 1e3 if ops else 0.0, "verify_mismatches": 0}
    row["bytes_per_s"] = row["bytes"] / seconds if seconds else 0.0
    for p in PERCENTILES:
        row[f"lat_p{p}_us"] = latency.percentile(p) / 1e3 if ops else 0.0
    row["first_byte_p50_us"] = first.percentile(50) / 1e3 if ops else 0.0
    return row


def run_op(run: ObjectsRun, op: str) -> dict | None:
    """Every rank's part of one op, started together; rank 0 gets the row (the others None)."""
    comm = mpi.world()
    if comm is not None:
        comm.Barrier()
    answers = op_here(run, op)
    if comm is not None:
        gathered = comm.gather(answers, root=0)  # (native histograms pickle)
        if comm.Get_rank() != 0:
            return None
        answers = [a for part in gathered for a in part]
    return summarise(run, op, answers)


def describe(run: ObjectsRun) -> str:
    return (f"{run.objects:,} objects of {format_size(run.size)} under {run.prefix}, {run.threads} thread(s) x --qd "
            f"{run.qd}{f' x {_rank_and_size()[1]} ranks' if _rank_and_size()[1] > 1 else ''}: {', '.join(run.ops)}")
