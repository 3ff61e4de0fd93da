#!/usr/bin/env python3
"""What the pytest plugin costs per test beyond the measurement itself.

Two pytest sessions of N tests each, the same job in every test (the null
engine, 1 s after a 200 ms ramp, so the reads cost nothing and only the harness shows):
  A  calls storage_bench(...): the plugin, pytest-benchmark's stats and table;
  B  calls gdsbench.run(...) directly with the same job.
Run A B A B ..., each a fresh pytest; the cost per test is the median of
(A - B) / N. Target: 50 ms.

    .venv/bin/python benchmarks/pytest_plugin_overhead.py         # about 1 minute
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import markdown_table, write_outputs  # noqa: E402

TARGET_S = 0.050


def session(directory: str, name: str) -> float:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", name], cwd=directory,
                          capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(proc.stdout[-2000:] + proc.stderr[-2000:])
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tests", type=int, default=20)
    ap.add_argument("--pairs", type=int, default=3)
    args = ap.parse_args()
    job = 'engine="null", bs="4K", runtime="1s", ramp="200ms"'
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "test_a.py"), "w") as f:
            f.write("import pytest\n\n@pytest.mark.parametrize('i', range(%d))\n"
                    "def test_plugin(storage_bench, i):\n    storage_bench(%s)\n" % (args.tests, job))
        with open(os.path.join(d, "test_b.py"), "w") as f:
            f.write("import pytest\nfrom gdsbench.job.spec import spec_from_values\nfrom gdsbench import run\n\n"
                    "@pytest.mark.parametrize('i', range(%d))\n"
                    "def test_direct(i):\n    run(spec_from_values(dict(%s)), record_environment=False)\n"
                    % (args.tests, job))
        a, b = [], []
        for _ in range(args.pairs):
            a.append(session(d, "test_a.py"))
            b.append(session(d, "test_b.py"))
    per_test = [(x - y) / args.tests for x, y in zip(a, b)]
    cost = statistics.median(per_test)
    verdict = "PASS" if cost <= TARGET_S else "FAIL"
    table = markdown_table(
        ["tests per session", "session with storage_bench (median)", "session with gdsbench.run (median)",
         "plugin cost per test (median)", "min-max", "target", "verdict"],
        [[args.tests, f"{statistics.median(a):.2f} s", f"{statistics.median(b):.2f} s", f"{cost * 1e3:.1f} ms",
          f"{min(per_test) * 1e3:.1f}-{max(per_test) * 1e3:.1f} ms", f"<= {TARGET_S * 1e3:.0f} ms", verdict]])
    notes = [f"Each test measures the null engine for 1 s after a 200 ms ramp ({job}): in the plugin, a 200 ms warm-up "
             "run, then one run of rounds back to back filling the 1 s; the sessions alternate "
             f"A B A B ({args.pairs} pairs), each a fresh pytest; cost = (A - B) / tests.",
             "A includes everything the plugin adds: its options and marker, the warm-up as a run of its own "
             "(B's ramp is inside its one run), the measuring run's 10 ms fill, and pytest-benchmark's stats and table."]
    print(table + "\n\n" + "\n".join(notes))
    write_outputs("pytest_plugin_overhead", "What the pytest plugin costs per test", table, notes,
                  {"a_s": a, "b_s": b, "per_test_s": per_test}, tools=("pytest-benchmark",))
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
