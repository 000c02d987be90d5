"""The scenarios in fresh interpreters: ``import replyguard`` beside ``import litellm``, the
first verified turn of a new process beside its first raw call (cold, with the collector on,
off or frozen), the first and second turns after ``warmup()``, and the CLI's wall time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from scenarios import Wire, config, judge_params, typical_turn

_IMPORT = "import time; t = time.perf_counter(); import {0}; print(time.perf_counter() - t)"


def import_times(runs: int) -> tuple[list[float], list[float], bool]:
    """``import replyguard`` and ``import litellm`` in fresh interpreters, alternating.

    The third value says whether ``import replyguard`` pulled litellm in.
    """
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("PYTHONPROFILEIMPORTTIME", None)
    # Both sides import from cached bytecode, as an installed package does (pip compiles it at
    # install): with writing it turned off, a source checkout would compile every module on
    # every import, and only replyguard's side would pay for it.
    env.pop("PYTHONDONTWRITEBYTECODE", None)

    def once(module: str) -> float:
        out = subprocess.run(
            [sys.executable, "-c", _IMPORT.format(module)],
            capture_output=True,
            text=True,
            env=env,
            check=True,
            timeout=120,
        )
        return float(out.stdout.strip().splitlines()[-1])

    ours: list[float] = []
    theirs: list[float] = []
    once("replyguard")  # warm the file and bytecode caches for both
    once("litellm")
    for i in range(runs):
        if i % 2:
            theirs.append(once("litellm"))
            ours.append(once("replyguard"))
        else:
            ours.append(once("replyguard"))
            theirs.append(once("litellm"))
    probe = subprocess.run(
        [sys.executable, "-c", "import sys, replyguard; print('litellm' in sys.modules)"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=120,
    )
    return ours, theirs, probe.stdout.strip() == "True"


_COLD_VERIFIED = """
import asyncio, gc, sys, time
started = time.perf_counter()
{prelude}
sys.path.insert(0, {here!r})
import scenarios as sc
from replyguard import Reply, Verifier
{after_imports}
async def main():
    turn, reply = sc.typical_turn()
    verifier = Verifier(sc.config(sc.WIRES[{wire!r}], {url!r}, verifyAll=True))
    outcome = await verifier.run(sc.reply_agent(reply), turn)
    took = time.perf_counter() - started
    passes = gc.get_stats()[2]["collections"]
    {ending}
    assert outcome.status == "passed", outcome
    await verifier.aclose()
    print(took, passes)
asyncio.run(main())
"""

_WARM_START = """
import asyncio, sys, time
sys.path.insert(0, {here!r})
import scenarios as sc
from replyguard import Verifier
async def main():
    turn, reply = sc.typical_turn()
    verifier = Verifier(sc.config(sc.WIRES[{wire!r}], {url!r}, verifyAll=True))
    await verifier.warmup()
    await sc.settled_preload()
    took = []
    for _ in range(2):
        started = time.perf_counter()
        outcome = await verifier.run(sc.reply_agent(reply), turn)
        took.append(time.perf_counter() - started)
        assert outcome.status == "passed", outcome
    await verifier.aclose()
    print(took[0], took[1])
asyncio.run(main())
"""

_COLD_RAW = """
import asyncio, gc, json, sys, time
started = time.perf_counter()
{prelude}
import litellm
{after_imports}
params = json.loads(sys.stdin.read())
async def main():
    await litellm.acompletion(**params)
    took = time.perf_counter() - started
    passes = gc.get_stats()[2]["collections"]
    {ending}
    await litellm.close_litellm_async_clients()
    print(took, passes)
asyncio.run(main())
"""


def _fresh_interpreter(script: str, stdin: str = "") -> str:
    """The last line ``script`` prints, run in a fresh interpreter (offline price map and beta
    headers; bytecode files written, as a user's installation has them)."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.setdefault("LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS", "True")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    out = subprocess.run(
        [sys.executable, "-c", script],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=120,
    )
    return out.stdout.strip().splitlines()[-1]


COLLECTOR_MODES = ("on", "off", "frozen")
"""The collector in both cold-start scripts: as the interpreter starts it, disabled before
any import, or on with ``gc.freeze()`` once the imports are done (a host's start-up recipe)."""


def cold_scripts(
    wire: Wire, url: str, prelude: str = "", after_imports: str = "", ending: str = ""
) -> tuple[str, str]:
    """The cold-start scripts: the first verified turn, the first raw call (its parameters on
    stdin: ``judge_params``); ``ending`` runs as soon as the turn's or call's time is taken."""
    here = os.path.dirname(os.path.abspath(__file__))
    blanks = {"prelude": prelude, "after_imports": after_imports, "ending": ending}
    ours = _COLD_VERIFIED.format(here=here, wire=wire.name, url=f"{url}/fast", **blanks)
    return ours, _COLD_RAW.format(**blanks)


def cold_start_times(
    wire: Wire, url: str, runs: int, *, collector: str = "on"
) -> tuple[list[float], list[float], list[int], list[int]]:
    """The first verified turn of a fresh interpreter (its imports included: replyguard,
    litellm, the tokenizer) vs the first raw ``litellm.acompletion`` of one (``import
    litellm`` included), same parameters, alternating. Each counts from its script's start.
    Also each script's full collections (generation 2) until then (``collector``:
    ``COLLECTOR_MODES``)."""
    turn, reply = typical_turn()
    params = judge_params(config(wire, f"{url}/fast", verifyAll=True), turn, reply)
    # The garbage collector off in both: what is left is the two scripts' own work, without
    # the full passes whose count and place shift with every allocation before them.
    prelude = "gc.disable()" if collector == "off" else ""
    after_imports = "gc.freeze()" if collector == "frozen" else ""
    ours_script, raw_script = cold_scripts(wire, url, prelude, after_imports)

    def once(script: str, sink: list[float], passes: list[int], stdin: str = "") -> None:
        took, full = _fresh_interpreter(script, stdin).split()
        sink.append(float(took))
        passes.append(int(full))

    raw_input = json.dumps(params)
    once(ours_script, [], [])  # file and bytecode caches warm for both
    once(raw_script, [], [], raw_input)
    ours: list[float] = []
    theirs: list[float] = []
    our_passes: list[int] = []
    their_passes: list[int] = []
    for i in range(runs):
        if i % 2:
            once(raw_script, theirs, their_passes, raw_input)
            once(ours_script, ours, our_passes)
        else:
            once(ours_script, ours, our_passes)
            once(raw_script, theirs, their_passes, raw_input)
    return ours, theirs, our_passes, their_passes


def warm_start_times(wire: Wire, url: str, runs: int) -> tuple[list[float], list[float]]:
    """In a fresh interpreter, after ``await verifier.warmup()`` (and the background preload):
    the first verified turn and the second one, each in its own process, ``runs`` times."""
    here = os.path.dirname(os.path.abspath(__file__))
    script = _WARM_START.format(here=here, wire=wire.name, url=f"{url}/fast")
    first: list[float] = []
    second: list[float] = []
    for _ in range(runs + 1):  # the first run warms the file and bytecode caches
        one, two = (float(x) for x in _fresh_interpreter(script).split())
        first.append(one)
        second.append(two)
    return first[1:], second[1:]


def cli_wall_times(runs: int) -> tuple[list[float], list[float]]:
    """Wall time of ``replyguard heartbeat --workspace WS HEARTBEAT_OK`` (HEARTBEAT.md lists an
    open task: the check decides, no model call) vs a bare ``python -c pass``, alternating."""
    with tempfile.TemporaryDirectory() as workspace:
        with open(os.path.join(workspace, "HEARTBEAT.md"), "w", encoding="utf-8") as file:
            file.write("# Tasks\n\n- [ ] rotate the logs\n")
        return _cli_wall_times(workspace, runs)


def _cli_wall_times(workspace: str, runs: int) -> tuple[list[float], list[float]]:
    command = [
        os.path.join(os.path.dirname(sys.executable), "replyguard"),
        "heartbeat",
        "--workspace",
        workspace,
        "HEARTBEAT_OK",
    ]
    bare = [sys.executable, "-c", "pass"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

    def once(argv: list[str]) -> float:
        started = time.perf_counter()
        subprocess.run(argv, capture_output=True, env=env, check=False, timeout=120)
        return time.perf_counter() - started

    once(command)
    once(bare)
    ours: list[float] = []
    theirs: list[float] = []
    for i in range(runs):
        first, second = ((command, ours), (bare, theirs))[:: -1 if i % 2 else 1]
        for argv, sink in (first, second):
            sink.append(once(argv))
    return ours, theirs
