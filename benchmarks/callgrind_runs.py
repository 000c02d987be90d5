"""Counting under callgrind for ``instructions.py``: the dumps a counted process asks for and its
controller has ``callgrind_control`` make, each side's count read from them, and the cold-start
scripts counted whole."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from scenarios import WIRES, config, judge_params, typical_turn
from startup import cold_scripts

_DUMP_WAIT_SECONDS = 300.0  # a controller that never answers (it died): the child gives up


def ask_dump(folder: Path, phase: str, index: int, name: str) -> None:
    """Have the controller dump (and zero) the counters as ``phase`` (start, end) of the
    ``index``-th side, ``name``, and wait until it has (the loop blocked: nothing of the
    process runs meanwhile but litellm's own threads)."""
    want = folder / "want"
    asking = folder / "want.part"
    asking.write_text(f"{phase}\t{index}\t{name}")
    asking.replace(want)  # whole: the controller never reads it half written
    given_up = time.monotonic() + _DUMP_WAIT_SECONDS
    while want.exists():
        if time.monotonic() > given_up:
            raise RuntimeError(f"no dump of {phase} {name!r} within {_DUMP_WAIT_SECONDS:g} s")
        time.sleep(0.02)


def counted(folder: Path, names: dict[int, str]) -> dict[str, int]:
    """Each side's instructions (in the sides' order), from the dumps made at the end of its
    calls (each dump holds what ran since the one before: the side's counted calls)."""
    found: dict[int, int] = {}
    for dump in folder.glob("cg.out.*"):
        text = dump.read_text(errors="replace")
        trigger = re.search(r"^desc: Trigger: dump end-(\d+)$", text, re.M)
        total = re.search(r"^(?:summary|totals): (\d+)", text, re.M)
        if trigger is not None and total is not None:
            found[int(trigger.group(1))] = int(total.group(1))
    return {names[index]: found[index] for index in sorted(found)}


def print_dumps(folder: Path, names: dict[int, str]) -> None:
    """Which kept dump (``--profile``) holds which side's counted calls, for
    ``callgrind_annotate --inclusive=yes DUMP``."""
    for dump in sorted(folder.glob("cg.out.*")):
        text = dump.read_text(errors="replace")
        trigger = re.search(r"^desc: Trigger: dump end-(\d+)$", text, re.M)
        if trigger is not None:
            print(f"{names[int(trigger.group(1))]}: {dump}")


def control(
    children: dict[str, tuple[subprocess.Popen[bytes], Path]],
) -> dict[str, dict[int, str]]:
    """Serve the children's requests for dumps until they have all exited; each child's
    sides by index."""
    names: dict[str, dict[int, str]] = {wire_name: {} for wire_name in children}
    while any(process.poll() is None for process, _ in children.values()):
        for wire_name, (process, folder) in children.items():
            want = folder / "want"
            if process.poll() is None and want.exists():
                phase, index, name = want.read_text().split("\t")
                names[wire_name][int(index)] = name
                done = subprocess.run(
                    ["callgrind_control", "-d", f"{phase}-{index}", str(process.pid)],
                    capture_output=True,
                    text=True,
                )
                if "OK." not in done.stdout:  # its exit status is 0 whatever happened
                    raise RuntimeError(f"callgrind_control failed: {done.stdout}{done.stderr}")
                want.unlink()
        time.sleep(0.05)
    return names


def stop(children: dict[str, tuple[subprocess.Popen[bytes], Path]]) -> None:
    """Kill the counted processes still running (the controller failed, or was interrupted):
    each would otherwise wait for its dumps under valgrind, orphaned."""
    for process, _ in children.values():
        if process.poll() is None:
            process.kill()
            process.wait()


def count_cold(url: str, scratch: Path) -> dict[str, int]:
    """Instructions of each cold-start script (``startup.cold_scripts``, the collector off
    in both) from its start until its first verified turn / raw call returns, under
    callgrind, side by side."""
    wire = WIRES["openai"]
    turn, reply = typical_turn()
    params = judge_params(config(wire, f"{url}/fast", verifyAll=True), turn, reply)
    scripts = dict(
        zip(
            ("verified", "raw"),
            cold_scripts(wire, url, "gc.disable()", ending="import os; os._exit(0)"),
            strict=True,
        )
    )
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.setdefault("LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS", "True")
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as an installed package: its bytecode cached
    for script in scripts.values():  # untimed: file and bytecode caches warm for both
        subprocess.run(
            [sys.executable, "-c", script],
            input=json.dumps(params),
            text=True,
            env=env,
            capture_output=True,
            check=True,
            timeout=300,
        )
    running = {}
    for name, script in scripts.items():
        counted = [sys.executable, "-c", script]
        out = f"--callgrind-out-file={scratch}/cold.{name}"
        running[name] = subprocess.Popen(
            ["valgrind", "--tool=callgrind", out, *counted],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            text=True,
        )
    counts: dict[str, int] = {}
    for name, process in running.items():
        process.communicate(json.dumps(params), timeout=1800)
        text = (scratch / f"cold.{name}").read_text(errors="replace")
        total = re.search(r"^(?:summary|totals): (\d+)", text, re.M)
        if total is None:
            raise RuntimeError(f"no instruction count for the cold {name} script")
        counts[name] = int(total.group(1))
    return counts
