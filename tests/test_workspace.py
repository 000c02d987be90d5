"""``Workspace``: files read inside ``workspaceDir`` only, capped, cached by size and mtime."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from replyguard._workspace import MAX_FILE_BYTES, Workspace
from replyguard.telemetry import Events


@pytest.fixture
def root(tmp_path: Path) -> Path:
    directory = tmp_path / "workspace"
    directory.mkdir()
    (directory / "AGENTS.md").write_text("Always answer in English.\n", encoding="utf-8")
    return directory


@pytest.fixture
def workspace(root: Path) -> Workspace:
    return Workspace(str(root), Events())


def _events(logs: pytest.LogCaptureFixture) -> list[tuple[int, dict[str, Any]]]:
    return [(r.levelno, r.replyguard) for r in logs.records if hasattr(r, "replyguard")]


def _event_names(logs: pytest.LogCaptureFixture) -> list[str]:
    return [event["event"] for _, event in _events(logs)]


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every path the workspace actually reads from disk."""
    seen: list[Path] = []
    original = Workspace._load

    def counting(self: Workspace, path: Path, name: str, size: int) -> str | None:
        seen.append(path)
        return original(self, path, name, size)

    monkeypatch.setattr(Workspace, "_load", counting)
    return seen


# -- what is read ---------------------------------------------------------------------------------


def test_reads_a_file_inside_the_workspace(workspace: Workspace) -> None:
    assert workspace.read("AGENTS.md") == "Always answer in English.\n"


def test_reads_a_file_in_a_subfolder(root: Path, workspace: Workspace) -> None:
    (root / "docs").mkdir()
    (root / "docs" / "RULES.md").write_text("No emoji.", encoding="utf-8")
    assert workspace.read("docs/RULES.md") == "No emoji."


def test_reads_non_ascii_text(root: Path, workspace: Workspace) -> None:
    (root / "SOUL.md").write_text("Réponds en français 🇫🇷, 漢字も可。", encoding="utf-8")
    assert workspace.read("SOUL.md") == "Réponds en français 🇫🇷, 漢字も可。"


def test_root_is_the_resolved_directory(root: Path, workspace: Workspace) -> None:
    assert workspace.root == root.resolve()


def test_without_a_workspace_dir_nothing_is_read() -> None:
    workspace = Workspace(None, Events())
    assert (workspace.root, workspace.read("AGENTS.md")) == (None, None)


def test_missing_file_is_none_with_a_debug_event(
    workspace: Workspace, replyguard_logs: pytest.LogCaptureFixture
) -> None:
    assert workspace.read("SOUL.md") is None
    assert _events(replyguard_logs) == [
        (logging.DEBUG, {"event": "workspace_file_missing", "file": "SOUL.md"})
    ]


def test_directory_where_a_file_is_expected_is_none_and_logged(
    root: Path, workspace: Workspace, replyguard_logs: pytest.LogCaptureFixture
) -> None:
    (root / "HEARTBEAT.md").mkdir()
    assert workspace.read("HEARTBEAT.md") is None
    assert _event_names(replyguard_logs) == ["workspace_file_refused"]
    assert replyguard_logs.records[-1].levelno == logging.WARNING


# -- confinement ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["../outside.md", "docs/../../outside.md"])
def test_a_path_leaving_the_workspace_is_refused(
    root: Path, workspace: Workspace, replyguard_logs: pytest.LogCaptureFixture, name: str
) -> None:
    (root.parent / "outside.md").write_text("secret", encoding="utf-8")
    assert workspace.read(name) is None
    assert _event_names(replyguard_logs) == ["workspace_file_refused"]


def test_an_absolute_path_is_refused_even_inside_the_workspace(
    root: Path, workspace: Workspace, replyguard_logs: pytest.LogCaptureFixture
) -> None:
    assert workspace.read(str(root / "AGENTS.md")) is None
    assert _event_names(replyguard_logs) == ["workspace_file_refused"]


@pytest.mark.parametrize("target", ["file", "folder"])
def test_a_symlink_pointing_outside_is_refused(
    root: Path, workspace: Workspace, replyguard_logs: pytest.LogCaptureFixture, target: str
) -> None:
    outside = root.parent / "outside"
    outside.mkdir()
    (outside / "RULES.md").write_text("secret", encoding="utf-8")
    if target == "file":
        (root / "RULES.md").symlink_to(outside / "RULES.md")
    else:
        (root / "linked").symlink_to(outside, target_is_directory=True)
    name = "RULES.md" if target == "file" else "linked/RULES.md"
    assert workspace.read(name) is None
    assert _event_names(replyguard_logs) == ["workspace_file_refused"]


def test_a_symlink_loop_is_none_and_logged_not_raised(
    root: Path, workspace: Workspace, replyguard_logs: pytest.LogCaptureFixture
) -> None:
    (root / "AGENTS.md").unlink()
    (root / "AGENTS.md").symlink_to(root / "SOUL.md")
    (root / "SOUL.md").symlink_to(root / "AGENTS.md")
    assert workspace.read("AGENTS.md") is None
    assert len(_event_names(replyguard_logs)) == 1


def test_a_name_with_a_nul_byte_is_none_and_logged_not_raised(
    workspace: Workspace, replyguard_logs: pytest.LogCaptureFixture
) -> None:
    assert workspace.read("AGENTS\x00.md") is None
    assert len(_event_names(replyguard_logs)) == 1


def test_a_symlink_pointing_inside_is_followed(root: Path, workspace: Workspace) -> None:
    (root / "rules").mkdir()
    (root / "rules" / "main.md").write_text("Be brief.", encoding="utf-8")
    (root / "SOUL.md").symlink_to(root / "rules" / "main.md")
    assert workspace.read("SOUL.md") == "Be brief."


def test_a_workspace_reached_through_a_symlink_reads_its_files(tmp_path: Path, root: Path) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(root, target_is_directory=True)
    assert Workspace(str(alias), Events()).read("AGENTS.md") == "Always answer in English.\n"


# -- size cap -------------------------------------------------------------------------------------


def test_a_file_over_the_cap_is_cut_and_marked(
    root: Path, workspace: Workspace, replyguard_logs: pytest.LogCaptureFixture
) -> None:
    size = MAX_FILE_BYTES + 1000
    (root / "BIG.md").write_bytes(b"x" * size)
    text = workspace.read("BIG.md")
    assert text is not None
    kept, marker = text.split("\n[…", 1)
    assert kept == "x" * MAX_FILE_BYTES
    assert f"{MAX_FILE_BYTES:,}" in marker
    assert f"{size:,}" in marker
    assert "workspace_file_truncated" in _event_names(replyguard_logs)


@pytest.mark.parametrize("size", [MAX_FILE_BYTES - 1, MAX_FILE_BYTES])
def test_a_file_up_to_the_cap_is_read_whole(root: Path, workspace: Workspace, size: int) -> None:
    (root / "BIG.md").write_bytes(b"y" * size)
    assert workspace.read("BIG.md") == "y" * size


def test_invalid_utf8_is_replaced_not_raised(root: Path, workspace: Workspace) -> None:
    (root / "BAD.md").write_bytes(b"ok \xff\xfe end")
    assert workspace.read("BAD.md") == "ok \ufffd\ufffd end"


# -- cache ----------------------------------------------------------------------------------------


def test_an_unchanged_file_is_read_from_disk_once(workspace: Workspace, loads: list[Path]) -> None:
    texts = {workspace.read("AGENTS.md") for _ in range(5)}
    assert texts == {"Always answer in English.\n"}
    assert len(loads) == 1


def test_each_file_is_cached_on_its_own(
    root: Path, workspace: Workspace, loads: list[Path]
) -> None:
    (root / "SOUL.md").write_text("Be kind.", encoding="utf-8")
    for _ in range(3):
        workspace.read("AGENTS.md")
        workspace.read("SOUL.md")
    assert sorted(path.name for path in loads) == ["AGENTS.md", "SOUL.md"]


def _grow(path: Path) -> str:
    path.write_text("Always answer in German, briefly.\n", encoding="utf-8")
    return "Always answer in German, briefly.\n"


def _touch_same_size(path: Path) -> str:
    before = path.stat()
    path.write_text("Always answer in French.\n".ljust(before.st_size), encoding="utf-8")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 5_000_000_000))
    assert path.stat().st_size == before.st_size
    return path.read_text(encoding="utf-8")


@pytest.mark.parametrize("change", [_grow, _touch_same_size], ids=["new-size", "new-mtime"])
def test_a_changed_file_is_read_again(
    root: Path, workspace: Workspace, loads: list[Path], change: Callable[[Path], str]
) -> None:
    path = root / "AGENTS.md"
    assert workspace.read("AGENTS.md") == "Always answer in English.\n"
    expected = change(path)
    assert workspace.read("AGENTS.md") == expected
    assert len(loads) == 2


def test_a_deleted_file_is_no_longer_served_from_the_cache(
    root: Path, workspace: Workspace
) -> None:
    assert workspace.read("AGENTS.md") is not None
    (root / "AGENTS.md").unlink()
    assert workspace.read("AGENTS.md") is None


def test_a_fifo_is_refused_without_blocking(
    root: Path, workspace: Workspace, replyguard_logs: pytest.LogCaptureFixture
) -> None:
    os.mkfifo(root / "SOUL.md")  # opening it for reading would wait for a writer forever
    assert workspace.read("SOUL.md") is None
    assert _event_names(replyguard_logs) == ["workspace_file_refused"]


async def test_a_waiter_cancelled_leaves_the_shared_read_to_the_others() -> None:
    """Turns share a queued read: one turn cancelled (its deadline, its host) must not cancel
    the read under the others, as ``asyncio.wrap_future`` would."""
    from concurrent.futures import Future

    from replyguard._workspace import _awaited_on

    loop = asyncio.get_running_loop()
    read: Future[str] = Future()
    cancelled, kept = _awaited_on(loop, read), _awaited_on(loop, read)
    cancelled.cancel()
    await asyncio.sleep(0)
    assert not read.cancelled()
    threading.Thread(target=read.set_result, args=("rules",)).start()
    assert await asyncio.wait_for(kept, 5) == "rules"
    assert cancelled.cancelled()


async def test_idle_readers_end_and_a_later_read_starts_new_ones(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host that makes a workspace per request leaves no threads behind."""
    from replyguard import _workspace

    monkeypatch.setattr(_workspace, "_IDLE_SECONDS", 0.05)
    assert workspace.root is not None
    for _ in range(2):
        reading = workspace.read_later(["AGENTS.md"])
        assert reading is not None
        readers = _workspace._readers[workspace.root]
        assert await asyncio.wait_for(reading, 5) == ("Always answer in English.\n",)
        for _ in range(200):  # the readers end on their own once idle
            if workspace.root not in _workspace._readers:
                break
            await asyncio.sleep(0.025)
        assert workspace.root not in _workspace._readers
        assert readers._threads == 0


async def test_a_workspace_read_that_gets_no_thread_fails_the_judgement_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from replyguard import Reason, Status, Turn, Verifier, VerifierConfig
    from replyguard.runner._preload import wait_for_preload
    from replyguard.testing import ScriptedJudge

    (tmp_path / "AGENTS.md").write_text("Answer in English.", encoding="utf-8")
    config = VerifierConfig.from_dict(
        {"enabled": True, "verifyAll": True, "workspaceDir": str(tmp_path)}
    )
    verifier = Verifier(config, judge=ScriptedJudge(["PASS"]))
    assert wait_for_preload(60)

    async def agent(messages: list[dict[str, Any]]) -> str:
        return "Done: the report."

    def no_thread(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    with monkeypatch.context() as patched:  # a process at its thread limit
        patched.setattr(threading.Thread, "start", no_thread)
        outcome = await verifier.run(agent, Turn(user_message="q"))
    # Before, the read's start raised out of run, before the agent was even called.
    assert (outcome.status, outcome.reason) == (Status.FAILED_OPEN, Reason.INTERNAL_ERROR)
    assert outcome.response == "Done: the report."
    verdict = outcome.attempts[-1].verdict
    assert verdict is not None and "can't start new thread" in (verdict.error or "")
    again = await verifier.run(agent, Turn(user_message="q"))  # threads to be had again
    assert again.status == Status.PASSED
    await verifier.aclose()
