"""`gdsbench validate`: install-time hardware validation, as NVIDIA's gds-diag
and DCGM do it. Each check is PASS, WARN, FAIL or SKIP with what was measured,
against what, the evidence, and a fix.

    checks.py    the Check record every check ends as
    profile.py   thresholds from a TOML profile (profiles/ ships three)
    platform.py  what gdscheck -p reads: driver, CUDA, cuFile, nvidia-fs, IOMMU, ACS, NUMA, PCIe, filesystem
    measure.py   the reads: each mode's data path, integrity, the reference points
    judge.py     figures against floors, fractions, spread and a saved baseline
    session.py   one validation, in order; output.py: table, JSON, JUnit
"""
