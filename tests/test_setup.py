"""scripts/setup, as a newcomer meets it: the main job installs only what gdsbench builds with,
test servers come with --tests, no package starts a service, and CI runs the README's command."""

from __future__ import annotations

import os
import re
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SETUP = os.path.join(ROOT, "scripts", "setup")


def test_setup_installs_test_servers_only_with_tests_and_starts_no_service():
    text = open(SETUP).read()
    plain = re.search(r"^packages=\((.*)\)$", text, re.M).group(1).split()
    with_tests = re.search(r"^\$tests && packages\+=\((.*)\)$", text, re.M).group(1).split()
    assert "liburing-dev" in plain and not {"nginx", "chromium", "fio", "slurmd"} & set(plain)
    assert {"nginx", "chromium", "fio", "slurmd"} <= set(with_tests)
    assert "promtool=false" in text and "$tests && ! command -v promtool" in text
    # every apt install goes through the one that keeps maintainer scripts from starting daemons
    installs = [line for line in text.splitlines() if "apt-get install" in line.split("#")[0]]
    assert len(installs) == 1 and "policy-rc.d" in text and "exit 101" in text


def test_setup_refuses_an_unknown_option_in_one_line():
    res = subprocess.run([SETUP, "--test"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "--test" in res.stderr and "--tests" in res.stderr


def test_ci_runs_the_readmes_test_command():
    readme = open(os.path.join(ROOT, "README.md")).read()
    command = next(line.split("#")[0].strip() for line in readme.splitlines() if "-m pytest" in line and "setup" in line)
    assert command == "scripts/setup --tests && .venv/bin/python -m pytest"
    assert command in open(os.path.join(ROOT, ".ci", "run")).read()
