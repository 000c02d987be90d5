"""Test both ends of the dependency ranges, and refresh the lock the suite installs from.

    python scripts/check_dependencies.py                 # newest and lowest, table at the end
    python scripts/check_dependencies.py --only newest   # one end
    python scripts/check_dependencies.py --write-lock    # newest passed: it becomes the lock

``pyproject.toml`` declares ranges, because users install replyguard into environments of
their own; the README's test command installs from ``constraints.txt``, the exact versions the
suite last passed on. This script builds throwaway virtual environments with uv (installed
from PyPI into a tools environment when it is not on PATH), every extra included:

- ``newest``: the newest release each range allows (uv's default resolution);
- ``lowest``: the lowest release of each direct dependency (``--resolution lowest-direct``);

runs the whole test suite in each, and prints one table: each declared dependency's version in
the lock, in the newest and in the lowest environment, and the suite's result for each. Exit
status 0 only when every suite run passed.

With ``--write-lock`` and a passing newest run, that environment's exact versions are written
to ``constraints.txt``: a pip constraints file, which ``pip install -c constraints.txt`` reads.
It is not part of ``.ci/run``: CI must not depend on what the registry serves that day.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "constraints.txt"
ENDS = {"newest": [], "lowest": ["--resolution", "lowest-direct"]}
LOCK_HEADER = """\
# The exact versions replyguard's test suite last passed on, every extra included.
# The README's commands install with it (pip install -c constraints.txt ...).
# Refresh: python scripts/check_dependencies.py --write-lock (see docs/development.md).
"""
_SUMMARY = re.compile(r"^=*\s*(?P<text>(\d+ \w+(, )?)+) in [\d.]+s", re.MULTILINE)


@dataclass
class Run:
    """One end of the ranges: its versions and how the suite did on them."""

    name: str
    versions: dict[str, str]
    passed: bool
    summary: str
    seconds: float


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared() -> list[str]:
    """Every dependency pyproject.toml declares (core first, then each extra's), by name."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names: list[str] = []
    groups = [project["dependencies"], *project.get("optional-dependencies", {}).values()]
    for group in groups:
        for requirement in group:
            name = normalize(re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0])
            if name not in names:
                names.append(name)
    return names


def extras() -> str:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return ",".join(project.get("optional-dependencies", {}))


def read_pins(text: str) -> dict[str, str]:
    """``name==version`` lines (a freeze or a constraints file) as a mapping."""
    pins: dict[str, str] = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            pins[normalize(name)] = version.strip()
    return pins


def find_uv(tools: Path) -> str:
    """uv from PATH, or installed from PyPI into a tools environment of its own."""
    found = shutil.which("uv")
    if found:
        return found
    subprocess.run([sys.executable, "-m", "venv", str(tools)], check=True)
    subprocess.run([str(tools / "bin" / "pip"), "install", "-q", "uv"], check=True)
    return str(tools / "bin" / "uv")


def build(uv: str, where: Path, resolution: list[str]) -> Path:
    """A fresh environment with replyguard and every extra, resolved as ``resolution`` says."""
    # --seed: with pip, as python -m venv makes it (the packaging tests build a wheel with pip)
    subprocess.run([uv, "venv", "-q", "--seed", "--python", sys.executable, str(where)], check=True)
    python = where / "bin" / "python"
    subprocess.run(
        [uv, "pip", "install", "-q", "--python", str(python), *resolution,
         "-e", f"{ROOT}[{extras()}]"],
        check=True,
    )  # fmt: skip
    return python


def freeze(uv: str, python: Path) -> str:
    listed = subprocess.run(
        [uv, "pip", "freeze", "--exclude-editable", "--python", str(python)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return listed.stdout


def run_suite(python: Path) -> tuple[bool, str]:
    """The whole suite, as the README runs it; its closing line."""
    env = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "PYTHONPATH"}}
    done = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=ROOT, env=env, capture_output=True, text=True,
    )  # fmt: skip
    summary = _SUMMARY.search(done.stdout)
    text = summary.group("text") if summary else f"exit {done.returncode}"
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-6000:])
    return done.returncode == 0, text


def table(runs: list[Run], locked: dict[str, str]) -> str:
    names = [n for n in declared() if n != "replyguard"]
    header = ["package", "locked", *(r.name for r in runs)]
    rows = [[n, locked.get(n, "-"), *(r.versions.get(n, "-") for r in runs)] for n in names]
    rows.append(["result", "-", *(("passed: " if r.passed else "FAILED: ") + r.summary
                                  for r in runs)])  # fmt: skip
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = [" | ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True))
             for row in [header, ["-" * w for w in widths], *rows]]  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=sorted(ENDS), action="append")
    parser.add_argument("--write-lock", action="store_true",
                        help="write the newest environment's versions to constraints.txt "
                             "when its suite passed")  # fmt: skip
    parser.add_argument("--keep", action="store_true", help="keep the environments")
    args = parser.parse_args(argv)
    ends = args.only or list(ENDS)
    if args.write_lock and "newest" not in ends:
        parser.error("--write-lock needs the newest run")
    locked = read_pins(LOCK.read_text(encoding="utf-8")) if LOCK.exists() else {}
    work = Path(tempfile.mkdtemp(prefix="replyguard-deps-"))
    runs: list[Run] = []
    try:
        uv = find_uv(work / "tools")
        for name in ends:
            print(f"[{name}] building the environment ...", flush=True)
            python = build(uv, work / name, ENDS[name])
            frozen = freeze(uv, python)
            print(f"[{name}] running the suite ...", flush=True)
            began = time.monotonic()
            passed, summary = run_suite(python)
            runs.append(Run(name, read_pins(frozen), passed, summary, time.monotonic() - began))
            print(f"[{name}] {summary} ({runs[-1].seconds:.0f} s)", flush=True)
            if name == "newest" and args.write_lock and passed:
                LOCK.write_text(LOCK_HEADER + frozen, encoding="utf-8")
                print(f"wrote {LOCK.relative_to(ROOT)}", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print()
    print(table(runs, locked))
    return 0 if all(r.passed for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
