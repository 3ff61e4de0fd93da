"""Three views of one validation: the terminal table, the JSON record and a
JUnit file (one testcase per check; SKIP as skipped, FAIL as failure)."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET

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
    checks = v.ordered()
    n = {s: sum(c.status == s for c in checks) for s in (FAIL, SKIP)}
    suites = ET.Element("testsuites", name="gdsbench validate", tests=str(len(checks)), failures=str(n[FAIL]),
                        errors="0", skipped=str(n[SKIP]), time=f"{v.seconds:.3f}")
    suite = ET.SubElement(suites, "testsuite", name=f"gdsbench validate ({v.profile.name})", tests=str(len(checks)),
                          failures=str(n[FAIL]), errors="0", skipped=str(n[SKIP]), time=f"{v.seconds:.3f}",
                          timestamp=v.started, hostname=os.uname().nodename)
    props = ET.SubElement(suite, "properties")
    for key, value in (("profile", v.profile.source), ("quick", str(v.quick).lower()), ("target", v.target.get("path")),
                       ("exit_code", str(v.exit_code)), ("interrupted", str(v.interrupted).lower())):
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
    ET.indent(suites)
    tmp = f"{path}.partial"
    try:
        ET.ElementTree(suites).write(tmp, encoding="utf-8", xml_declaration=True)
        os.replace(tmp, path)
    except OSError:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def check_writable(flag: str, path: str) -> None:
    """ProfileError (a usage error, exit 3) unless a report can be written at `path`: checked before
    anything runs, so a minute of validation is not lost to a typo."""
    from gdsbench.validate.profile import ProfileError

    if os.path.isdir(path):
        raise ProfileError(f"{flag} {path}: is a directory; give a file name, e.g. {os.path.join(path, 'validate.xml')}")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ProfileError(f"{flag} {path}: the folder {folder} does not exist; create it or write elsewhere")
    probe = f"{path}.partial"
    try:
        with open(probe, "w"):
            pass
        os.unlink(probe)
    except OSError as e:
        raise ProfileError(f"{flag} {path}: cannot write there ({e.strerror}); write elsewhere") from None
