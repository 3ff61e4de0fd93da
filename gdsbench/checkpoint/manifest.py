"""A checkpoint folder's manifest, gdsbench-checkpoint.json, wherever the folder is (a directory:
on_disk.py; an S3 prefix: in_bucket.py). It is written before any of the checkpoint's files
(complete: false, naming the files each rank writes) and again once every rank has written them
(complete: true, with what each file was left as in `written`: a file's size, inode and
modification time, an object's size and ETag). A checkpoint without a complete manifest is never
read back, and a folder is replaced only where its manifest says gdsbench wrote what is in it."""

from __future__ import annotations

import json

from gdsbench.job.errors import UsageError

NAME = "gdsbench-checkpoint.json"


def record(run, checkpoint: int, complete: bool, written: dict | None = None) -> dict:
    """The manifest of checkpoint k of a run (a session.CheckpointRun): the files each rank writes,
    and once complete, what each was left as (written: name -> its proof)."""
    out = {"gdsbench_checkpoint": 1, "complete": complete, "checkpoint": checkpoint, "model": run.model.to_dict(),
           "scale": run.scale, "files": {r: [[f.name, f.size] for f in run.files(r)] for r in range(run.ranks)}}
    if complete:
        out["written"] = written or {}
    return out


def parse(text: str | bytes | None, tag: str = "gdsbench_checkpoint") -> dict | None:
    """A manifest read back, or another record of gdsbench's tagged so (a lock's: its `tag`);
    None where it is not one."""
    if text is None:
        return None
    try:
        m = json.loads(text)
    except ValueError:
        return None
    return m if isinstance(m, dict) and m.get(tag) == 1 else None


def planned_sizes(m: dict) -> dict[str, int] | None:
    """The manifest's files, name -> size (None: a manifest damaged by hand)."""
    try:
        return {name: int(size) for files in m.get("files", {}).values() for name, size in files}
    except (TypeError, ValueError, AttributeError):
        return None


def proofs(m: dict) -> dict:
    """What each file was left as, where the checkpoint was completed ({}: not yet)."""
    written = m.get("written")
    return written if isinstance(written, dict) else {}


def describes(m: dict | None, run) -> bool:
    """Whether a manifest is of a complete checkpoint of this run's model, scale and ranks."""
    return bool(m and m.get("complete") is True and m.get("model") == run.model.to_dict() and m.get("scale") == run.scale
                and len(m.get("files", ())) == run.ranks)


def refusal(why: str, place: str) -> UsageError:
    """A folder not wholly gdsbench's, refused: `place` is what to give instead ("directory", "prefix")."""
    return UsageError(f"{why}; gdsbench removes only what it wrote, so it is left as it is: give another {place}, or "
                      "remove it yourself")
