"""``HeartbeatCheck``: HEARTBEAT_OK while HEARTBEAT.md lists open tasks fails; none open passes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from replyguard.checks.base import Check, CheckResult
from replyguard.checks.heartbeat import HeartbeatCheck, is_acknowledgement, open_tasks
from replyguard.checks.markdown import bulleted, prose_lines
from replyguard.telemetry import Events
from replyguard.types import FailCategory, Reply, Turn

HEARTBEAT = Turn(user_message="Read HEARTBEAT.md and work through it.", heartbeat=True)
ORDINARY = Turn(user_message="How are you?")
TASKS = "# Heartbeat\n\n- [ ] Check the inbox\n- [x] Renew the certificate\n- Water the plants\n"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "HEARTBEAT.md").write_text(TASKS, encoding="utf-8")
    return tmp_path


async def run(
    workspace: Path | None,
    text: str = "HEARTBEAT_OK",
    turn: Turn = HEARTBEAT,
    heartbeat_file: str = "HEARTBEAT.md",
) -> CheckResult:
    directory = str(workspace) if workspace else None
    check = HeartbeatCheck(workspace_dir=directory, heartbeat_file=heartbeat_file)
    return await check.check(turn, Reply(text=text))


def test_a_heartbeat_check_is_a_check() -> None:
    check = HeartbeatCheck(workspace_dir=None, name="hb", required=True, events=Events())
    assert (isinstance(check, Check), check.name, check.required) == (True, "hb", True)


# -- the check --------------------------------------------------------------------------------


async def test_heartbeat_ok_with_open_tasks_fails_as_goal_missed(workspace: Path) -> None:
    result = await run(workspace)
    assert (result.passed, result.category) == (False, FailCategory.GOAL_MISSED)


async def test_the_feedback_lists_the_open_tasks_and_asks_for_the_work(workspace: Path) -> None:
    assert (await run(workspace)).feedback == (
        "The reply is HEARTBEAT_OK, but HEARTBEAT.md still lists 2 open tasks:\n"
        "- Check the inbox\n"
        "- Water the plants\n"
        "Work through them now and report what you did; answer HEARTBEAT_OK only when nothing "
        "in the list needs attention."
    )


async def test_one_open_task_is_counted_in_the_singular(workspace: Path) -> None:
    (workspace / "HEARTBEAT.md").write_text("- Check the inbox\n", encoding="utf-8")
    assert "still lists 1 open task:\n" in ((await run(workspace)).feedback or "")


async def test_at_most_ten_open_tasks_are_listed_then_the_rest_counted(workspace: Path) -> None:
    tasks = "".join(f"- task {n}\n" for n in range(14))
    (workspace / "HEARTBEAT.md").write_text(tasks, encoding="utf-8")
    lines = ((await run(workspace)).feedback or "").splitlines()
    assert (lines[10], lines[11]) == ("- task 9", "- … and 4 more")


async def test_heartbeat_ok_with_no_open_tasks_passes_decisively(workspace: Path) -> None:
    (workspace / "HEARTBEAT.md").write_text("# Heartbeat\n- [x] done\n", encoding="utf-8")
    result = await run(workspace)
    assert (result.passed, result.decisive) == (True, True)


async def test_heartbeat_ok_with_an_empty_file_passes_decisively(workspace: Path) -> None:
    (workspace / "HEARTBEAT.md").write_text("", encoding="utf-8")
    assert (await run(workspace)).decisive


async def test_a_reply_that_is_not_heartbeat_ok_is_left_to_the_judge(workspace: Path) -> None:
    result = await run(workspace, "Checked the inbox: two new orders, both confirmed.")
    assert (result.passed, result.decisive) == (True, False)


async def test_an_ordinary_turn_is_left_to_the_judge(workspace: Path) -> None:
    result = await run(workspace, turn=ORDINARY)
    assert (result.passed, result.decisive) == (True, False)


async def test_a_missing_file_is_left_to_the_judge(tmp_path: Path) -> None:
    result = await run(tmp_path)
    assert (result.passed, result.decisive) == (True, False)


async def test_no_workspace_is_left_to_the_judge() -> None:
    result = await run(None)
    assert (result.passed, result.decisive) == (True, False)


async def test_a_file_outside_the_workspace_is_not_read(workspace: Path) -> None:
    inner = workspace / "agent"
    inner.mkdir()
    result = await run(inner, heartbeat_file="../HEARTBEAT.md")
    assert (result.passed, result.decisive) == (True, False)


async def test_the_configured_file_name_is_read_and_named(workspace: Path) -> None:
    (workspace / "TODO.md").write_text("- [ ] Ship it\n", encoding="utf-8")
    result = await run(workspace, heartbeat_file="TODO.md")
    assert (result.feedback or "").startswith("The reply is HEARTBEAT_OK, but TODO.md still lists")


async def test_a_changed_file_is_read_again(workspace: Path) -> None:
    check = HeartbeatCheck(workspace_dir=str(workspace))
    first = await check.check(HEARTBEAT, Reply(text="HEARTBEAT_OK"))
    path = workspace / "HEARTBEAT.md"
    path.write_text("- [x] Check the inbox\n", encoding="utf-8")
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    second = await check.check(HEARTBEAT, Reply(text="HEARTBEAT_OK"))
    assert (first.passed, second.passed, second.decisive) == (False, True, True)


async def test_a_refused_file_is_reported_through_the_given_events(
    workspace: Path, replyguard_logs: pytest.LogCaptureFixture
) -> None:
    check = HeartbeatCheck(workspace_dir=str(workspace), heartbeat_file="/etc/passwd")
    await check.check(HEARTBEAT, Reply(text="HEARTBEAT_OK"))
    events = [r.replyguard["event"] for r in replyguard_logs.records if hasattr(r, "replyguard")]
    assert events == ["workspace_file_refused"]


# -- what counts as HEARTBEAT_OK --------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "HEARTBEAT_OK",
        "  HEARTBEAT_OK\n",
        "HEARTBEAT_OK.",
        "HEARTBEAT_OK!",
        "**HEARTBEAT_OK**",
        "__HEARTBEAT_OK__",
        "_HEARTBEAT_OK_",
        "`HEARTBEAT_OK`",
        "```\nHEARTBEAT_OK\n```",
        '"HEARTBEAT_OK"',
        "HEARTBEAT_OK - all quiet.",
        "HEARTBEAT_OK\n\nNothing needed attention.",
        "Nothing to do. HEARTBEAT_OK",
        "HEARTBEAT_OK " + "x" * 300,
    ],
    ids=repr,
)
def test_an_acknowledgement_counts(text: str) -> None:
    assert is_acknowledgement(text)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "heartbeat_ok",
        "Heartbeat OK",
        "HEARTBEAT_OKAY",
        "HEARTBEAT_OK_DONE",
        "NOT_HEARTBEAT_OK",
        "I checked everything; HEARTBEAT_OK was not warranted, here is why.",
        "HEARTBEAT_OK " + "x" * 301,
        "x" * 301 + " HEARTBEAT_OK",
    ],
    ids=lambda text: repr(text[:40]),
)
def test_anything_else_is_not_an_acknowledgement(text: str) -> None:
    assert not is_acknowledgement(text)


# -- open tasks -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("markdown", "tasks"),
    [
        ("- [ ] unticked", ["unticked"]),
        ("- plain dash", ["plain dash"]),
        ("* star", ["star"]),
        ("+ plus", ["plus"]),
        ("1. dotted number", ["dotted number"]),
        ("12) parenthesised number", ["parenthesised number"]),
        ("* [ ] unticked star", ["unticked star"]),
        ("1. [ ] unticked number", ["unticked number"]),
        ("- parent\n  - nested\n\t- tab nested", ["parent", "nested", "tab nested"]),
        ("- [x] ticked", []),
        ("- [X] ticked upper", []),
        ("* [x] ticked star", []),
        ("- [ ]", []),
        ("- [ ]   ", []),
        ("- ", []),
        ("# Heading\n## - not a task", []),
        ("A paragraph.\n\n\n", []),
        ("-not a list item", []),
        ("* * *\n- - -\n___", []),
        ("<!-- - hidden -->", []),
        ("<!--\n- hidden\n- also hidden\n-->\n- shown", ["shown"]),
        ("- shown <!-- note --> too", ["shown  too"]),
        ("```\n- in code\n```\n- after code", ["after code"]),
        ("~~~markdown\n- in code\n~~~", []),
        ("```\n- unclosed code fence", []),
        ("> - quoted", []),
        ("- task   ", ["task"]),
        ("- [ ] task with `code` and **bold**", ["task with `code` and **bold**"]),
    ],
    ids=repr,
)
def test_open_tasks(markdown: str, tasks: list[str]) -> None:
    assert open_tasks(markdown) == tasks


@pytest.mark.parametrize(
    "markdown",
    [
        "---\ntags:\n  - ops\n  - daily\n---\n# Tasks\n- [x] done",
        "---\r\n- a\r\n...\r\n",
        "---\n---\n",
    ],
    ids=["dashes", "dots-crlf", "empty"],
)
def test_a_yaml_front_matter_block_holds_no_tasks(markdown: str) -> None:
    assert open_tasks(markdown) == []


@pytest.mark.parametrize(
    ("markdown", "tasks"),
    [
        ("---\n- [ ] never closed", ["never closed"]),
        ("# Title\n---\n- [ ] below a break\n---", ["below a break"]),
    ],
    ids=["unclosed", "not-at-the-top"],
)
def test_dashes_that_do_not_open_the_file_and_close_are_no_front_matter(
    markdown: str, tasks: list[str]
) -> None:
    assert open_tasks(markdown) == tasks


@pytest.mark.parametrize(
    "markdown",
    ["- [x]done", "- [ x ] spaced", "* [ X ] spaced upper", "- [\u2713] check", "- [\u2714] heavy"],
    ids=repr,
)
def test_other_spellings_of_a_ticked_box_are_done(markdown: str) -> None:
    assert open_tasks(markdown) == []


@pytest.mark.parametrize("markdown", ["- [-] cancelled", "- [~] skipped", "1. [ - ] dropped"])
def test_cancelled_and_skipped_boxes_are_not_open(markdown: str) -> None:
    assert open_tasks(markdown) == []


def test_an_unticked_box_with_text_right_after_it_is_open() -> None:
    assert open_tasks("- [ ]Renew the certificate") == ["Renew the certificate"]


def test_an_unknown_box_mark_keeps_the_item_open_mark_and_all() -> None:
    assert open_tasks("- [/] half done\n- [link](https://x.test) to read") == [
        "[/] half done",
        "[link](https://x.test) to read",
    ]


@pytest.mark.parametrize(
    "markdown",
    [
        "Example:\n\n    - [ ] in code\n\n    - [ ] still code\n\n- [x] real",
        "Example:\n\n\t- [ ] tab code",
        "- [x] a\n\nNotes after the list:\n\n    - [ ] in code",
    ],
    ids=["spaces", "tab", "after-a-list"],
)
def test_an_indented_code_block_holds_no_tasks(markdown: str) -> None:
    assert open_tasks(markdown) == []


@pytest.mark.parametrize(
    ("markdown", "tasks"),
    [
        ("- [x] parent\n\n    - [ ] child", ["child"]),
        ("- [x] parent\n  lazy continuation\n\n    - [ ] child", ["child"]),
        ("    - [ ] at the top", ["at the top"]),
    ],
    ids=["in-a-list", "after-a-continuation", "top-of-file"],
)
def test_indented_items_inside_a_list_or_at_the_top_are_tasks(
    markdown: str, tasks: list[str]
) -> None:
    assert open_tasks(markdown) == tasks


def test_open_tasks_keep_document_order() -> None:
    assert open_tasks(TASKS) == ["Check the inbox", "Water the plants"]


# -- shared markdown helpers ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("markdown", "lines"),
    [
        ("a\n```python\ncode\n```\nb", ["a", "b"]),
        ("a\n````\n```\nstill code\n````\nb", ["a", "b"]),
        ("a\n~~~\n```\n~~~\nb", ["a", "b"]),
        ("```\n```js\n- still code\n```\nb", ["b"]),
        ("  ```\n  code\n  ```\nb", ["b"]),
        ("```code``` inline", ["```code``` inline"]),
        ("a <!-- x --> b <!-- y --> c", ["a  b  c"]),
        ("a <!--\n```\n--> b", ["a ", "", " b"]),
    ],
    ids=repr,
)
def test_prose_lines_drop_code_fences_and_comments(markdown: str, lines: list[str]) -> None:
    assert list(prose_lines(markdown)) == lines


def test_bulleted_lists_up_to_the_limit_then_counts_the_rest() -> None:
    assert bulleted(["a", "b", "c"], 2) == "- a\n- b\n- … and 1 more"


def test_bulleted_lists_everything_within_the_limit() -> None:
    assert bulleted(["a", "b"], 2) == "- a\n- b"
