"""Hold the reference points' figures to a profile: floors and ceilings, warn
bands, fractions of another point in the same run, the spread of repeats,
and the change against a saved baseline."""

from __future__ import annotations

import json

from gdsbench.validate.checks import FAIL, INFO, PASS, WARN, Check, skip
from gdsbench.validate.measure import Measurement, describe_figures, read_failed
from gdsbench.validate.profile import METRIC_WORDS, METRICS, Limit, Profile, ProfileError

# The figures a point is judged by where the profile does not say (spread, baseline)
HEADLINE = {"storage_rand": ("iops", "p99_us")}
DEFAULT_HEADLINE = ("gbps",)


def headline(point: str) -> tuple[str, ...]:
    return HEADLINE.get(point, DEFAULT_HEADLINE)


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if value >= 1000 else f"{value:.3g}"


def limit_threshold(limit: Limit) -> str:
    unit = "" if limit.fraction_of else " " + METRIC_WORDS[limit.metric]
    parts = [f"{word} {_fmt(v)}{unit}" for word, v in (("FAIL below", limit.min), ("FAIL above", limit.max),
                                                        ("WARN below", limit.warn_below), ("WARN above", limit.warn_above))
             if v is not None]
    of = f" x min({', '.join(limit.fraction_of)})" if limit.fraction_of else ""
    return "; ".join(parts) + of


def judge_limit(limit: Limit, measured: dict[str, Measurement], profile: Profile) -> Check:
    name = f"performance.{limit.point}.{limit.metric}"
    m = measured.get(limit.point)
    where = f"{profile.source} line {limit.line or '?'}"
    if m is not None and m.read_failed and not m.runs:
        return read_failed(name, m.error)
    if m is None or not m.runs:
        return skip(name, f"{limit.point} not measured: {(m.why_not or m.error) if m else 'not run'}", evidence=where)
    value = m.median(limit.metric)
    measured_text = f"{_fmt(value)} {METRIC_WORDS[limit.metric]} (median of {len(m.runs)})"
    judged = value
    if limit.fraction_of:
        others = {p: measured[p].median(limit.metric) for p in limit.fraction_of if p in measured and measured[p].runs}
        missing = [p for p in limit.fraction_of if p not in others]
        if missing:
            return skip(name, f"needs {', '.join(missing)} measured in the same run; not measured here",
                        measured=measured_text, evidence=where)
        reference = min(others.values())
        judged = value / reference
        measured_text += (f" = {judged:.0%} of min(" + ", ".join(f"{p} {_fmt(v)}" for p, v in others.items()) + ")")
    status = PASS
    if (limit.warn_below is not None and judged < limit.warn_below) or \
            (limit.warn_above is not None and judged > limit.warn_above):
        status = WARN
    if (limit.min is not None and judged < limit.min) or (limit.max is not None and judged > limit.max):
        status = FAIL
    fix = ""
    if status != PASS:
        fix = ("outside the profile's limit: look above for a cause (path, PCIe link, NUMA, IOMMU); "
               f"if this hardware is meant to do this, change the limit at {where}")
    return Check(name, status, measured_text, threshold=limit_threshold(limit), evidence=f"{m.data_path}; {where}",
                 fix=fix, value=judged)


def measured_only(point: str, m: Measurement) -> Check:
    """A point the profile sets no limit on: its figures, for the record and for --baseline."""
    name = f"performance.{point}"
    if m.read_failed and not m.runs:
        return read_failed(name, m.error)
    if not m.runs:
        return skip(name, m.why_not or m.error or "not measured")
    return Check(name, INFO, describe_figures(m) + " (measured only: this profile sets no limit)", evidence=m.data_path)


def spread_check(point: str, m: Measurement, profile: Profile) -> Check:
    name = f"performance.{point}.spread"
    metric = headline(point)[0]
    spread = m.spread(metric)
    if spread is None:
        return skip(name, f"{len(m.runs)} repeat: no spread to measure" if m.runs else (m.why_not or m.error or ""))
    values = ", ".join(_fmt(r[metric]) for r in m.runs)
    measured = f"{spread:.1%} over {len(m.runs)} repeats ({values} {METRIC_WORDS[metric]})"
    if spread > profile.max_spread:
        return Check(name, WARN, measured, threshold=f"at most {profile.max_spread:.0%}", value=spread,
                     evidence="(max - min) / median of the repeats",
                     fix="something else shares this storage or CPU, or the device has not settled: validate an idle "
                         "node, or raise repeats/runtime in the profile")
    return Check(name, PASS, measured, threshold=f"at most {profile.max_spread:.0%}", value=spread,
                 evidence="(max - min) / median of the repeats")


def load_baseline(path: str) -> dict:
    """A saved `gdsbench validate --json` record; ProfileError (a usage error) if it is not one."""
    try:
        with open(path) as f:
            record = json.load(f)
    except OSError as e:
        raise ProfileError(f"--baseline {path}: {e.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ProfileError(f"--baseline {path}: not JSON ({e}); give the output of `gdsbench validate --json`") from None
    if not isinstance(record, dict) or not isinstance(record.get("measurements"), dict):
        raise ProfileError(f"--baseline {path}: not a gdsbench validate record; give the output of "
                           "`gdsbench validate --json`")
    return record


def require_comparable(baseline: dict, profile: Profile, source: str) -> None:
    """ProfileError (exit 3) unless the baseline measured each point as this run will: the same
    time per repeat and ramp (a 400 ms --quick baseline says little about a 2 s run)."""
    from gdsbench.job.units import format_duration

    then = baseline.get("profile") or {}
    for key, word in (("runtime_ns", "per repeat"), ("ramp_ns", "of ramp")):
        if then.get(key) != getattr(profile, key):
            was = format_duration(then[key]) if isinstance(then.get(key), int) else "unknown"
            raise ProfileError(f"--baseline {source}: measured with {was} {word}"
                               f"{' (--quick)' if baseline.get('quick') else ''}, this run with "
                               f"{format_duration(getattr(profile, key))}: not comparable; run with the baseline's "
                               "settings (--quick or not, the same profile) or save a new baseline")


def _spread(runs: list[dict], metric: str) -> float | None:
    values = [r[metric] for r in runs or [] if r.get(metric) is not None]
    middle = sorted(values)[len(values) // 2] if len(values) > 1 else 0
    return (max(values) - min(values)) / middle if middle else None


def baseline_checks(point: str, m: Measurement, baseline: dict, profile: Profile, source: str) -> list[Check]:
    before = baseline["measurements"].get(point) or {}
    out = []
    for metric in headline(point):
        name = f"performance.{point}.{metric}.baseline"
        old = (before.get("median") or {}).get(metric)
        if not m.runs:
            continue
        if old is None:
            out.append(skip(name, f"{source} has no {point} {metric}", evidence=source))
            continue
        if before.get("settings") != m.point.settings():
            out.append(skip(name, f"measured differently in {source} ({before.get('settings')}), not comparable",
                            evidence=source))
            continue
        new = m.median(metric)
        change = new / old - 1 if old else 0.0
        worse = -change if METRICS[metric] == "higher" else change
        fail, warn = ((profile.baseline_fail_drop, profile.baseline_warn_drop) if METRICS[metric] == "higher"
                      else (profile.baseline_fail_rise, profile.baseline_warn_rise))
        status = FAIL if worse > fail else WARN if worse > warn else PASS
        word = "lower" if change < 0 else "higher"
        measured = f"{_fmt(new)} {METRIC_WORDS[metric]}, {abs(change):.1%} {word} than {_fmt(old)} in the baseline"
        fix = "" if status == PASS else ("this node is slower than when the baseline was saved: look above for a cause; "
                                         "if the change is meant, save a new baseline with --json")
        # a limit tighter than the repeats' own spread cannot tell a change from noise
        noise = max((x for x in (m.spread(metric), _spread(before.get("runs"), metric)) if x is not None), default=None)
        if noise is not None and noise > fail and worse <= noise:
            status = WARN
            measured += f"; not judged: the repeats spread {noise:.1%}, more than the {fail:.0%} limit"
            fix = ("raise repeats or runtime in the profile until repeats agree within the limit, or set fail_drop/"
                   "fail_rise above the spread")
        out.append(Check(
            name, status, measured, threshold=f"worse by at most {fail:.0%} (WARN over {warn:.0%}), beyond the "
                                               "repeats' spread", value=change,
            evidence=f"{source} ({baseline.get('started', 'undated')}, host {baseline.get('host', '?')})", fix=fix))
    return out


def performance_checks(measured: dict[str, Measurement], profile: Profile, baseline: dict | None,
                       baseline_source: str) -> list[Check]:
    out: list[Check] = []
    limited = {lim.point for lim in profile.limits}
    for point, m in measured.items():
        checks = [judge_limit(lim, measured, profile) for lim in profile.limits if lim.point == point]
        if point not in limited:
            checks.append(measured_only(point, m))
        if m.runs:
            checks.append(spread_check(point, m, profile))
            if baseline is not None:
                checks += baseline_checks(point, m, baseline, profile, baseline_source)
        for check in checks:  # the point's run time, shared among the checks that judge it
            check.seconds = m.seconds / len(checks)
        out += checks
    return out
