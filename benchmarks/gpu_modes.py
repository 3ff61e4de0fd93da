#!/usr/bin/env python3
"""Storage into GPU memory, by every transfer mode, beside the ceilings
measured in the same run: pinned host-to-device copies (cupy) and the
storage's own read rate into host memory (the cpu mode).

For each mode it first verifies the data that landed in GPU memory, then
measures bandwidth, IOPS, p50/p99 latency, the depth really reached (reads in
flight, Little's law) and CPU seconds per GB (the whole process over the
measured window, worker threads beside it) at each block size. Then a cold
read of one 1 GiB file, three times, alternating: kvikio's own call
(CuFile.read of the whole file, as kvikio's single_node_io benchmark times it),
gdsbench's kvikio mode making the same call, and gdsbench's gds mode reading
it in kvikio's task size on as many threads; the page cache is dropped before
each read.

Targets: bounce reaches 90% of min(storage->host, host->device) at 1 MiB and
above; gds and kvikio reach 95% of kvikio's own cold read; --verify is clean
in every mode. A mode that cannot run here gets a row saying why.

Every measurement runs in a child process with a time limit (cuFile can hang,
or crash, where its driver is unusable), with its own cuFile log
(CUFILE_LOGFILE_PATH). A gds failure is retried once with cuFile's
compatibility mode forced, labelled so. The table and JSON are rewritten after
every point: a timeout or crash loses nothing measured before it.

    python benchmarks/gpu_modes.py --file /data/gdsbench.dat       # on a GPU machine
    python benchmarks/gpu_modes.py --gpu-backend sim --quick       # tests this script on a CPU:
                                                                   # results are SIMULATED, not a GPU
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import select
import signal
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import RESULTS, kill_session, markdown_table, write_outputs  # noqa: E402

import gdsbench  # noqa: E402
from gdsbench import _native  # noqa: E402
from gdsbench.job.modes import MODES  # noqa: E402
from gdsbench.job.units import format_duration, format_rate, format_size, parse_size  # noqa: E402
from gdsbench.system import gpu, pagecache  # noqa: E402

SIZES = ["4K", "128K", "1M", "16M"]
COLD_BYTES = 1 << 30
COLD_REPEATS = 3
KVIKIO_TASK_SIZE = 4 << 20  # kvikio's default task size
BOUNCE_TARGET, COLD_TARGET = 0.90, 0.95


# ---- the child side: one process per measurement, one JSON line per event ----

def emit(**event) -> None:
    print(json.dumps(event, default=str), flush=True)


def error_text(e: BaseException) -> str:
    return str(e) if isinstance(e, gdsbench.GdsbenchError) else f"{type(e).__name__}: {e}"


def point_record(r: gdsbench.Result) -> dict:
    return {"summary": r.summary(), "warnings": r.warnings, "threads": r.spec.threads, "qd": r.spec.qd,
            "engine": r.spec.engine}


def child_mode(task: dict) -> None:
    """Verify the mode's data at 1 MiB, then measure it at each block size."""
    job = task["job"]
    try:
        spec = gdsbench.JobSpec(**dict(job, bs=1 << 20, verify=True, runtime_ns=None, ramp_ns=0,
                                       io_size=task["verify_bytes"]))
        check = gdsbench.run(spec, record_environment=False)
        emit(kind="verified", blocks=check.verified_blocks, bad=check.verify_mismatches, data_path=check.data_path)
    except gdsbench.GdsbenchError as e:  # what this machine lacks: a reason, not a failure of gdsbench
        emit(kind="cannot", message=error_text(e))
        return
    except Exception as e:  # noqa: BLE001 - e.g. a CUDA error: reported, the other modes still run
        emit(kind="failed", stage="verify", message=error_text(e))
        return
    for text in task["sizes"]:
        try:
            r = gdsbench.run(gdsbench.JobSpec(**dict(job, bs=parse_size(text))), record_environment=False)
            emit(kind="point", bs=text, data_path=r.data_path, **point_record(r))
        except Exception as e:  # noqa: BLE001 - one failed point must not cost the others
            emit(kind="point_failed", bs=text, message=error_text(e))


def child_pairs(task: dict) -> None:
    """Storage into host memory (A: the storage job) against the same reads
    bounced into GPU memory (B: the bounce job), A B A B ... A at each size, so
    each B sits between two A's taken just before and after it: a drifting or
    noisy disk cancels."""
    for text in task["sizes"]:
        for i in range(2 * task["pairs"] + 1):
            role = "storage" if i % 2 == 0 else "bounce"
            r = gdsbench.run(gdsbench.JobSpec(**dict(task[role], bs=parse_size(text))), record_environment=False)
            emit(kind="pair_run", bs=text, role=role, bytes_per_s=r.bandwidth)


def h2d_rate(nbytes: int, total: int = 256 << 20) -> float:
    """Pinned host -> device cudaMemcpyAsync bandwidth at one copy size (bytes/s),
    the median of 5 bursts of about `total` bytes each."""
    import cupy

    pinned = cupy.cuda.alloc_pinned_memory(nbytes)
    dev = cupy.empty(nbytes, dtype=cupy.uint8)
    stream = cupy.cuda.Stream(non_blocking=True)
    copies = max(1, min(total // nbytes, 16384))  # small copies: Python's call overhead, not the link, sets the pace
    rates = []
    for _ in range(6):
        start = time.perf_counter()
        for _ in range(copies):
            cupy.cuda.runtime.memcpyAsync(dev.data.ptr, pinned.ptr, nbytes, cupy.cuda.runtime.memcpyHostToDevice,
                                          stream.ptr)
        stream.synchronize()
        rates.append(nbytes * copies / (time.perf_counter() - start))
    return statistics.median(rates[1:])  # the first burst warms up


def child_h2d(task: dict) -> None:
    for text in task["sizes"] + ["64M"]:
        emit(kind="h2d", bs=text, bytes_per_s=h2d_rate(parse_size(text)))


def drop_caches(path: str) -> str:
    """Drop the file's pages (and, as root, the whole page cache): what was done, in words."""
    pagecache.evict(path, 0, os.path.getsize(path))
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("1\n")
        return "file pages dropped (fadvise) and the page cache (drop_caches)"
    except OSError:
        return "file pages dropped (fadvise)"


def child_cold(task: dict) -> None:
    """One cold read of the whole file by one side of the comparison."""
    path, threads, side = task["path"], task["threads"], task["side"]
    size = os.path.getsize(path)
    dropped = drop_caches(path)
    cached = pagecache.cached_fraction(path, 0, size)
    if side == "reference":  # kvikio's own call, timed as single_node_io times its read: read and close
        import cupy
        import kvikio
        import kvikio.defaults

        from gdsbench.execution import kvikio_mode

        kvikio.defaults.set({"num_threads": threads})
        data = cupy.empty(size, dtype=cupy.uint8)
        monitor = kvikio.SummaryMonitor() if hasattr(kvikio, "SummaryMonitor") else None
        f = kvikio.CuFile(path, "r")
        start = time.perf_counter()
        got = f.read(data)
        f.close()
        seconds = time.perf_counter() - start
        if got != size:
            raise RuntimeError(f"kvikio read {got} of {size} bytes")
        backends = kvikio_mode.backend_shares(monitor.get()) if monitor else None
        emit(kind="cold", side=side, bytes_per_s=size / seconds, cached_before=cached, dropped=dropped,
             data_path=kvikio_mode.compat_description(kvikio, size, False, backends))
        return
    if side == "kvikio":  # the same call through gdsbench's kvikio mode; kvikio's own flags (no O_DIRECT)
        spec = gdsbench.JobSpec(path=path, mode="kvikio", bs=size, qd=1, kvikio_threads=threads, direct=False,
                                io_size=size)
    else:  # gds: the same bytes in kvikio's task size, one slice per thread
        spec = gdsbench.JobSpec(path=path, mode="gds", bs=KVIKIO_TASK_SIZE, threads=threads, io_size=size)
    r = gdsbench.run(spec, record_environment=False)
    emit(kind="cold", side=side, bytes_per_s=r.bandwidth, cached_before=r.cached_fraction, dropped=dropped,
         data_path=r.data_path, **point_record(r))


def child_status(task: dict) -> None:
    emit(kind="status", status=gpu.status())


CHILDREN = {"mode": child_mode, "pairs": child_pairs, "h2d": child_h2d, "cold": child_cold, "status": child_status}


def child_main(task: dict) -> int:
    try:
        CHILDREN[task["kind"]](task)
    except Exception as e:  # noqa: BLE001 - the parent records it beside the measurements
        emit(kind="failed", stage=task["kind"], message=error_text(e))
    return 0


# ---- the parent side: plans, runs each child under a deadline, writes the table ----

class Children:
    """Runs children one at a time, each in its own session with its own
    cuFile log, killed at its limit or at the run's deadline."""

    def __init__(self, log_dir: str, deadline: float):
        self.log_dir, self.deadline, self.current = log_dir, deadline, None
        os.makedirs(log_dir, exist_ok=True)

    def run(self, label: str, task: dict, limit: float, on_event, env: dict | None = None) -> dict:
        """Stream the child's events to on_event; return how it ended."""
        left = self.deadline - time.monotonic()
        if left < 5:
            return {"ended": "not run: the run's time budget is spent"}
        name = label.replace(" ", "-").replace("(", "").replace(")", "")
        cufile_log = os.path.join(self.log_dir, f"cufile-{name}.log")
        stderr_path = os.path.join(self.log_dir, f"stderr-{name}.log")
        child_env = dict(os.environ, CUFILE_LOGFILE_PATH=cufile_log, PYTHONUNBUFFERED="1", **(env or {}))
        started = time.monotonic()
        stop_at = started + min(limit, left)
        with open(stderr_path, "w") as err:
            proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", json.dumps(task)],
                                    stdout=subprocess.PIPE, stderr=err, env=child_env, start_new_session=True,
                                    text=True)
            self.current = proc
            timed_out = False
            try:
                while True:
                    wait = stop_at - time.monotonic()
                    if wait <= 0:
                        timed_out = True
                        break
                    ready, _, _ = select.select([proc.stdout], [], [], wait)
                    if not ready:
                        continue
                    line = proc.stdout.readline()
                    if not line:
                        break
                    try:
                        event = json.loads(line)
                    except json.JSONDecodeError:  # something else printed to stdout: keep it as text
                        event = {"kind": "text", "text": line.rstrip()}
                    on_event(event)
            finally:  # also when this script is stopped: no child outlives it
                self.kill()
            code = proc.wait()
        seconds = time.monotonic() - started
        if timed_out:
            ended = f"KILLED after {seconds:.0f} s (its limit)"
        elif code < 0:
            ended = f"CRASHED: killed by signal {signal.Signals(-code).name}"
        else:
            ended = "exited" if code == 0 else f"exited with {code}"
        outcome = {"ended": ended, "seconds": round(seconds, 1), "stderr_tail": tail(stderr_path, 12),
                   "cufile_log": os.path.basename(cufile_log), "cufile_log_tail": tail(cufile_log, 15)}
        return outcome

    def kill(self) -> None:
        if self.current and self.current.poll() is None:
            kill_session(self.current.pid)


def tail(path: str, lines: int) -> list[str]:
    try:
        with open(path, errors="replace") as f:
            return [line.rstrip() for line in f.readlines()[-lines:]]
    except OSError:
        return []


def platform_facts(path: str) -> dict:
    """What decides whether cuFile can take the file, read without touching CUDA."""
    def findmnt() -> str:
        try:
            return subprocess.run(["findmnt", "-T", path, "-o", "TARGET,SOURCE,FSTYPE,OPTIONS", "-n"],
                                  capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"findmnt failed: {e}"

    def loads(name: str) -> str:
        try:
            ctypes.CDLL(name)
            return "loads"
        except OSError as e:
            return f"does not load: {e}"

    engines = {e["name"]: e["unavailable"] or "available" for e in _native.engines()}
    return {
        "file_mount": findmnt(),
        "run_udev_data": os.path.isdir("/run/udev/data"),
        "libudev": loads("libudev.so.1"),
        "libmount": loads("libmount.so.1"),
        "nvidia_fs": gpu.nvidia_fs(),
        "cufile_json": gpu.cufile_config(),
        "cufile_env": {k: v for k, v in os.environ.items() if k.startswith(("CUFILE_", "KVIKIO_"))},
        # a VM without udevd has no /run/udev/data, and cuFile cannot register files without it;
        # scripts/device_check.sh then writes the two properties cuFile asks for, and says so here
        "udev_data_written_by_script": os.environ.get("GDSBENCH_UDEV_WRITTEN"),
        "engines": engines,
    }


def plan_jobs(args, io_uring: str) -> tuple[dict, str]:
    """Each mode's job options (JobSpec fields) and a note on how parallelism was had."""
    common = dict(path=args.file, pattern="seq", runtime_ns=int(args.runtime * 1e9), ramp_ns=int(args.ramp * 1e9),
                  gpu_backend=args.gpu_backend)
    t, qd = args.threads, args.qd
    if io_uring == "available":
        host = dict(threads=t, qd=qd, engine="io_uring")
        note = f"cpu and bounce modes: io_uring, {t} threads x QD{qd}"
    else:  # no io_uring here: the same reads in flight, from threads
        host = dict(threads=t * qd, qd=1, engine="psync")
        note = f"io_uring UNAVAILABLE here ({io_uring}): cpu and bounce modes use psync with {t * qd} threads in place of depth"
    jobs = {
        "cpu": dict(common, mode="cpu", **host),
        "bounce": dict(common, mode="bounce", **host),
        "cached-bounce": dict(common, mode="cached-bounce", **host),
        "gds": dict(common, mode="gds", threads=t * qd),  # cuFile has no queue depth: threads
        "kvikio": dict(common, mode="kvikio", qd=qd, kvikio_threads=t * 2),
    }
    note += (f"; gds: {t * qd} threads at QD1 (gds batch and gds async: {t} threads x QD{qd}); "
             f"kvikio: {qd} preads in flight on a pool of {t * 2} threads "
             f"(reads under kvikio's gds_threshold run synchronously inside pread: see 'in flight')")
    return jobs, note


def fmt_cpu(s: dict) -> str:
    if s.get("cpu_s_per_gb") is None:
        return "-"
    return f"{s['cpu_s_per_gb']:.3f} ({s['worker_cpu_s_per_gb']:.3f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--file", default="results/scratch/gpu_modes.dat", help="test file (prepared if absent)")
    ap.add_argument("--file-size", default="4G")
    ap.add_argument("--runtime", type=float, default=1.5, help="seconds measured per point")
    ap.add_argument("--ramp", type=float, default=0.5)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--qd", type=int, default=8)
    ap.add_argument("--budget", type=float, default=200, help="seconds for the whole run; what is left is skipped")
    ap.add_argument("--gpu-backend", default="cuda", help="cuda, or sim to test this script without a GPU")
    ap.add_argument("--quick", action="store_true", help="small file, short runs, 1M only (a smoke test)")
    ap.add_argument("--out", default=RESULTS, help="directory for the table (default results/benchmarks)")
    ap.add_argument("--log-dir", help="children's cuFile logs and stderr (default: OUT/gpu_modes-logs)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child_main(json.loads(args.child))

    started = time.monotonic()
    simulated = args.gpu_backend != "cuda"
    sizes, cold_bytes = SIZES, COLD_BYTES
    if args.quick:
        args.file_size, args.runtime, args.ramp, args.threads, args.qd, sizes = "64M", 0.3, 0.1, 2, 2, ["1M"]
        cold_bytes = 64 << 20
    children = Children(args.log_dir or os.path.join(args.out, "gpu_modes-logs"), started + args.budget)
    # a time limit from outside (timeout(1)) ends the child too, and the table is written
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    os.makedirs(os.path.dirname(os.path.abspath(args.file)), exist_ok=True)
    gdsbench.prepare(args.file, parse_size(args.file_size))
    cold_file = os.path.join(os.path.dirname(os.path.abspath(args.file)), "gpu_modes-cold.dat")
    gdsbench.prepare(cold_file, cold_bytes)

    facts = platform_facts(args.file)
    jobs, parallel_note = plan_jobs(args, facts["engines"].get("io_uring", "missing"))
    raw: dict = {"simulated": simulated, "platform": facts, "status": None, "ceilings": {}, "modes": {},
                 "cold": {"runs": [], "children": []}, "verdicts": {}}
    header = ["mode", "bs", "bandwidth", "IOPS", "p50", "p99", "in flight (threads x QD, engine)", "CPU-s/GB (workers)",
              "notes"]
    rows: list[list] = []
    paths: dict[str, str] = {}
    notes = [parallel_note,
             f"{args.runtime:g} s measured per point after a {args.ramp:g} s ramp; file {args.file_size} "
             f"({facts['file_mount'] or 'mount unknown'})",
             "in flight: IOPS x mean latency (Little's law), the depth the mode really ran at; bounce modes hold up to "
             "twice threads x QD, reads and copies to the GPU both in flight",
             "CPU-s/GB: the whole process over the measured window (CUDA, cuFile and kvikio threads included); "
             "in brackets the worker threads alone",
             "storage->host ceiling: the cpu rows; host->device ceiling: pinned cudaMemcpyAsync of the same size (cupy)"]
    if simulated:
        notes.insert(0, "SIMULATED: GPU memory is a CPU stand-in; these figures measure nothing about a GPU")
    if facts["udev_data_written_by_script"]:
        notes.append(f"udev: {facts['udev_data_written_by_script']}")
    name = "gpu_modes-simulated" if simulated else "gpu_modes"

    def save() -> None:  # after every point: whatever ends this run, what it measured is on disk
        raw["elapsed_s"] = round(time.monotonic() - started, 1)
        path_notes = [f"data path, {mode}: {text}" for mode, text in paths.items()]
        write_outputs(name, "Storage into GPU memory, by transfer mode", markdown_table(header, rows),
                      notes + path_notes, raw, directory=args.out,
                      tools=("kvikio", "cupy", "cuda", "cufile"))

    def message_row(label: str, bs: str, text: str) -> None:
        rows.append([label, bs] + ["-"] * 6 + [text])
        save()

    # ---- platform and ceilings ----
    def on_status(event):
        if event.get("kind") == "status":
            raw["status"] = event["status"]
    raw["status_child"] = children.run("status", {"kind": "status"}, 40, on_status)
    h2d: dict[str, float] = {}
    if simulated:
        notes.append("host->device ceiling: not measured (simulated)")
    else:
        def on_h2d(event):
            if event.get("kind") == "h2d":
                h2d[event["bs"]] = event["bytes_per_s"]
            elif event.get("kind") == "failed":
                raw["ceilings"]["h2d_error"] = event["message"]
        raw["ceilings"]["h2d_child"] = children.run("h2d", {"kind": "h2d", "sizes": sizes}, 30, on_h2d)
        raw["ceilings"]["h2d_bytes_per_s"] = h2d
        notes.append("pinned host->device (cupy): " + (", ".join(f"{k} {format_rate(v)}" for k, v in h2d.items())
                     or f"not measured: {raw['ceilings'].get('h2d_error') or raw['ceilings']['h2d_child']['ended']}"))
    save()

    # ---- every mode: verified, then measured ----

    def run_mode(label: str, mode: str, env: dict | None = None, extra: dict | None = None,
                 only: list[str] | None = None) -> bool:
        """Measure one mode; True if it verified and measured every size."""
        record = raw["modes"].setdefault(label, {"points": {}})
        verified = {"text": "not verified"}
        ok = [True]

        def on_event(event):
            kind = event.get("kind")
            if kind == "verified":
                record["verify"] = event
                verified["text"] = f"verified {event['blocks']} blocks, {event['bad']} bad"
                raw["verdicts"][f"{label} verify"] = event["bad"] == 0
                paths[label] = event["data_path"]
            elif kind == "point":
                s = event["summary"]
                record["points"][event["bs"]] = event
                paths[label] = event["data_path"]
                note = verified["text"]
                shown = [w for w in event["warnings"] if "kvikio mode: latency" not in w]
                if shown:
                    note += "; " + "; ".join(shown)[:160]
                rows.append([label, event["bs"], format_rate(s["bandwidth_bytes_per_s"]), f"{s['iops']:,.0f}",
                             format_duration(s["lat_p50_ns"]), format_duration(s["lat_p99_ns"]),
                             f"{s['in_flight']:.1f} ({event['threads']}x{event['qd']} {event['engine']})", fmt_cpu(s),
                             note])
                save()
            elif kind == "point_failed":
                ok[0] = False
                record["points"][event["bs"]] = event
                message_row(label, event["bs"], f"FAILED: {event['message']}")
            elif kind == "cannot":
                ok[0] = False
                record["error"] = event["message"]
                message_row(label, "-", f"cannot run here: {event['message']}")
            elif kind == "failed":
                ok[0] = False
                record["error"] = event["message"]
                message_row(label, "-", f"FAILED while {event['stage']}: {event['message']}")

        task = {"kind": "mode", "job": dict(jobs[mode], **(extra or {})), "sizes": only or sizes,
                "verify_bytes": min(64 << 20, parse_size(args.file_size))}
        record["child"] = outcome = children.run(label, task, 20 + len(task["sizes"]) * (args.runtime + args.ramp + 4),
                                                 on_event, env)
        if outcome["ended"] != "exited":
            ok[0] = False
            message_row(label, "-", f"{outcome['ended']}; stderr: {' | '.join(outcome.get('stderr_tail', [])[-2:])}"
                        [:300])
        return ok[0] and len(record["points"]) == len(task["sizes"])

    # The plan, most telling first should time run short. On the CPU stand-in
    # (--gpu-backend sim) only the modes it can stand in for run.
    def runnable(mode: str) -> bool:
        if simulated and not MODES[mode].simulated:
            message_row(mode, "-", "cannot run here: the simulation stands in for the bounce and gds paths only")
            return False
        return True

    large = [s for s in sizes if parse_size(s) >= 1 << 20]
    run_mode("cpu", "cpu")
    if run_mode("bounce", "bounce") and not simulated:
        bounce_against_storage(args, children, jobs["cpu"], jobs["bounce"], h2d, large, raw, rows, save)
    if runnable("gds"):
        compat = None
        if not run_mode("gds", "gds"):  # a second try with cuFile's compatibility mode forced, labelled so
            compat = {"CUFILE_FORCE_COMPAT_MODE": "true"}
            if not run_mode("gds (forced compat)", "gds", compat):
                compat = False
        if compat is not False:  # buffers registered with cuFile (--gds-register), where gds ran at all
            run_mode("gds registered", "gds", compat or None, {"gds_register": True}, large)
            # cuFile's batch and stream APIs (gdsio -x 6 and -x 5) at the host modes' threads x QD, registered
            queued = {"threads": args.threads, "qd": args.qd}
            run_mode("gds batch", "gds", compat or None, dict(queued, engine="cufile_batch"), large)
            run_mode("gds async", "gds", compat or None, dict(queued, engine="cufile_async"), large)
            # GPU memory from CUDA's VMM (cuMemCreate + cuMemMap) instead of cudaMalloc, registered
            run_mode("gds vmm registered", "gds", compat or None, {"gds_register": True, "gpu_memory": "vmm"}, large)
            # what counting cuFile's own statistics (level 3, on in every gds row above) costs: the gds row without
            run_mode("gds, cuFile stats off", "gds", {**(compat or {}), "GDSBENCH_CUFILE_STATS": "0"}, None, large)
    if runnable("kvikio"):
        run_mode("kvikio", "kvikio")
        if "error" not in raw["modes"]["kvikio"]:  # it could run here (a failed size is still the comparison's)
            cold_comparison(args, children, cold_file, raw, rows, notes, save)
        else:  # no verdict on what cannot run here: the kvikio row above says why
            message_row("kvikio cold read", "-", "not run: the kvikio mode cannot run here (its row says why)")
    run_mode("cached-bounce", "cached-bounce")

    save()
    raw["elapsed_s"] = round(time.monotonic() - started, 1)
    save()
    print(markdown_table(header, rows) + "\n\n" + "\n".join(notes))
    print(f"\ngpu_modes: {raw['elapsed_s']} s; verdicts: "
          + (", ".join(f"{k} {'PASS' if v else 'FAIL'}" for k, v in raw["verdicts"].items()) or "none"))
    return 0 if all(raw["verdicts"].values()) else 1


def bounce_ratios(cpu: list[float], bounce: list[float], h2d: float) -> list[float]:
    """Each bounce run / min(mean of the cpu runs either side, h2d), for runs taken cpu,
    bounce, cpu, bounce, ..., cpu."""
    return [b / min((cpu[i] + cpu[i + 1]) / 2, h2d) for i, b in enumerate(bounce)]


def bounce_ratio(cpu: list[float], bounce: list[float], h2d: float) -> float:
    """The judged figure: the median of bounce_ratios."""
    return statistics.median(bounce_ratios(cpu, bounce, h2d))


def bounce_against_storage(args, children: Children, storage_job: dict, bounce_job: dict, h2d: dict, sizes: list[str],
                           raw: dict, rows: list, save) -> None:
    """The bounce target, judged on alternating runs: bounce at each size over
    min(storage -> host from its two neighbouring cpu runs, pinned host -> device)."""
    pairs = 3
    runs: list[dict] = raw.setdefault("bounce_vs_storage", {"runs": []})["runs"]

    def on_event(event):
        if event.get("kind") == "pair_run":
            runs.append(event)
        elif event.get("kind") == "failed":
            raw["bounce_vs_storage"]["error"] = event["message"]
    task = {"kind": "pairs", "storage": storage_job, "bounce": bounce_job, "sizes": sizes, "pairs": pairs}
    limit = 15 + len(sizes) * (2 * pairs + 1) * (args.runtime + args.ramp + 1)
    raw["bounce_vs_storage"]["child"] = outcome = children.run("bounce vs storage", task, limit, on_event)
    for text in sizes:
        a = [r["bytes_per_s"] for r in runs if r["bs"] == text and r["role"] == "storage"]
        b = [r["bytes_per_s"] for r in runs if r["bs"] == text and r["role"] == "bounce"]
        key = f"bounce {text} vs min(storage, H2D)"
        if not b or len(a) < len(b) + 1 or not h2d.get(text):
            raw["verdicts"][key] = False
            why = ("no host->device ceiling was measured" if not h2d.get(text)
                   else raw["bounce_vs_storage"].get("error") or f"runs incomplete; child {outcome['ended']}")
            rows.append(["bounce vs storage", text] + ["-"] * 6 + [f"not judged: {why}"[:300]])
            continue
        each = bounce_ratios(a, b, h2d[text])
        ratio = statistics.median(each)
        passed = ratio >= BOUNCE_TARGET
        raw["verdicts"][key] = passed
        raw["bounce_vs_storage"].setdefault("ratios", {})[text] = each
        of_medians = statistics.median(b) / min(statistics.median(a), h2d[text])
        rows.append(["bounce vs storage", text, format_rate(statistics.median(b))] + ["-"] * 5 +
                    [f"median of {len(b)} per-run ratios {ratio:.0%} ({', '.join(f'{r:.3f}' for r in each)}: each bounce "
                     f"run over min(mean of the cpu runs either side, H2D {format_rate(h2d[text])})) "
                     f"{'PASS' if passed else 'FAIL'} (target >= {BOUNCE_TARGET:.0%}); the medians alone, bounce "
                     f"{format_rate(statistics.median(b))} / storage {format_rate(statistics.median(a))}, give "
                     f"{of_medians:.0%}"])
    save()


def cold_comparison(args, children: Children, path: str, raw: dict, rows: list, notes: list, save) -> None:
    """kvikio's own cold read against gdsbench's kvikio and gds modes, A B C A B C."""
    threads = args.threads * 2
    runs: dict[str, list[float]] = {"reference": [], "kvikio": [], "gds": []}
    size = format_size(os.path.getsize(path))
    for repeat in range(COLD_REPEATS):
        for side in runs:
            def on_event(event, side=side, repeat=repeat):
                if event.get("kind") == "cold":
                    runs[side].append(event["bytes_per_s"])
                    raw["cold"]["runs"].append(dict(event, repeat=repeat))
                elif event.get("kind") == "failed":
                    raw["cold"]["runs"].append(dict(event, side=side, repeat=repeat))
            outcome = children.run(f"cold {side} {repeat + 1}", {"kind": "cold", "side": side, "path": path,
                                                                  "threads": threads}, 25, on_event)
            raw["cold"]["children"].append(dict(outcome, side=side, repeat=repeat))
            save()
    reference = runs["reference"]

    def spread(values):
        return f"{statistics.mean(values) and (max(values) - min(values)) / statistics.mean(values):.0%}"

    def paths_of(side):
        seen = {r.get("data_path") for r in raw["cold"]["runs"] if r.get("side") == side and r.get("data_path")}
        return "; ".join(sorted(seen))

    if not reference:
        failures = [r.get("message") for r in raw["cold"]["runs"] if r.get("side") == "reference" and r.get("message")]
        why = failures[0] if failures else raw["cold"]["children"][0]["ended"]
        rows.append(["kvikio cold read", size] + ["-"] * 6 + [f"no reference: {why}"[:300]])
        raw["verdicts"]["gds vs kvikio cold read"] = raw["verdicts"]["kvikio vs kvikio cold read"] = False
        save()
        return
    ref = statistics.mean(reference)
    rows.append(["kvikio cold read", size, format_rate(ref)] + ["-"] * 5 +
                [f"kvikio.CuFile.read of the whole file, {threads} threads, mean of {len(reference)}, spread "
                 f"{spread(reference)}"])
    notes.append(f"data path, kvikio cold read (reference): {paths_of('reference')}")
    for side in ("kvikio", "gds"):
        values = runs[side]
        key = f"{side} vs kvikio cold read"
        if not values:
            failures = [r.get("message") for r in raw["cold"]["runs"] if r.get("side") == side and r.get("message")]
            raw["verdicts"][key] = False
            rows.append([f"{side} cold read", size] + ["-"] * 6 + [f"FAILED: {(failures or ['no result'])[0]}"[:300]])
            continue
        ratio = statistics.mean(values) / ref
        raw["verdicts"][key] = ratio >= COLD_TARGET
        what = ("the same single CuFile.read, made through gdsbench's kvikio mode: this shows the wrapper costs "
                "nothing, not how the kvikio rows above compare" if side == "kvikio" else
                "gdsbench's gds mode reading the whole file")
        rows.append([f"{side} cold read", size, format_rate(statistics.mean(values))] + ["-"] * 5 +
                     [f"{ratio:.3f} of kvikio's {'PASS' if ratio >= COLD_TARGET else 'FAIL'} (target >= "
                      f"{COLD_TARGET:.2f}); mean of {len(values)}, spread {spread(values)}; {what}"])
        notes.append(f"data path, {side} cold read: {paths_of(side)}")
    for bs, point in raw["modes"].get("kvikio", {}).get("points", {}).items():  # the table's kvikio rows, beside it
        share = point["summary"]["bandwidth_bytes_per_s"] / ref
        notes.append(f"kvikio mode at {bs} (QD{point.get('qd', '?')}): {format_rate(point['summary']['bandwidth_bytes_per_s'])}"
                     f" = {share:.0%} of kvikio's own cold read ({format_rate(ref)}: one whole-file read)")
    notes.append("cold reads: page cache dropped before each (fadvise, and drop_caches as root); alternating "
                 "reference, kvikio, gds; on a virtual disk the host's own cache may still serve reads")
    save()


if __name__ == "__main__":
    sys.exit(main())
