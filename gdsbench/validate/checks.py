"""One check's verdict: what was measured, against what, the evidence, and the fix.

Every check gdsbench validate runs ends as a Check; the terminal table, the
JSON record and the JUnit file are three views of the same list.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

PASS, WARN, FAIL, SKIP, INFO = "PASS", "WARN", "FAIL", "SKIP", "INFO"
# INFO: a figure or fact recorded but held to nothing (measured only, or true by construction): not a PASS
SEVERITY = {SKIP: 0, INFO: 1, PASS: 2, WARN: 3, FAIL: 4}
STATUSES = (PASS, INFO, WARN, FAIL, SKIP)
GROUPS = ("platform", "path", "integrity", "performance")


@dataclass
class Check:
    name: str  # stable, dotted: "platform.nvidia_fs", "performance.storage_seq.gbps"
    status: str  # PASS, INFO, WARN, FAIL or SKIP
    measured: str  # what was found, in words and units
    threshold: str = ""  # what it was held against ("" where there is nothing to hold it against)
    evidence: str = ""  # the file read, the counter, the command
    fix: str = ""  # WARN and FAIL: one line saying what to do; SKIP: why it was skipped
    value: float | None = None  # the number behind `measured`, where there is one
    seconds: float = 0.0  # how long the check took

    def __post_init__(self) -> None:
        if self.status not in SEVERITY:
            raise ValueError(f"status {self.status!r}")
        if self.status in (WARN, FAIL) and not self.fix:
            raise ValueError(f"{self.name}: a {self.status} needs a fix")
        if self.status == PASS and not self.threshold:  # a check held to nothing passes nothing: INFO
            raise ValueError(f"{self.name}: a PASS needs the threshold it met")

    @property
    def group(self) -> str:
        return self.name.split(".", 1)[0]

    def to_dict(self) -> dict:
        return {"group": self.group, **asdict(self)}


def skip(name: str, why: str, measured: str = "", evidence: str = "") -> Check:
    return Check(name, SKIP, measured or "not checked", evidence=evidence, fix=why)


def worst(statuses) -> str:
    return max(statuses, key=SEVERITY.__getitem__, default=SKIP)


def counts(checks: list[Check]) -> dict[str, int]:
    return {s: sum(c.status == s for c in checks) for s in STATUSES}
