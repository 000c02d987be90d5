"""Workspace files that are not what they seem: each is refused, or read safely and capped.

Rules files and ``HEARTBEAT.md`` are named by the operator but written by anyone with access
to the workspace, the agent included. Each hostile file below is tried through
``Workspace.read`` and through a whole turn (``Verifier.run_sync`` with a ``ScriptedJudge``),
where what reaches the judge is the prompt's rules or heartbeat section. Reads run in a daemon
thread with a deadline, so a read that blocks (a FIFO opened for reading waits for a writer)
fails its test instead of hanging the suite.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from replyguard import Outcome, Status, Turn, Verifier, VerifierConfig
from replyguard._workspace import MAX_FILE_BYTES, Workspace
from replyguard.context import JudgePrompt
from replyguard.telemetry import Events
from replyguard.testing import ScriptedAgent, ScriptedJudge

RULES = "Always answer in English."
TASK = "- [ ] check the inbox"
OUTSIDE_TEXT = "outside-the-workspace: never show this to the judge"
GIGABYTE = 1 << 30
CUT_MARKER = re.compile(r"\[… [^\]]*\bcut\b[^\]]* …\]")
"""How the judge is told that a text was shortened (by the workspace cap or a token cap)."""
DEADLINE = 10.0
"""Seconds a read or a turn may take before it counts as blocked."""

T = TypeVar("T")


def off_thread(call: Callable[[], T], timeout: float = DEADLINE) -> T:
    """``call()`` in a daemon thread; fails the test if it has not returned within ``timeout``."""
    results: queue.Queue[tuple[bool, Any]] = queue.Queue()

    def run() -> None:
        try:
            results.put((True, call()))
        except BaseException as exc:
            results.put((False, exc))

    threading.Thread(target=run, daemon=True).start()
    try:
        ok, value = results.get(timeout=timeout)
    except queue.Empty:
        pytest.fail(f"blocked for more than {timeout} s")
    if not ok:
        raise value
    return value  # type: ignore[no-any-return]


def release_fifo(path: Path) -> None:
    """Open the write end of a FIFO and close it, so a reader stuck opening it gets EOF."""
    with contextlib.suppress(OSError):  # no reader waiting: nothing to release
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    directory = tmp_path / "workspace"
    directory.mkdir()
    return directory


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    directory = tmp_path / "outside"
    directory.mkdir()
    (directory / "SECRET.md").write_text(OUTSIDE_TEXT, encoding="utf-8")
    return directory


@pytest.fixture
def fifos() -> Iterator[list[Path]]:
    """FIFOs a test made; released at teardown in case a reader got stuck on one."""
    made: list[Path] = []
    yield made
    for path in made:
        release_fifo(path)


# -- hostile files ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Hostile:
    """Puts something that must not be read at ``name`` inside the workspace."""

    id: str
    make: Callable[[Path, Path, str, list[Path]], None]
    """``make(root, outside, name, fifos)``"""


def _mkfifo(path: Path, fifos: list[Path]) -> None:
    os.mkfifo(path)
    fifos.append(path)


def _to_outside(root: Path, outside: Path, name: str, fifos: list[Path]) -> None:
    (root / name).symlink_to(outside / "SECRET.md")


def _climbing_out(root: Path, outside: Path, name: str, fifos: list[Path]) -> None:
    (root / name).symlink_to(Path("..") / "outside" / "SECRET.md")


def _chain_out(root: Path, outside: Path, name: str, fifos: list[Path]) -> None:
    """Two hops: the first stays inside, the second leaves."""
    (root / "inside.md").symlink_to(outside / "SECRET.md")
    (root / name).symlink_to("inside.md")


def _to_dev_zero(root: Path, outside: Path, name: str, fifos: list[Path]) -> None:
    (root / name).symlink_to("/dev/zero")


def _to_dev_stdin(root: Path, outside: Path, name: str, fifos: list[Path]) -> None:
    (root / name).symlink_to("/dev/stdin")


def _fifo(root: Path, outside: Path, name: str, fifos: list[Path]) -> None:
    _mkfifo(root / name, fifos)


def _to_fifo_inside(root: Path, outside: Path, name: str, fifos: list[Path]) -> None:
    _mkfifo(root / ".pipe", fifos)
    (root / name).symlink_to(root / ".pipe")


def _relative_to_fifo_inside(root: Path, outside: Path, name: str, fifos: list[Path]) -> None:
    _mkfifo(root / ".pipe", fifos)
    (root / name).symlink_to(".pipe")


def _directory(root: Path, outside: Path, name: str, fifos: list[Path]) -> None:
    (root / name).mkdir()


def _to_directory_inside(root: Path, outside: Path, name: str, fifos: list[Path]) -> None:
    (root / "docs").mkdir()
    (root / name).symlink_to(root / "docs")


def _loop(root: Path, outside: Path, name: str, fifos: list[Path]) -> None:
    (root / name).symlink_to(root / "loop-b")
    (root / "loop-b").symlink_to(root / name)


def _dangling(root: Path, outside: Path, name: str, fifos: list[Path]) -> None:
    (root / name).symlink_to(root / "gone.md")


HOSTILE = [
    Hostile("symlink-to-a-file-outside", _to_outside),
    Hostile("relative-symlink-climbing-out", _climbing_out),
    Hostile("symlink-chain-leaving-at-the-second-hop", _chain_out),
    Hostile("symlink-to-dev-zero", _to_dev_zero),
    Hostile("symlink-to-dev-stdin", _to_dev_stdin),
    Hostile("fifo", _fifo),
    Hostile("symlink-to-a-fifo-inside", _to_fifo_inside),
    Hostile("relative-symlink-to-a-fifo-inside", _relative_to_fifo_inside),
    Hostile("directory", _directory),
    Hostile("symlink-to-a-directory-inside", _to_directory_inside),
    Hostile("symlink-loop", _loop),
    Hostile("dangling-symlink", _dangling),
]
HOSTILE_IDS = [h.id for h in HOSTILE]


@pytest.fixture(params=HOSTILE, ids=HOSTILE_IDS)
def hostile(request: pytest.FixtureRequest) -> Hostile:
    return request.param  # type: ignore[no-any-return]


Plant = Callable[[str], None]
Judged = Callable[..., tuple[Outcome, JudgePrompt]]


@pytest.fixture
def plant(hostile: Hostile, root: Path, outside: Path, fifos: list[Path]) -> Plant:
    """Put this kind of hostile file at ``name`` in the workspace."""
    return lambda name: hostile.make(root, outside, name, fifos)


# -- through Workspace.read ---------------------------------------------------------------------


def test_workspace_read_refuses_a_hostile_file(plant: Plant, root: Path) -> None:
    plant("AGENTS.md")
    workspace = Workspace(str(root), Events())
    assert off_thread(lambda: workspace.read("AGENTS.md")) is None


def test_workspace_read_logs_a_hostile_file_without_its_content(
    plant: Plant, root: Path, replyguard_logs: pytest.LogCaptureFixture
) -> None:
    plant("AGENTS.md")
    off_thread(lambda: Workspace(str(root), Events()).read("AGENTS.md"))
    events = [r.replyguard for r in replyguard_logs.records]  # type: ignore[attr-defined]
    assert [e["file"] for e in events] == ["AGENTS.md"]
    assert OUTSIDE_TEXT not in repr(events)


@pytest.mark.parametrize("device", ["null", "zero", "urandom"])
def test_a_device_inside_the_workspace_is_refused_as_not_a_regular_file(
    device: str, replyguard_logs: pytest.LogCaptureFixture
) -> None:
    # /dev as the workspace puts real character devices inside it, no privilege needed.
    assert Workspace("/dev", Events()).read(device) is None
    events = [getattr(r, "replyguard", {}) for r in replyguard_logs.records]
    assert {"event": "workspace_file_refused", "file": device, "why": "not a regular file"} in [
        {k: e.get(k) for k in ("event", "file", "why")} for e in events
    ]


@pytest.mark.parametrize(
    "name",
    [
        "../outside/SECRET.md",
        "docs/../../outside/SECRET.md",
        "./../outside/SECRET.md",
        "/dev/zero",
        "AGENTS\x00.md",
    ],
)
def test_workspace_read_refuses_a_name_that_leaves_the_workspace(
    root: Path, outside: Path, name: str
) -> None:
    assert Workspace(str(root), Events()).read(name) is None


def test_workspace_read_refuses_an_absolute_name_outside(root: Path, outside: Path) -> None:
    assert Workspace(str(root), Events()).read(str(outside / "SECRET.md")) is None


def test_workspace_read_refuses_a_file_swapped_for_a_fifo_after_its_stat(
    root: Path, fifos: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    (root / "AGENTS.md").write_text(RULES, encoding="utf-8")
    original = Workspace._load

    def swap_then_load(self: Workspace, path: Path, name: str, size: int) -> str | None:
        path.unlink()
        _mkfifo(path, fifos)
        return original(self, path, name, size)

    monkeypatch.setattr(Workspace, "_load", swap_then_load)
    assert off_thread(lambda: Workspace(str(root), Events()).read("AGENTS.md")) is None


# -- files read safely, capped -------------------------------------------------------------------


def _sparse(path: Path, head: str, size: int = GIGABYTE) -> None:
    """A file of ``size`` bytes that holds ``head`` and then a hole: no gigabyte is written."""
    with path.open("wb") as handle:
        handle.write(head.encode("utf-8"))
        handle.truncate(size)


def test_a_gigabyte_file_is_read_up_to_the_cap(root: Path) -> None:
    _sparse(root / "AGENTS.md", RULES + "\n")
    text = off_thread(lambda: Workspace(str(root), Events()).read("AGENTS.md"))
    assert text is not None
    kept, _, marker = text.partition("\n[…")
    assert (len(kept.encode("utf-8")), kept.startswith(RULES)) == (MAX_FILE_BYTES, True)
    assert f"{GIGABYTE:,}" in marker


def test_invalid_utf8_is_read_with_replacement_characters(root: Path) -> None:
    (root / "AGENTS.md").write_bytes(RULES.encode() + b" \xff\xfe \xc3(")
    text = Workspace(str(root), Events()).read("AGENTS.md")
    assert text == RULES + " \ufffd\ufffd \ufffd("


def test_a_cut_inside_a_character_drops_it_rather_than_garbling_it(root: Path) -> None:
    euros = "€" * (MAX_FILE_BYTES // 3 + 10)  # three bytes each: the cap falls inside one
    (root / "AGENTS.md").write_text(euros, encoding="utf-8")
    text = Workspace(str(root), Events()).read("AGENTS.md")
    assert text is not None
    kept = text.partition("\n[…")[0]
    assert kept == "€" * (MAX_FILE_BYTES // 3)


def test_a_file_that_grows_past_the_cap_while_read_is_cut_and_marked(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = root / "AGENTS.md"
    path.write_text(RULES, encoding="utf-8")
    original = Workspace._load

    def grow_then_load(self: Workspace, where: Path, name: str, size: int) -> str | None:
        where.write_bytes(b"x" * (MAX_FILE_BYTES * 2))
        return original(self, where, name, size)

    monkeypatch.setattr(Workspace, "_load", grow_then_load)
    text = Workspace(str(root), Events()).read("AGENTS.md")
    assert text is not None
    assert text.endswith(f"was cut at {MAX_FILE_BYTES:,} bytes of {MAX_FILE_BYTES * 2:,} …]")


# -- through a whole turn -----------------------------------------------------------------------


def section(prompt: JudgePrompt, name: str) -> str | None:
    """The body of the prompt's section ``name``, or None when the prompt has none."""
    code = re.escape(prompt.nonce)
    found = re.search(rf"<{name}-{code}>\n(.*?)\n</{name}-{code}>", prompt.user, re.DOTALL)
    return found.group(1) if found else None


@pytest.fixture
def judged(make_config: Callable[..., VerifierConfig], root: Path) -> Judged:
    """Run one turn with the workspace at ``root``; return the outcome and the judge's prompt."""

    def run(reply: str = "Done: the inbox is empty.", heartbeat: bool = False, **keys: Any) -> Any:
        config = make_config(workspaceDir=str(root), verifyAll=True, verifyHeartbeat=True, **keys)
        judge = ScriptedJudge(["PASS"])
        verifier = Verifier(config, judge=judge)
        try:
            turn = Turn(user_message="Check my inbox.", heartbeat=heartbeat)
            outcome = off_thread(lambda: verifier.run_sync(ScriptedAgent([reply]), turn))
        finally:
            verifier.close()
        judge.assert_exhausted()
        return outcome, judge.calls[0]

    return run


def test_a_turn_with_a_hostile_rules_file_has_no_rules_section(
    plant: Plant, judged: Judged
) -> None:
    plant("AGENTS.md")
    _, prompt = judged(rulesFiles=["AGENTS.md"])
    assert section(prompt, "user_rules") is None


def test_a_turn_with_a_hostile_rules_file_is_delivered(plant: Plant, judged: Judged) -> None:
    plant("AGENTS.md")
    outcome, _ = judged(rulesFiles=["AGENTS.md"])
    assert (outcome.status, outcome.response) == (Status.PASSED, "Done: the inbox is empty.")


def test_a_hostile_rules_file_beside_a_good_one_leaves_the_good_one(
    plant: Plant, root: Path, judged: Judged
) -> None:
    plant("AGENTS.md")
    (root / "SOUL.md").write_text(RULES, encoding="utf-8")
    _, prompt = judged(rulesFiles=["AGENTS.md", "SOUL.md"])
    assert section(prompt, "user_rules") == f"## SOUL.md\n{RULES}"


def test_a_heartbeat_turn_with_a_hostile_task_file_has_no_task_section(
    plant: Plant, judged: Judged
) -> None:
    plant("HEARTBEAT.md")
    _, prompt = judged(heartbeat=True)
    assert section(prompt, "heartbeat_tasks") is None


def test_heartbeat_ok_with_a_hostile_task_file_goes_to_the_judge(
    plant: Plant, judged: Judged
) -> None:
    """The heartbeat check reads the file only for an acknowledgement: unreadable, it has no
    opinion, and the judge decides."""
    plant("HEARTBEAT.md")
    outcome, _ = judged(reply="HEARTBEAT_OK", heartbeat=True)
    assert outcome.status == Status.PASSED


def test_a_gigabyte_rules_file_reaches_the_judge_cut_within_the_budget(
    root: Path, judged: Judged
) -> None:
    _sparse(root / "AGENTS.md", RULES + "\n")
    _, prompt = judged(rulesFiles=["AGENTS.md"], contextTokenBudget=4000)
    rules = section(prompt, "user_rules")
    assert rules is not None and rules.startswith(f"## AGENTS.md\n{RULES}")
    assert CUT_MARKER.search(rules)
    assert prompt.tokens <= 4000


def test_a_gigabyte_heartbeat_file_reaches_the_judge_cut_within_the_budget(
    root: Path, judged: Judged
) -> None:
    _sparse(root / "HEARTBEAT.md", TASK + "\n")
    _, prompt = judged(heartbeat=True, contextTokenBudget=4000)
    tasks = section(prompt, "heartbeat_tasks")
    assert tasks is not None and tasks.startswith(TASK)
    assert CUT_MARKER.search(tasks)
    assert prompt.tokens <= 4000


def test_heartbeat_ok_against_a_gigabyte_task_file_fails_on_its_open_task(
    root: Path, make_config: Callable[..., VerifierConfig]
) -> None:
    """The heartbeat check reads the capped head of the file and finds the task there."""
    _sparse(root / "HEARTBEAT.md", TASK + "\n")
    config = make_config(workspaceDir=str(root), verifyHeartbeat=True, maxAttempts=1)
    verifier = Verifier(config, judge=ScriptedJudge([]))
    try:
        turn = Turn(user_message="heartbeat", heartbeat=True)
        outcome = off_thread(lambda: verifier.run_sync(ScriptedAgent(["HEARTBEAT_OK"]), turn))
    finally:
        verifier.close()
    assert outcome.status == Status.EXHAUSTED


def test_invalid_utf8_rules_reach_the_judge_with_replacement_characters(
    root: Path, judged: Judged
) -> None:
    (root / "AGENTS.md").write_bytes(RULES.encode() + b" \xff\xfe")
    _, prompt = judged(rulesFiles=["AGENTS.md"])
    assert section(prompt, "user_rules") == f"## AGENTS.md\n{RULES} \ufffd\ufffd"
