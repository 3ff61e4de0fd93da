"""The target seam: a new kind of target is one Python file in
gdsbench/system/targets/, and planning, the page-cache handling and a sweep's
record reach it only through the Target protocol."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from gdsbench.execution import runner
from gdsbench.job.errors import UsageError
from gdsbench.job.spec import JobSpec
from gdsbench.sweep.grid import SweepSpec
from gdsbench.sweep.session import start
from gdsbench.system import targets
from gdsbench.system.targets.local_file import LocalFile
from gdsbench.system.targets.remote_object import RemoteObject

# A kind of target that exists only in this test: "toy://NAME?size=BYTES", an
# object with no local file (as a remote one will be). It reads nothing itself;
# it is here to prove the rest of gdsbench plans against it through the protocol.
TOY_KIND = '''
from dataclasses import dataclass, field

from gdsbench.job.errors import UsageError

CALLS = []


class Held:
    def evict(self):
        CALLS.append("evict")

    def cached_fraction(self):
        return None  # nothing cached on this host

    def close(self):
        CALLS.append("close")


@dataclass(frozen=True)
class Toy:
    OPENED_AS = "local file"  # planned as if psync read it; nothing here ever runs it
    path: str
    size: int
    kind: str = "toy"
    device: object = None
    mount: object = None

    @classmethod
    def claims(cls, name):
        return name.startswith("toy://")

    @classmethod
    def absolute(cls, name):
        return name

    @classmethod
    def open(cls, name, need=0, asking=None):  # asking: how a server is asked (--timeout...); none here
        return cls(name, int(name.rsplit("size=", 1)[1]))

    @property
    def where(self):
        return "a toy object"

    def identity(self):
        return {"size": self.size, "etag": "e1"}

    def check_direct(self, bs, offset):
        CALLS.append(("check_direct", bs, offset))

    def check_uncached(self):
        CALLS.append(("check_uncached",))

    def direct_alignment(self):
        return 1

    def hold(self, offset, length, lock=None):
        CALLS.append(("hold", offset, length))
        return Held()

    def check_may_write(self):
        raise UsageError("toy objects are not written")

    def wrote(self):
        pass

    def folder(self):
        return None

    def has_pattern(self, offset):
        return True

    def created_by_gdsbench(self):
        return False

    def describe(self):
        return {"path": self.path, "kind": self.kind, "size_bytes": self.size, "served_by": "toy"}


TARGET = Toy
'''


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy kind, dropped in as one file on the targets package's path."""
    (tmp_path / "toy_kind.py").write_text(textwrap.dedent(TOY_KIND))
    monkeypatch.setattr(targets, "__path__", [*targets.__path__, str(tmp_path)])
    yield
    import sys

    sys.modules.pop("gdsbench.system.targets.toy_kind", None)


def toy_calls():
    import sys

    return sys.modules["gdsbench.system.targets.toy_kind"].CALLS


def test_every_kind_answers_the_protocol(toy):
    kinds = targets.kinds()
    assert LocalFile in kinds and RemoteObject in kinds and "Toy" in {k.__name__ for k in kinds}
    for kind in kinds:
        missing = [m for m in ("OPENED_AS", "claims", "absolute", "open", "where", "identity", "check_direct", "check_uncached",
                               "direct_alignment",
                               "hold", "has_pattern", "created_by_gdsbench", "describe") if not hasattr(kind, m)]
        assert not missing, (kind, missing)


def test_a_name_goes_to_the_kind_that_claims_it(toy, pattern_file):
    assert isinstance(targets.target_for(pattern_file), LocalFile)
    assert type(targets.target_for("toy://bucket/x?size=4096")).__name__ == "Toy"
    assert isinstance(targets.target_for("toy://bucket/x?size=4096"), targets.Target)


def test_a_url_no_kind_reads_is_refused_naming_it():
    with pytest.raises(UsageError, match=r"PATH nope://x: no kind of target reads this name"):
        targets.target_for("nope://x")


def test_a_new_kind_is_planned_through_the_protocol_alone(toy):
    """The region, O_DIRECT and --verify checks ask the target, not the operating system."""
    plan = runner.plan(JobSpec(path="toy://bucket/x?size=8388608", engine="psync", bs=1 << 20, direct=True,
                               verify=True, io_size=1 << 20))
    assert plan.spec.size == 8 << 20 and plan.target.where == "a toy object"
    assert ("check_direct", 1 << 20, 0) in toy_calls()
    with pytest.raises(UsageError, match=r"--size 16 MiB: the region runs past the end of toy://"):
        runner.plan(JobSpec(path="toy://bucket/x?size=8388608", engine="psync", size=16 << 20))


def test_held_regions_ask_the_target_and_skip_what_has_no_cache(toy, pattern_file):
    toy_target = targets.target_for("toy://b/k?size=4096")
    local = targets.target_for(pattern_file)
    with targets.HeldRegions([(toy_target, 0, 4096), (local, 0, local.size)]) as held:
        held.evict()
        fraction = held.cached_fraction()  # the local file's alone: the toy has no cache here
    assert fraction is not None and 0.0 <= fraction <= 1.0
    assert toy_calls()[-3:] == [("hold", 0, 4096), "evict", "close"]
    with targets.HeldRegions([(toy_target, 0, 4096)]) as held:
        assert held.cached_fraction() is None


def test_a_sweep_records_a_new_kind_as_it_describes_itself(toy, tmp_path):
    store, _, _ = start(SweepSpec(grid={"bs": ["1M", "2M"]}, fixed={"path": "toy://b/k?size=8388608",
                                                                   "engine": "psync", "io_size": "2M"}),
                        str(tmp_path / "results"))
    info = json.loads((Path(store.path) / "run.json").read_text())
    assert info["environment"]["targets"]["toy://b/k?size=8388608"]["served_by"] == "toy"
    assert info["target_files"] == {"toy://b/k?size=8388608": {"size": 8388608, "etag": "e1"}}
