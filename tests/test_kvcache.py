"""gdsbench kvcache: the KV bytes a token takes (as the reference's MODEL_CONFIGS
gives them), its users' seeded requests, LRU spill between the tiers, a run's
bytes against the arithmetic, only its own files touched, and bad input."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time

import pytest
from test_bad_input import assert_one_line_error

from gdsbench.kvcache.models import BUILT_IN
from gdsbench.kvcache.tiers import UNLIMITED, NoRoom, TieredCache
from gdsbench.kvcache.workload import users
from gdsbench.system import pattern


@pytest.fixture
def kvcache(gdsbench, tmp_path):
    """`gdsbench kvcache TIER ARGS --results RESULTS`, the storage tier in tmp_path/tier (made empty)."""
    (tmp_path / "tier").mkdir()

    def run(*args, tier=None):
        return gdsbench("kvcache", tier or tmp_path / "tier", *args, "--results", tmp_path / "results")
    return run


CHATBOTS = ("--model", "tiny-1b", "--seed", "4", "--generation-mode", "none")  # seed 4: three chatbot users


def test_kv_bytes_per_token_are_the_references():
    """kv-cache.py: layers x KV heads x (hidden / heads) x 2 x 2 bytes of float16."""
    assert BUILT_IN["llama3.1-8b"].bytes_per_token == 2 * 32 * 8 * 128 * 2 == 128 * 1024
    assert {name: m.bytes_per_token for name, m in BUILT_IN.items()} == {
        "tiny-1b": 24_576, "mistral-7b": 131_072, "llama2-7b": 524_288, "llama3.1-8b": 131_072,
        "llama3.1-70b-instruct": 327_680}


def test_users_are_the_references_for_a_seed_and_their_requests_the_same_from_the_same_seed():
    first = users(5, 7)
    assert [(u.kind.name, u.context, u.generation) for u in users(2, 42)] == [("document", 8122, 481),
                                                                           ("chatbot", 948, 144)]  # kv-cache.py's

    def requests(seed):
        return [[u.next_request() for _ in range(20)] for u in users(5, seed)]

    assert requests(7) == requests(7) and requests(7) != requests(8)
    for user, user_requests in zip(first, requests(7)):
        assert user.kind.context[0] <= user.context <= user.kind.context[1]
        for r in user_requests:
            assert user.context // 4 <= r.context_tokens <= user.context
            assert user.generation // 4 <= r.generate_tokens <= user.generation
            assert r.decode_reads == 1 + math.ceil(r.generate_tokens / 32)
            assert (r.previous_key is None) == (r.turn == 1)
    assert any(r.turn > 1 for u in requests(7) for r in u)  # conversations go on (0.8 a request)
    (single,) = users(1, 7, multi_turn=False)
    assert all(single.next_request().turn == 1 for _ in range(20))


def _written(cache: TieredCache, key: str, size: int):
    entry, moves = cache.store(key, size)
    for m in moves:
        cache.moved(m)
    cache.written(entry)
    return entry, [(m.entry.key, cache.names[m.source], "dropped" if m.to is None else cache.names[m.to]) for m in moves]


def test_lru_spills_the_least_recently_used_down_a_tier_and_drops_from_the_last():
    cache = TieredCache(["host", "storage"], [100, 150])
    assert _written(cache, "a", 60)[1] == [] and _written(cache, "b", 40)[1] == []
    cache.unpin(cache.lookup("a"))  # a read makes a the most recently used: b goes first
    entry, moves = _written(cache, "c", 30)
    assert entry.tier == 0 and moves == [("b", "host", "storage")]
    entry, moves = _written(cache, "d", 90)  # a and c leave host, oldest first; storage has room
    assert moves == [("a", "host", "storage"), ("c", "host", "storage")] and cache.used == [90, 130]
    entry, moves = _written(cache, "e", 120)  # too big for host: straight to storage, which drops its oldest
    assert entry.tier == 1 and moves == [("b", "storage", "dropped"), ("a", "storage", "dropped")]
    entry, moves = _written(cache, "f", 50)  # d moves down, and storage drops to take it first
    assert entry.tier == 0 and moves == [("c", "storage", "dropped"), ("e", "storage", "dropped"),
                                         ("d", "host", "storage")]
    assert cache.used == [50, 90] and cache.lookup("b") is None
    assert cache.moves == {("host", "storage"): 4, ("storage", "dropped"): 4}
    with pytest.raises(ValueError, match="no tier has room"):
        cache.store("g", 151)


def test_a_pinned_or_unwritten_entry_is_never_moved_under_its_reader():
    cache = TieredCache(["host", "storage"], [100, UNLIMITED])
    _written(cache, "a", 60)
    reading = cache.lookup("a")  # pinned while it is read
    entry, moves = cache.store("b", 60)  # host cannot make room: b goes to storage, a stays
    assert entry.tier == 1 and moves == [] and reading.tier == 0
    cache.unpin(reading)
    entry, moves = cache.store("c", 60)  # b is not written yet (ready unset): only a may move
    assert [(m.entry.key, m.to) for m in moves] == [("a", 1)] and entry.tier == 0


def test_a_run_stores_each_request_as_the_arithmetic_says_and_leaves_nothing_behind(kvcache, tmp_path):
    tier = tmp_path / "tier"
    (tier / "theirs.kv").write_bytes(b"not ours")
    res = kvcache(*CHATBOTS, "--users", "3", "--requests", "2", "--duration", "10m", "--json")
    assert res.code == 0, res.err
    f = json.loads(res.out)
    per_token = f["kv_bytes_per_token"]
    assert per_token == 24_576 and f["model"]["name"] == "tiny-1b" and f["users"] == 3
    assert f["requests_completed"] == 6 and f["tokens_per_s"] > 0 and 0 < f["duration_s"] < 600
    write, read = f["tiers"]["storage"]["write"], f["tiers"]["storage"]["read"]
    assert write["ops"] == 6 and write["bytes"] == f["context_tokens"] * per_token  # every entry: --host-mem 0
    assert read["bytes"] % per_token == 0 and read["ops"] > write["ops"]  # decode reads each entry again
    assert write["device"]["p95_ms"] <= write["total"]["p95_ms"]
    assert f["storage_read_bytes_per_s"] == pytest.approx(read["bytes"] / f["duration_s"])
    assert "O_DIRECT" in f["data_path"] and "fsync'd" in f["data_path"]
    assert sorted(os.listdir(tier)) == ["theirs.kv"]  # its own folder removed, the rest untouched
    assert (tier / "theirs.kv").read_bytes() == b"not ours"


def test_host_memory_takes_entries_first_and_spills_to_storage(kvcache, tmp_path):
    res = kvcache(*CHATBOTS, "--users", "3", "--requests", "3", "--duration", "10m",
                   "--host-mem", "20M", "--engine", "psync", "--buffered", "--json")
    assert res.code == 0, res.err
    f = json.loads(res.out)
    host = f["tiers"]["host"]
    assert host["write"]["ops"] >= 1 and "device" not in host["write"]
    assert "page-cache" in f["data_path"]
    if f["moves"]:  # what moved down was written there (moves are counted also in requests ended after the window)
        assert f["moves"][0]["from"] == "host" and f["tiers"]["storage"]["write"]["ops"] > 0
    assert os.listdir(tmp_path / "tier") == []


def test_the_storage_tier_reads_into_device_memory_on_the_cpu_stand_in(kvcache, tmp_path):
    res = kvcache(*CHATBOTS, "--users", "2", "--requests", "1", "--duration", "10m",
                   "--mode", "bounce", "--gpu-backend", "sim", "--json")
    assert res.code == 0, res.err
    f = json.loads(res.out)
    assert "SIMULATED device (CPU stand-in, not a GPU)" in f["data_path"]  # a CPU stand-in, said so: never a GPU measurement


@pytest.mark.parametrize("args, fragments", [
    (["--model", "gpt-5"], ["--model gpt-5", "llama3.1-8b"]),
    (["--gpu-mem", "1G"], ["--gpu-mem", "not built yet"]),
    (["--storage-budget", "0"], ["--storage-budget 0"]),
    (["--storage-budget", "1M"], ["--storage-budget 1 MiB", "largest KV entry", "raise it"]),
    (["--engine", "null"], ["--engine null", "psync or io_uring"]),
    (["--mode", "kvikio"], ["--mode kvikio"]),
    (["--host-mem", "100T"], ["--host-mem 100 TiB", "more than the memory available", "lower one of them"]),
    (["--mode", "gds", "--gpu-backend", "sim", "--qd", "8"], ["--qd 8", "cufile_batch or cufile_async",
                                                              "more --io-threads"]),
])
def test_bad_input_is_one_line(kvcache, tmp_path, args, fragments):
    assert_one_line_error(kvcache(*args), *fragments)
    assert os.listdir(tmp_path / "tier") == [] and not os.path.exists(tmp_path / "results")


def test_a_missing_or_remote_directory_is_one_line(gdsbench, tmp_path):
    assert_one_line_error(gdsbench("kvcache", tmp_path / "nope"), "not a directory")
    assert_one_line_error(gdsbench("kvcache", "s3://bucket/kv/"), "objects are not written by kvcache")


def test_ctrl_c_reports_what_was_counted_and_removes_the_runs_files(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "gdsbench", "kvcache", str(tmp_path), *CHATBOTS, "--users", "2",
                             "--duration", "600s", "--results", str(tmp_path / "results"), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(f.endswith(".kv") for _, _, fs in os.walk(tmp_path) for f in fs):
        time.sleep(0.05)  # until its first entry is written
    time.sleep(1)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    f = json.loads(out)
    assert f["interrupted"] is True and 0 < f["duration_s"] < 600
    assert os.listdir(tmp_path) == ["results"]  # the run saved, its entries removed
    (run,) = os.listdir(tmp_path / "results")
    assert json.loads((tmp_path / "results" / run / "run.json").read_text())["status"] == "interrupted"


def test_a_failed_move_ends_the_run_in_one_line_and_no_user_waits_forever(kvcache, tmp_path, monkeypatch):
    """A write below (a full disk, say) fails while other users may be waiting for the entry it moves:
    the run ends with that error, every user stops, and the run's files are removed."""
    from gdsbench.job.errors import IoFailure
    from gdsbench.kvcache import session

    def failing(self, move, log, scratch):
        if move.to is not None:
            raise IoFailure("injected: the write below failed")
        return moving(self, move, log, scratch)

    moving = session.KVSession._move
    monkeypatch.setattr(session.KVSession, "_move", failing)
    res = kvcache(*CHATBOTS, "--users", "4", "--requests", "20", "--duration", "10m",
                   "--host-mem", "30M")
    assert res.code == 3 and "injected: the write below failed" in res.err, res.err
    assert os.listdir(tmp_path / "tier") == []


def test_a_small_storage_budget_waits_for_room_instead_of_failing(kvcache, tmp_path):
    """More users than the budget has room for entries being read: each waits for a movable entry."""
    res = kvcache(*CHATBOTS, "--users", "8", "--requests", "3", "--duration", "10m",
                   "--storage-budget", "200M", "--io-threads", "2", "--json")
    assert res.code == 0, res.err
    assert json.loads(res.out)["budgets_bytes"]["storage"] == 200 << 20
    assert os.listdir(tmp_path / "tier") == []
    cache = TieredCache(["host", "storage"], [0, 100])
    entry, _ = cache.store("a", 60)  # being written: it cannot make room yet
    with pytest.raises(NoRoom):
        cache.store("b", 60)
    cache.written(entry)
    assert [(m.entry.key, m.to) for m in cache.store("b", 60)[1]] == [("a", None)]


def test_a_run_is_saved_with_its_page_and_report_reads_it(kvcache, gdsbench, tmp_path):
    res = kvcache(*CHATBOTS, "--users", "2", "--requests", "2", "--duration", "10m", "--host-mem", "20M",
                  "--name", "kv")
    assert res.code == 0, res.err
    (run,) = (tmp_path / "results").iterdir()
    info = json.loads((run / "run.json").read_text())
    assert info["kind"] == "kvcache" and info["status"] == "complete" and info["figures"]["requests_completed"] == 4
    rows = [json.loads(line) for line in (run / "points.jsonl").read_text().splitlines()]
    assert {(r["tier"], r["op"]) for r in rows} >= {("storage", "write"), ("host", "write")}
    page = gdsbench("report", run)
    assert page.code == 0 and "answer: " in page.out and "tokens/s" in page.out, page.err
    assert (run / "report" / "report.html").read_text().count("<tr>") >= 8


@pytest.mark.parametrize("mode", ["cpu", "bounce", "gds"])
def test_each_entry_a_writer_writes_after_a_reseed_is_its_own_bytes(tmp_path, mode):
    """The movers' writer refilled from each entry's own seed (pattern.file_seed): block k of one entry
    is not block k of another (a deduplicating store would keep one), and both read back as the pattern.
    In the GPU modes on the CPU stand-in: bounce copies the refilled buffers to the device, gds refills
    its host shadow and puts it in device memory."""
    from gdsbench.execution import loops
    from gdsbench.job.spec import JobSpec

    paths = [str(tmp_path / f"entry{i}.kv") for i in range(2)]
    gpu = {} if mode == "cpu" else {"mode": mode, "gpu_backend": "sim"}
    spec = JobSpec(path=paths[0], engine="psync", bs=16384, direct=mode != "cpu", runtime_ns=0, **gpu)  # resolved:
    # on the stand-in psync stands in for cuFile's synchronous API
    (writer,) = loops.sample_writers(spec.replace(rw="write"), 0, 1)
    (reader,) = loops.sample_readers(spec.replace(rw="read", verify=True), 0, 1)
    for path in paths:
        open(path, "wb").close()
        writer.reseed(pattern.file_seed(1, path))
        assert writer.write(path, 0, 64 * 1024)[0] == 64 * 1024
        assert reader.read(path, 0, 64 * 1024)[0] == 64 * 1024
    assert reader.verify_mismatches == 0 and reader.verified_blocks == 2 * 16
    blocks = [open(p, "rb").read(4096)[24:4088] for p in paths]  # the payload, its offset and checksum words aside
    assert blocks[0] != blocks[1]
    with pytest.raises(Exception, match="writes nothing"):
        reader.reseed(2)


def test_the_native_writer_reads_nothing_and_survives_a_refused_write(tmp_path):
    """A write job's SampleReader: reading with it would spoil the pattern its writes restamp (refused);
    a write of a part of a 4 KiB block is refused before anything is queued, and the writer then
    writes and the blocks read back whole."""
    from gdsbench import _native
    from gdsbench.execution import loops
    from gdsbench.job.spec import JobSpec

    path = str(tmp_path / "entry.kv")
    open(path, "wb").close()
    spec = JobSpec(path=path, engine="io_uring", bs=16384, qd=4, direct=False, runtime_ns=0)
    (writer,) = loops.sample_writers(spec.replace(rw="write"), 0, 1)
    (reader,) = loops.sample_readers(spec.replace(rw="read", verify=True), 0, 1)
    with pytest.raises(Exception, match="reads nothing"):
        writer.read(path, 0, 4096)
    with pytest.raises(Exception, match="whole 4096-byte blocks"):
        writer.write(path, 0, 3 * 16384 + 5000)
    assert writer.write(path, 0, 128 * 1024)[0] == 128 * 1024
    assert reader.read(path, 0, 128 * 1024)[0] == 128 * 1024 and reader.verify_mismatches == 0
    assert isinstance(reader, _native.SampleReader)


def test_a_sessions_entries_on_storage_are_each_their_own_bytes(tmp_path, monkeypatch):
    """A whole session: every entry it writes to storage carries its own payload (its key's seed),
    so no two entries share a block a deduplicating store could keep once."""
    from gdsbench.job.spec import JobSpec
    from gdsbench.kvcache import session
    from gdsbench.kvcache.models import model_named

    payloads: dict[str, bytes] = {}
    write = session.KVSession._write

    def write_and_look(self, tier, key, size, log):
        write(self, tier, key, size, log)
        if tier == session.STORAGE:
            with open(self._path(key), "rb") as f:
                payloads[key] = f.read(4096)[24:4088]  # the payload, its offset and checksum words aside

    monkeypatch.setattr(session.KVSession, "_write", write_and_look)
    spec = JobSpec(path=str(tmp_path / "probe.kv"), engine="io_uring", rw="write", bs=1 << 20, fsync_end=True,
                   runtime_ns=0)
    run = session.KVRun(model_named("tiny-1b"), 3, 600.0, str(tmp_path), spec.replace(rw="read", fsync_end=False),
                        spec, seed=4, io_threads=3, requests=2)
    kv = session.KVSession(run)
    try:
        kv.run_users()
    finally:
        kv.close()
    assert kv.failure is None and len(payloads) == 6  # three users, two requests each: every entry on storage
    assert len(set(payloads.values())) == len(payloads)
