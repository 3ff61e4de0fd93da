"""A run's checkpoints in an object store: `gdsbench checkpoint s3://BUCKET/PREFIX/`, each
checkpoint's objects under PREFIX/global_epoch1_stepK/, as s3torchconnector's checkpoint writers
and MLPerf Storage v3.0's object-store checkpointing put them: every rank's file an object of its
own, written whole by the native curl engine (one PUT where --bs holds it, else an upload in
parts of --bs with --qd parts in flight), created only where none is there (If-None-Match), and
read back by ranged GETs, every block checked.

As on disk (on_disk.py), each folder has its manifest (manifest.py), an object put before any
of the checkpoint's objects and again, complete, with each object's size and ETag once every
rank has written. A folder is replaced only where its manifest is gdsbench's and every object
under it is one the manifest names: unchanged since (its ETag) in a complete checkpoint, and
carrying gdsbench's mark in an incomplete one; anything else is refused and left as it is.
Replacing a folder first aborts the uploads in parts left under it (a run killed mid-write:
they hold the server's space until aborted), then deletes its objects, the manifest last.

One run at a time writes a prefix: it holds PREFIX/.gdsbench-checkpoint-lock, an object put only
where none is (If-None-Match) naming its host, boot, pid and run, and deleted at its end. A lock
whose process is gone from this running system (killed) is taken over; one from another host is
named in the refusal, to be removed by hand once that run is known to be dead.

There is no page cache here to clear between writing and reading back: the server's own caches
cannot be dropped from a client, and every read row says so.
"""

from __future__ import annotations

import json
import math
import os
import socket

from gdsbench.checkpoint import manifest
from gdsbench.checkpoint.moves import move_whole
from gdsbench.execution.loops import check_writes_regions, sample_writers
from gdsbench.job.errors import UsageError
from gdsbench.job.spec import JobSpec
from gdsbench.job.units import format_size
from gdsbench.system import gpu_path, object_store, pattern

LOCK = ".gdsbench-checkpoint-lock"
LOCK_TAG = "gdsbench_checkpoint_lock"  # what a lock object's record is tagged with


class Bucket:
    """A run's checkpoints under an S3 prefix, as session.py asks any place of them (`run`: a
    session.CheckpointRun, here and in every function of this module)."""

    remote = True
    CACHE_NOTE = ("nothing was cleared between writing and reading back: the object store's own caches cannot be "
                  "dropped from a client, so reads may come from the server's memory")

    def __init__(self, directory: str):
        self.directory = directory  # s3://BUCKET/PREFIX, without the trailing /
        self._s3 = None
        self._writer = None

    @property
    def s3(self):
        if self._s3 is None:
            self._s3 = object_store.client()
        return self._s3

    # ---- before the run ----

    def prepare(self, run) -> None:
        """Before rank 0 looks at the prefix: nothing to make (the bucket is the user's)."""

    def prepare_rank(self, run) -> None:
        """On every rank: the credentials boto3 finds (a profile, a role) handed to the native engine."""
        object_store.share_credentials()

    def hold(self, run) -> PrefixLock:
        return PrefixLock(self)

    def check(self, run) -> None:
        """Before the first checkpoint is written: S3's rules for every object's parts, then every
        folder this run replaces."""
        check_writes_regions(run.spec)  # (kvikio's loop writes no objects)
        check_parts(run)
        for k in range(1, run.checkpoints + 1):
            why = self.foreign(run.folder(k))
            if why:
                raise manifest.refusal(why, "prefix")

    def check_room(self, run) -> None:
        """An object store's room is not asked (S3 says none): nothing to check."""

    def incomplete(self, directory: str) -> list[str]:
        """Checkpoint folders of gdsbench's under the prefix whose writing never finished."""
        out = []
        for folder in object_store.folders_under(self.s3, directory + "/"):
            if not folder.rsplit("/", 1)[-1].startswith("global_epoch"):
                continue
            m = self.read_manifest(folder)
            if m is not None and m.get("complete") is not True:
                out.append(folder)
        return out

    # ---- the folders ----

    def read_manifest(self, folder: str) -> dict | None:
        return manifest.parse(object_store.get_text(self.s3, f"{folder}/{manifest.NAME}"))

    def foreign(self, folder: str) -> str | None:
        """Why a folder's objects are not wholly gdsbench's, naming what (None: they are, or there are none)."""
        return self._look(folder)[0]

    def _look(self, folder: str) -> tuple[str | None, dict | None, list]:
        """(why the folder is not wholly gdsbench's or None, its manifest, the entries looked at)."""
        entries = object_store.list_entries(self.s3, folder + "/")
        if not entries:
            return None, None, []
        m = self.read_manifest(folder)
        sizes = manifest.planned_sizes(m) if m is not None else None
        if sizes is None:
            return (f"{folder}/: holds objects, and is not a checkpoint gdsbench wrote (no manifest of gdsbench's in it)",
                    m, entries)
        proofs = manifest.proofs(m)
        for e in entries:
            name = e.url[len(folder) + 1:]
            if name == manifest.NAME:
                continue
            if name not in sizes:
                return f"{folder}/: not a checkpoint gdsbench wrote: it holds {name}, which gdsbench did not make", m, entries
            proof = proofs.get(name)
            if isinstance(proof, dict) and proof.get("etag") != e.etag:
                return f"{e.url}: changed since gdsbench wrote it (ETag {proof.get('etag')} then, {e.etag} now)", m, entries
            if not isinstance(proof, dict) and object_store.mark_of(object_store.head(self.s3, e.url)) is None:
                return f"{e.url}: has no x-amz-meta-{object_store.MARK} (another program wrote it)", m, entries
        return None, m, entries

    def make_room(self, run, checkpoint: int) -> str | None:
        """Checkpoint k's folder emptied of what gdsbench wrote there: the uploads a killed run left
        for the manifest's objects aborted, then exactly the objects looked at deleted, the manifest
        last (said in the returned note); anything else is refused, and left as it is."""
        folder = run.folder(checkpoint)
        why, m, entries = self._look(folder)
        if why:
            raise manifest.refusal(why, "prefix")
        if m is None:
            return None
        planned = {f"{folder}/{name}" for name in manifest.planned_sizes(m)}
        aborted = object_store.abort_uploads_under(self.s3, folder + "/", only=planned)
        kept = f"{folder}/{manifest.NAME}"
        object_store.delete_objects(self.s3, [e.url for e in entries if e.url != kept])
        object_store.delete_objects(self.s3, [kept])  # last: until it goes, the folder is still known as ours
        state = "complete" if m.get("complete") is True else "INCOMPLETE"
        left = f", and aborted {aborted} upload{'s' * (aborted != 1)} left unfinished" if aborted else ""
        return f"removed {folder}/, an earlier {state} checkpoint gdsbench wrote ({len(entries)} objects){left}"

    def write_manifest(self, run, checkpoint: int, complete: bool) -> None:
        """The folder's manifest; once complete, with each object's size and ETag as listed now."""
        folder = run.folder(checkpoint)
        written = None
        if complete:
            written = {e.url[len(folder) + 1:]: {"size": e.size, "etag": e.etag}
                       for e in object_store.list_entries(self.s3, folder + "/")
                       if not e.url.endswith("/" + manifest.NAME)}
        object_store.put_text(self.s3, f"{folder}/{manifest.NAME}",
                              json.dumps(manifest.record(run, checkpoint, complete, written)))

    def complete(self, run, checkpoint: int) -> bool:
        return manifest.describes(self.read_manifest(run.folder(checkpoint)), run)

    def clear_cache(self, run) -> None:
        """Nothing here to clear (CACHE_NOTE)."""
        return None

    def data_path(self, spec: JobSpec) -> str:
        """What a phase's bytes pass through, in words, the CPU stand-in labelled as gpu_path labels it."""
        mode = spec.mode_declaration
        sim = f" [{gpu_path.SIMULATED}]" if spec.simulated and mode.gpu else ""
        if spec.direction == "write":
            return (f"S3, {spec.engine} engine PUTs (an upload in parts of --bs, or the object whole), each object new "
                    f"(If-None-Match) {mode.write_source}{sim}")
        return f"S3, {spec.engine} engine ranged GETs {mode.landing}{sim}"

    # ---- a rank's objects ----

    def write(self, run, url: str, size: int) -> None:
        """One object of a rank's, created whole (only where none is there) with the pattern, its own
        payload (pattern.file_seed, as a file's on disk) and gdsbench's mark, natively: its upload
        completed is its fsync."""
        if self._writer is None:  # one per rank and checkpoint (inside its time, as on disk each file's job is)
            spec = run.spec.replace(threads=1, verify=False, fsync_end=False, runtime_ns=0)
            (self._writer,) = sample_writers(spec, spec.gpu[0], 1)
        seed = pattern.file_seed(run.spec.seed, url)
        self._writer.reseed(seed)  # its --qd x --bs buffers refilled: small beside an object
        self._writer.create(url, size, json.dumps({"size": size, "seed": seed}))

    def read(self, run, url: str, size: int) -> tuple[int, int, int | None]:
        return move_whole(run.moved("read"), url, size, write=False, fsync=False, verify=run.verify)


def check_parts(run) -> None:
    """UsageError unless every object of the run can be uploaded as S3 takes an upload in parts:
    parts of --bs of at least 5 MiB (all but the last), at most 10,000 of them; an object that
    --bs holds is one PUT."""
    bs = run.spec.bs
    largest = max(f.size for r in range(run.ranks) for f in run.files(r))
    parts = math.ceil(largest / bs)
    if parts > 1 and bs < object_store.MIN_PART:
        raise UsageError(f"--bs {format_size(bs)}: each object is uploaded in parts of --bs, which S3 takes from "
                         f"{format_size(object_store.MIN_PART)}; give --bs 8M or more (or leave --bs out: 8 MiB)")
    if parts > object_store.MAX_PARTS:
        raise UsageError(f"--bs {format_size(bs)}: the largest object ({format_size(largest)}) would be "
                         f"{parts:,} parts, and S3 takes at most {object_store.MAX_PARTS:,}; give a larger --bs")


class PrefixLock:
    """This process's hold on a checkpoint prefix: the lock object, put only where none is, naming
    who holds it ({"gdsbench_checkpoint_lock": 1, "host", "pid", "started", "run"}), deleted at the
    end if it is still the version this process put."""

    def __init__(self, bucket: Bucket):
        self.bucket = bucket
        self.url = f"{bucket.directory}/{LOCK}"
        self.etag: str | None = None
        self.taken_over: str | None = None  # whose lock was taken over, in words

    def __enter__(self) -> PrefixLock:
        s3 = self.bucket.s3
        seen = object_store.head(s3, self.url)
        replacing = None
        if seen is not None:
            holder = manifest.parse(object_store.get_text(s3, self.url), LOCK_TAG)
            if holder is None:
                raise UsageError(f"DIR {self.bucket.directory}: its {LOCK} was not written by gdsbench; remove it, or "
                                 "give another prefix")
            if not _dead_here(holder):
                raise self._busy(holder)
            replacing = seen["ETag"]
            self.taken_over = f"pid {holder.get('pid')} on {holder.get('host')}, gone"
        self.etag = object_store.put_new(s3, self.url, self._record(None), replacing)
        if self.etag is None:  # another run put it between the look and the put, or this one's answer was lost
            holder = manifest.parse(object_store.get_text(s3, self.url), LOCK_TAG) or {}
            if not _is_this_process(holder):
                raise self._busy(holder)
            self.etag = (object_store.head(s3, self.url) or {}).get("ETag")
        return self

    def _record(self, run_path: str | None) -> str:
        return json.dumps({LOCK_TAG: 1, "host": socket.gethostname(), "boot": _boot_id(),
                           "pid": os.getpid(), "started": object_store.process_start(os.getpid()), "run": run_path})

    def _busy(self, holder: dict) -> UsageError:
        return UsageError(f"DIR {self.bucket.directory}: another gdsbench checkpoint (pid {holder.get('pid', '?')} on "
                          f"{holder.get('host', '?')}, run {holder.get('run') or '?'}) is writing checkpoints there now; "
                          f"wait for it to end, or give another prefix (if that run died on another host, remove "
                          f"{self.url} yourself)")

    def say(self, run_path: str | None) -> None:
        """Name this process's run folder, once made, in the lock."""
        etag = object_store.put_new(self.bucket.s3, self.url, self._record(run_path), self.etag)
        if etag is None:
            raise UsageError(f"{self.url}: replaced by another program while this run held it; the run stops")
        self.etag = etag

    def __exit__(self, *exc) -> None:
        if self.etag is not None:
            object_store.delete_version(self.bucket.s3, self.url, self.etag)
            self.etag = None


def _boot_id() -> str | None:
    """This host's boot, as the kernel names it: with the hostname, one running system (two containers
    may share a hostname; a reboot reuses pids)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return None


def _here(holder: dict) -> bool:
    return holder.get("host") == socket.gethostname() and holder.get("boot") == _boot_id()


def _is_this_process(holder: dict) -> bool:
    return _here(holder) and holder.get("pid") == os.getpid() and \
        holder.get("started") == object_store.process_start(os.getpid())


def _dead_here(holder: dict) -> bool:
    """Whether a lock's holder was a process of this running system that is gone (killed; its pid and
    start name one process, whatever the pid is used for later)."""
    if not _here(holder):
        return False
    try:
        pid = int(holder.get("pid", 0))
    except (TypeError, ValueError):
        return False
    return pid > 0 and object_store.process_start(pid) != holder.get("started")
