"""Run pytest-benchmark's own test suite with and without pytest-tpu, and compare the outcomes.

pytest-benchmark's released sdist ships its tests. This script unpacks it into WORKDIR, runs its
suite twice with the Python it is started with (``-p no:tpu``, then with the plugin loaded from
its entry point) and compares every test's outcome. Exit status 0 when they are identical.

    python experiments/benchmark_compat.py WORKDIR SDIST

``make benchmark-compat`` prepares an environment for it (pytest-benchmark's test dependencies
stay out of the development environment) and downloads the sdist of the installed version.
Not a test: it runs several hundred of another project's tests and takes minutes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path


def unpack(sdist: Path, workdir: Path) -> Path:
    """The sdist's top directory, freshly unpacked."""
    with tarfile.open(sdist) as archive:
        top = archive.getnames()[0].split("/")[0]
        archive.extractall(workdir, filter="data")
    return workdir / top


def run_suite(source: Path, junit: Path, plugin_args: list[str]) -> tuple[int, float]:
    """pytest-benchmark's suite as its tox.ini runs it; returns (exit status, seconds)."""
    env = dict(os.environ, COLUMNS="80", PYTHONPATH=str(source / "tests"), PYTHONUNBUFFERED="yes")
    command = [sys.executable, "-m", "pytest", "--ignore=src", "-q", "-p", "no:cacheprovider"]
    command += [*plugin_args, f"--junitxml={junit}"]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=source, env=env, stdout=subprocess.DEVNULL, check=False)
    return done.returncode, time.perf_counter() - start


def outcomes(junit: Path) -> dict[str, str]:
    """Test id -> passed / failed / error / skipped, from a JUnit XML file."""
    found = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        test_id = f"{case.get('classname')}::{case.get('name')}"
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        found[test_id] = kinds[0] if kinds else "passed"
    return found


def compare(without: dict[str, str], with_plugin: dict[str, str]) -> list[str]:
    """One line per test whose outcome differs."""
    names = sorted(set(without) | set(with_plugin))
    return [
        f"{name}: without {without.get(name, 'absent')}, with {with_plugin.get(name, 'absent')}"
        for name in names
        if without.get(name) != with_plugin.get(name)
    ]


def main(workdir: Path, sdist: Path) -> int:
    source = unpack(sdist, workdir)
    runs = {}
    for label, args in (("without", ["-p", "no:tpu"]), ("with", [])):
        junit = (workdir / f"junit-{label}.xml").resolve()  # the suite runs in its own folder
        status, seconds = run_suite(source, junit, args)
        runs[label] = outcomes(junit)
        counts = Counter(runs[label].values())
        print(f"{label} pytest-tpu: exit {status}, {seconds:.0f} s, {dict(sorted(counts.items()))}")
    differences = compare(runs["without"], runs["with"])
    for line in differences:
        print("DIFFERENT", line)
    print("same outcomes" if not differences else f"{len(differences)} outcomes differ")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
