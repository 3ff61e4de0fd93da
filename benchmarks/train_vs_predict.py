#!/usr/bin/env python3
"""gdsbench predict against the full emulation, on three tiers of this disk.

For each tier (the disk as it is, and the disk slowed by the blkio throttle
to --tiers MiB/s), in a cgroup that imposes it:
  predict   `gdsbench predict`: a short probe and the model; its answer is
            the most accelerators that keep AU >= 90%, and the time it took;
  emulate   `gdsbench train --accelerators N` for N = 1, 2, ... until two
            counts in a row fail (each count --repeats times, the median AU
            judged); the answer is the largest count that passed.
Target: the two answers within 1 accelerator or 5%, whichever is larger.

The workload is unet3d scaled (see --record, --compute): one fixed workload,
so the tiers differ only in the storage. The dataset is written once with
`gdsbench prepare --workload` and read with O_DIRECT.

    .venv/bin/python benchmarks/train_vs_predict.py        # about 15 minutes, as root
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Throttle, markdown_table, median, write_outputs  # noqa: E402

MiB = 1 << 20


def workload_args(args) -> list[str]:
    return ["--workload", "unet3d", "--record-bytes", str(args.record), "--record-stdev", str(args.record // 2),
            "--batch", "7", "--read-threads", "4", "--compute-time", f"{args.compute}s"]


def gdsbench(throttle: Throttle, *argv: str) -> tuple[dict | list, float]:
    start = time.monotonic()
    proc = subprocess.run(throttle.wrap([sys.executable, "-m", "gdsbench", *argv]), capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"gdsbench {argv[0]} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout), time.monotonic() - start


def emulate(args, throttle: Throttle) -> tuple[int, dict[int, list[float]], float]:
    """The largest count whose median AU passes, every count's AUs, and the time it all took."""
    aus: dict[int, list[float]] = {}
    took, best, n, fails = 0.0, 0, 1, 0
    while fails < 2 and n <= args.max_accelerators:
        aus[n] = []
        for _ in range(args.repeats):
            rows, seconds = gdsbench(throttle, "train", args.dataset, *workload_args(args), "--accelerators", str(n),
                                     "--results", args.runs, "--json")
            took += seconds
            aus[n].append(rows[0]["au_percent"])
        passed = median(aus[n]) >= 90.0
        print(f"  emulated {n}: AU {', '.join(f'{a:.1f}' for a in aus[n])} -> {'PASS' if passed else 'FAIL'}",
              file=sys.stderr, flush=True)
        best, fails = (n, 0) if passed else (best, fails + 1)
        n += 1
    return best, aus, took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="/root/gdsbench-train-tiers")
    ap.add_argument("--runs", default="/root/gdsbench-train-tiers-runs")
    ap.add_argument("--files", type=int, default=3000)
    ap.add_argument("--record", type=int, default=MiB)
    ap.add_argument("--compute", type=float, default=0.035)
    ap.add_argument("--tiers", default="disk,1000,400", help="'disk' (as it is) and MiB/s throttles")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--max-accelerators", type=int, default=24)
    args = ap.parse_args()
    subprocess.run([sys.executable, "-m", "gdsbench", "prepare", args.dataset, "--files", str(args.files),
                    *workload_args(args)], check=True)
    raw: dict = {"args": vars(args), "tiers": {}}
    rows = []
    for tier in args.tiers.split(","):
        rate = None if tier == "disk" else int(tier) * MiB
        with Throttle(args.dataset, rate, f"tier-{tier}") as throttle:
            print(f"tier {tier}", file=sys.stderr, flush=True)
            predicted, predict_s = gdsbench(throttle, "predict", args.dataset, *workload_args(args), "--json")
            emulated, aus, emulate_s = emulate(args, throttle)
        p = predicted["max_accelerators"]
        allowed = max(1, round(0.05 * emulated))
        verdict = "PASS" if abs(p - emulated) <= allowed else "FAIL"
        probe = ", ".join(f"{q['readers']}: {q['rate_bytes_per_s'] / MiB:.0f}" for q in predicted["probe"])
        near = [n for n in (emulated, emulated + 1) if n in aus]
        pred_au = {a["accelerators"]: a["au_percent"] for a in predicted["au"]}
        au_text = "; ".join(f"{n}: {median(aus[n]):.1f} vs {pred_au.get(n, float('nan')):.1f}" for n in near)
        rows.append([tier if tier == "disk" else f"{tier} MiB/s", probe, p, emulated, verdict, au_text,
                     f"{predict_s:.0f}", f"{emulate_s:.0f}", "; ".join(predicted["warnings"]) or "-"])
        raw["tiers"][tier] = {"predicted": predicted, "emulated": emulated, "aus": aus, "predict_s": predict_s,
                              "emulate_s": emulate_s, "verdict": verdict}
    table = markdown_table(["tier", "probe: readers: MiB/s", "predicted most accelerators", "emulated most accelerators",
                            "verdict", "AU % emulated vs predicted", "predict s", "emulation s", "out of its depth"],
                           rows)
    notes = [f"workload: unet3d scaled, {args.files} files of {args.record / MiB:.0f} MiB (sd {args.record / 2 / MiB:.1f} "
             f"MiB in DLIO's terms), batch 7, 4 read threads, compute {args.compute * 1000:.0f} ms: "
             f"{7 * args.record / args.compute / MiB:.0f} MiB/s per accelerator at 100% AU",
             "O_DIRECT reads, 1 MiB chunks, cpu mode; each tier's throttle applied to every process of it (blkio)",
             f"emulation: each count {args.repeats} times, its median AU judged against 90%; the search stops after two "
             "failing counts in a row",
             "target: predicted and emulated answers within 1 accelerator or 5%, whichever is larger",
             "emulation s: every train run of the search, process start-up included; predict s: the whole predict"]
    md, _ = write_outputs("train_vs_predict", "gdsbench predict against the emulation, three tiers", table, notes, raw)
    print(open(md).read())
    return 0


if __name__ == "__main__":
    sys.exit(main())
