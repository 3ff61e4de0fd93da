#!/usr/bin/env python3
"""Does --benchmark-compare-fail fire where the arithmetic says it should?

A storage_bench suite of three tests (4 KiB random at QD16, 1 MiB at QD4 and
16 MiB at QD1, the case the old interval statistic could not see) runs on a
real slower tier: the disk throttled by the kernel's blkio cgroup. A baseline
is saved at the base rate; then the same suite runs with the throttle at 100%,
90%, 80% and 75% of that rate, each compared with --benchmark-compare-fail
mean:THRESHOLD. A round's time grows by 1/step - 1 when bandwidth falls to
`step`, so a threshold of X% fires once bandwidth falls by X/(100+X): for 20%,
below 83.3% of the rate. Each row says whether it was expected to fire, whether
it fired, and the change in mean that pytest-benchmark saw. The whole sequence
runs PASSES times (baseline, 100, 90, 80, 75; baseline, 100, ...).

A throttle's step is not exactly the storage's: part of a small read's time is
the device's own, which the throttle does not change. So each tier is also
measured by fio (the same job, 2 s, before each session), and the expectation
is judged from fio's drop: it fires where fio's bandwidth fell by more than
X/(100+X). A drop within 3 points of that line is "borderline" and not judged.

    .venv/bin/python benchmarks/pytest_threshold.py      # root, cgroup v1; about 6 minutes
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import markdown_table, write_outputs  # noqa: E402

from gdsbench.system.throttle import Throttle  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from gdsbench import prepare  # noqa: E402

MiB = 1 << 20
STEPS = (1.00, 0.90, 0.80, 0.75)
SUITE = '''
import pytest

pytestmark = pytest.mark.gdsbench(path={path!r}, runtime="{runtime}", ramp="200ms")

@pytest.mark.parametrize("bs, qd, pattern", [("4K", 16, "rand"), ("1M", 4, "seq"), ("16M", 1, "seq")])
def test_read(storage_bench, bs, qd, pattern):
    storage_bench(bs=bs, qd=qd, pattern=pattern)
'''


def regressed_tests(output: str) -> set[str]:
    """The tests pytest-benchmark's compare-fail named (its 'Performance has regressed' list)."""
    if "Performance has regressed" not in output:
        return set()
    tail = output.split("Performance has regressed", 1)[1]
    return set(re.findall(r"(test_read\[[^\]]+\])", tail))


JOBS = {"[4K-16-rand]": ("4k", 16, "randread"), "[1M-4-seq]": ("1m", 4, "read"), "[16M-1-seq]": ("16m", 1, "read")}
BORDER = 0.03  # an expected change within this of the threshold is not judged


def fio_rates(tier: Throttle, path: str) -> dict[str, float]:
    """Each test's job measured by fio on this tier: bytes per second."""
    rates = {}
    for name, (bs, qd, rw) in JOBS.items():
        cmd = ["fio", "--name=ref", "--output-format=json", f"--filename={path}", f"--rw={rw}", f"--bs={bs}",
               f"--iodepth={qd}", "--ioengine=io_uring", "--direct=1", "--time_based", "--runtime=2", "--ramp_time=0.2",
               "--invalidate=1"]
        out = subprocess.run(tier.wrap(cmd), capture_output=True, text=True, timeout=60)
        if out.returncode:
            raise SystemExit(f"fio failed: {out.stderr[-1000:]}")
        rates[name] = json.loads(out.stdout)["jobs"][0]["read"]["bw_bytes"]
    return rates


def verdict(expected_change: float, fired: bool, threshold: float) -> str:
    """Whether compare-fail did what it should: fire when a fixed round takes more than
    `threshold` longer (bandwidth fell to 1/(1 + change)); borderline within BORDER of it."""
    if abs(expected_change - threshold) < BORDER:
        return "borderline"
    return "yes" if (expected_change > threshold) == fired else "**NO**"


def session(directory: str, tier: Throttle, out: str, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "suite_test.py",
           f"--benchmark-storage=file://{directory}/storage", f"--benchmark-json={out}", *args]
    return subprocess.run(tier.wrap(cmd), capture_output=True, text=True, cwd=directory, timeout=900)


def means(path: str) -> dict[str, float]:
    return {b["name"]: b["stats"]["mean"] for b in json.load(open(path))["benchmarks"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=int, default=64, help="the base rate, MiB/s (default 64)")
    ap.add_argument("--threshold", type=float, default=20.0, help="compare-fail mean threshold, %% (default 20)")
    ap.add_argument("--runtime", default="2s", help="--gdsbench-runtime of each test (default 2s)")
    ap.add_argument("--passes", type=int, default=2, help="times the whole sequence runs (default 2)")
    ap.add_argument("--dir", default="/var/tmp", help="a folder on the disk to throttle (default /var/tmp)")
    args = ap.parse_args()
    threshold = args.threshold / 100
    rows, raw = [], []
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        path = os.path.join(d, "tier.dat")
        prepare(path, 256 * MiB)
        with open(os.path.join(d, "suite_test.py"), "w") as f:
            f.write(SUITE.format(path=path, runtime=args.runtime))
        for p in range(args.passes):
            with Throttle(path, args.rate * MiB, "threshold-base") as base:
                base_fio = fio_rates(base, path)
                saved = session(d, base, os.path.join(d, f"base{p}.json"), "--benchmark-save=baseline")
            if saved.returncode:
                raise SystemExit(saved.stdout[-3000:] + saved.stderr[-3000:])
            baseline = means(os.path.join(d, f"base{p}.json"))
            number = f"{p + 1:04d}"
            for step in STEPS:
                out = os.path.join(d, f"p{p}-{step}.json")
                with Throttle(path, int(args.rate * MiB * step), "threshold") as tier:
                    step_fio = fio_rates(tier, path)
                    res = session(d, tier, out, f"--benchmark-compare={number}",
                                  f"--benchmark-compare-fail=mean:{args.threshold:g}%")
                if not os.path.exists(out):
                    raise SystemExit(res.stdout[-3000:] + res.stderr[-3000:])
                fired = regressed_tests(res.stdout + res.stderr)
                for test, mean in means(out).items():
                    job = test.removeprefix("test_read")
                    change = mean / baseline[test] - 1
                    by_fio = base_fio[job] / step_fio[job] - 1  # the time a fixed round takes, as fio saw the tier
                    got = test in fired
                    judged = verdict(by_fio, got, threshold)
                    rows.append([p + 1, job, f"{step:.0%}", f"{1 / step - 1:+.1%}", f"{by_fio:+.1%}", f"{change:+.1%}",
                                 "fires" if by_fio > threshold else "quiet", "fired" if got else "quiet", judged])
                    raw.append({"pass": p + 1, "test": test, "step": step, "baseline_mean_s": baseline[test],
                                "mean_s": mean, "change": change, "fio_base_bytes_per_s": base_fio[job],
                                "fio_step_bytes_per_s": step_fio[job], "expected_change_by_fio": by_fio,
                                "expected_fire": by_fio > threshold, "fired": got, "verdict": judged,
                                "exit_code": res.returncode})
    judged = [r for r in raw if r["verdict"] != "borderline"]
    agree = sum(r["verdict"] == "yes" for r in judged)
    header = ["pass", "test [bs-qd-pattern]", "throttle", "change by the throttle", "change by fio",
              "measured change in mean", "expected (by fio)", "compare-fail", "as expected"]
    notes = [f"{agree} of {len(judged)} judged comparisons as the arithmetic says; "
             f"{len(raw) - len(judged)} borderline (fio's change within {BORDER:.0%} of the threshold), not judged.",
             f"Base rate {args.rate} MiB/s (blkio read_bps_device on the disk holding the file), then 100/90/80/75% of "
             f"it; --benchmark-compare-fail=mean:{args.threshold:g}%, which should fire below "
             f"{1 / (1 + threshold):.1%} of the rate (a bandwidth drop of {threshold / (1 + threshold):.1%}).",
             f"Each test: --gdsbench-runtime {args.runtime} after a 200 ms warm-up; a sample is one round of a fixed "
             "number of reads timed natively, pytest-benchmark's time per iteration is per read.",
             "A 256 MiB pattern file read with O_DIRECT; each session is a fresh pytest."]
    md, _ = write_outputs("pytest_threshold", "pytest-benchmark compare-fail against a stepped throttle",
                          markdown_table(header, rows), notes, {"rows": raw, "rate_mib_s": args.rate,
                                                                "threshold": threshold, "runtime": args.runtime},
                          tools=("pytest-benchmark",))
    print(markdown_table(header, rows))
    print("\n".join(notes))
    print(md)
    return 0 if agree == len(judged) else 1


if __name__ == "__main__":
    sys.exit(main())
