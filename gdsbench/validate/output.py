"""Three views of one validation: the terminal table, the JSON record and a
JUnit file (one testcase per check; SKIP as skipped, FAIL as failure)."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET

from gdsbench.system import output_files, provenance
from gdsbench.validate.checks import FAIL, INFO, PASS, SKIP, WARN, counts
from gdsbench.validate.session import Validation

STATUS_STYLE = {PASS: "green", INFO: "cyan", WARN: "yellow", FAIL: "bold red", SKIP: "dim"}


def table(v: Validation, color: bool = False) -> str:
    """The compact table: one line per check; under a WARN or FAIL its evidence and fix, under a SKIP its reason."""
    rows = v.ordered()
    width = max((len(c.name) for c in rows), default=10)
    lines = []
    for c in rows:
        status = f"[{STATUS_STYLE[c.status]}]{c.status}[/]" if color else c.status
        if c.status == SKIP:
            text = c.fix  # why it was skipped
        else:
            text = c.measured + (f"  [{c.threshold}]" if c.threshold else "")
        lines.append(f"{status}  {c.name:<{width}}  {text}".rstrip())
        if c.status in (WARN, FAIL):
            lines.append(f"{'':6}{'':<{width}}  evidence: {c.evidence}")
            lines.append(f"{'':6}{'':<{width}}  fix: {c.fix}")
    lines += [f"note: {n}" for n in v.notes]
    lines.append(summary(v))
    return "\n".join(lines)


def summary(v: Validation) -> str:
    n = counts(v.checks)
    how = f"profile {v.profile.name}" + (", --quick" if v.quick else "") + (", INTERRUPTED" if v.interrupted else "")
    return (f"validate: {n[PASS]} PASS, {n[INFO]} INFO, {n[WARN]} WARN, {n[FAIL]} FAIL, {n[SKIP]} SKIP in "
            f"{v.seconds:.1f} s "
            f"({how}): exit {v.exit_code}")


def junit(v: Validation, path: str) -> None:
    """Write the checks as JUnit XML (what CI systems and provisioning tools read)."""
    junit_hosts([(os.uname().nodename, v)], path)


def junit_hosts(validations: list[tuple[str, Validation]], path: str) -> None:
    """JUnit XML with one testsuite per host's validation (a fleet's, or one host's)."""
    everything = [c for _, v in validations for c in v.checks]
    suites = ET.Element("testsuites", name="gdsbench validate", tests=str(len(everything)),
                        failures=str(sum(c.status == FAIL for c in everything)), errors="0",
                        skipped=str(sum(c.status == SKIP for c in everything)),
                        time=f"{max(v.seconds for _, v in validations):.3f}")
    for host, v in validations:
        _suite(suites, host, v, several=len(validations) > 1)
    ET.indent(suites)
    output_files.write_whole(path, lambda tmp: ET.ElementTree(suites).write(tmp, encoding="utf-8",
                                                                             xml_declaration=True))


def _suite(suites: ET.Element, host: str, v: Validation, several: bool) -> None:
    checks = v.ordered()
    name = f"gdsbench validate ({v.profile.name})" + (f" on {host}" if several else "")
    suite = ET.SubElement(suites, "testsuite", name=name, tests=str(len(checks)),
                          failures=str(sum(c.status == FAIL for c in checks)), errors="0",
                          skipped=str(sum(c.status == SKIP for c in checks)), time=f"{v.seconds:.3f}",
                          timestamp=v.started, hostname=host)
    props = ET.SubElement(suite, "properties")
    for key, value in (("profile", v.profile.source), ("quick", str(v.quick).lower()), ("target", v.target.get("path")),
                       ("exit_code", str(v.exit_code)), ("interrupted", str(v.interrupted).lower()),
                       ("made_by", provenance.label())):
        ET.SubElement(props, "property", name=key, value=str(value))
    for c in checks:
        group, _, rest = c.name.partition(".")
        case = ET.SubElement(suite, "testcase", classname=f"gdsbench.validate.{group}", name=rest, time=f"{c.seconds:.3f}")
        detail = f"measured: {c.measured}\nthreshold: {c.threshold or '-'}\nevidence: {c.evidence or '-'}"
        if c.status == FAIL:
            ET.SubElement(case, "failure", message=f"{c.measured}; fix: {c.fix}", type="FAIL").text = detail
        elif c.status == SKIP:
            ET.SubElement(case, "skipped", message=c.fix)
        out = ET.SubElement(case, "system-out")
        out.text = f"{c.status}\n{detail}" + (f"\nfix: {c.fix}" if c.status == WARN else "")


def fleet_table(fleet, color: bool = False) -> str:
    """Each host's table under its name, then a line per host and the fleet's verdict."""
    from gdsbench.validate.fleet import worst_exit

    parts = [f"== {h.host} (rank {h.rank}) ==\n{table(h.validation, color)}" for h in fleet]
    width = max(len(h.host) for h in fleet)
    lines = [f"{h.host:<{width}}  {summary(h.validation)}" for h in fleet]
    worst = worst_exit(fleet)
    failing = [h.host for h in fleet if h.validation.exit_code == worst and worst]
    lines.append(f"fleet: {len(fleet)} hosts: exit {worst}" + (f" (worst: {', '.join(failing)})" if failing else
                                                                 ", every host passed"))
    return "\n\n".join(parts) + "\n\n" + "\n".join(lines)


def check_junit(path: str, error: type[Exception]) -> None:
    """As --junit is parsed (argparse names the flag): it can be written at path and replaces only a
    JUnit file of validate's, so a minute of validation is not lost to where it cannot go."""
    output_files.check("", path, junit_of_validate, "a JUnit file", "validate.xml", error)


def junit_of_validate(path: str) -> bool:
    """Whether the file is a JUnit report validate wrote (its root element named so)."""
    try:
        with open(path, "rb") as f:
            return b'<testsuites name="gdsbench validate"' in f.read(4096)
    except OSError:
        return False
