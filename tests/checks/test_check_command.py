"""``CommandCheck``: runs a command on the reply, safely (no shell, bounded output, no orphans)."""

from __future__ import annotations

import asyncio
import ctypes
import os
import shlex
import stat
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from replyguard import ConfigError, Verifier, VerifierConfig
from replyguard.checks.base import Check
from replyguard.checks.command import CommandCheck
from replyguard.types import FailCategory, Reply, Turn

pytestmark = pytest.mark.timing  # scripts/under_load.sh runs these beside CPU-bound work

PY = sys.executable
TURN = Turn(user_message="fix the lint errors")

# Starts a grandchild that inherits stdout and sleeps, records "<own pid> <grandchild pid>" in
# the file named by argv[1], then sleeps too, or exits 0 at once when argv[2] is "exit".
SPAWN_AND_HANG = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(f"{os.getpid()} {child.pid}")
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
print("started", flush=True)
if sys.argv[2] != "exit":
    time.sleep(60)
"""


def python(source: str, *args: str) -> list[str]:
    return [PY, "-c", source, *args]


async def run(check: CommandCheck, text: str = "the reply") -> tuple[bool, str]:
    result = await check.check(TURN, Reply(text=text))
    return result.passed, result.feedback or ""


def gone(pid: int) -> bool:
    """The process no longer exists (a zombie whose parent died counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, IndexError):
        return True


async def wait_gone(*pids: int, within: float = 3.0) -> bool:
    deadline = time.monotonic() + within
    while not all(gone(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


def exists(path: str | Path) -> bool:
    return os.path.exists(path)


def read(path: Path) -> str:
    return path.read_text()


async def wait_for_file(path: Path, within: float = 5.0) -> str:
    deadline = time.monotonic() + within
    while not exists(path):
        assert time.monotonic() < deadline, f"{path} never appeared"
        await asyncio.sleep(0.01)
    return read(path)


async def test_exit_zero_passes() -> None:
    check = CommandCheck(python("pass"))
    result = await check.check(TURN, Reply(text="ok"))
    assert result.passed and result.feedback is None and result.name == check.name


async def test_non_zero_exit_fails_with_the_code_and_the_output() -> None:
    check = CommandCheck(
        python("import sys; print('E501 line too long'); sys.exit(3)"),
        category=FailCategory.GOAL_MISSED,
    )
    result = await check.check(TURN, Reply(text="x"))
    assert not result.passed and result.category is FailCategory.GOAL_MISSED
    assert "exited with code 3" in (result.feedback or "")
    assert "E501 line too long" in (result.feedback or "")
    assert shlex.join(python("import sys; print('E501 line too long'); sys.exit(3)")) in (
        result.feedback or ""
    )


async def test_stderr_is_merged_into_the_output() -> None:
    ok, feedback = await run(CommandCheck(python("import sys; sys.exit('on stderr')")))
    assert not ok and "on stderr" in feedback


async def test_failure_without_output_says_so() -> None:
    ok, feedback = await run(CommandCheck(python("raise SystemExit(1)")))
    assert not ok and feedback.endswith("(no output)")


async def test_the_reply_arrives_on_stdin() -> None:
    echo = python("import sys; sys.stdout.buffer.write(sys.stdin.buffer.read()); sys.exit(1)")
    ok, feedback = await run(CommandCheck(echo), "héllo wörld ✓")
    assert not ok and feedback.endswith("héllo wörld ✓")


async def test_a_command_that_ignores_a_large_reply_on_stdin_still_passes() -> None:
    ok, _ = await run(CommandCheck(python("pass")), "x" * 2_000_000)
    assert ok


async def test_pass_reply_none_gives_an_empty_stdin() -> None:
    check = CommandCheck(python("import sys; sys.exit(len(sys.stdin.read()))"), pass_reply="none")
    ok, _ = await run(check, "not for you")
    assert ok


async def test_file_mode_substitutes_a_private_file_removed_afterwards() -> None:
    show = (
        "import os, sys\n"
        "print(sys.argv[1], oct(os.stat(sys.argv[1]).st_mode & 0o777))\n"
        "sys.stdout.flush(); sys.stdout.buffer.write(open(sys.argv[1], 'rb').read())\n"
        "sys.exit(1)"
    )
    check = CommandCheck(python(show, "{reply_file}"), pass_reply="file")
    ok, feedback = await run(check, "the réply")
    path, mode = feedback.splitlines()[-2].split()
    assert not ok and feedback.endswith("the réply")
    assert mode == oct(stat.S_IRUSR | stat.S_IWUSR)
    assert not exists(path)


SHOW_BYTES = "import sys; print(ascii(open(sys.argv[1], 'rb').read())); sys.exit(1)"


@pytest.mark.parametrize(
    "check",
    [
        CommandCheck(python(SHOW_BYTES, "/dev/stdin")),
        CommandCheck(python(SHOW_BYTES, "{reply_file}"), pass_reply="file"),
    ],
    ids=["stdin", "file"],
)
async def test_a_lone_surrogate_reaches_the_command_as_its_invalid_bytes(
    check: CommandCheck,
) -> None:
    ok, feedback = await run(check, "emoji \ud83d cut")
    assert not ok and feedback.endswith("b'emoji \\xed\\xa0\\xbd cut'\n")


async def test_file_mode_removes_the_file_after_a_timeout(tmp_path: Path) -> None:
    note = tmp_path / "path"
    hang = "import sys, time; open(sys.argv[2], 'w').write(sys.argv[1]); time.sleep(60)"
    check = CommandCheck(
        python(hang, "{reply_file}", str(note)), pass_reply="file", timeout_seconds=0.5
    )
    ok, _ = await run(check)
    assert not ok and not exists(read(note))


async def test_file_mode_through_the_shell_quotes_the_path() -> None:
    check = CommandCheck("cat {reply_file}; exit 1", shell=True, pass_reply="file")
    ok, feedback = await run(check, "it's $HOME")
    assert not ok and feedback.endswith("it's $HOME")


def test_file_mode_needs_the_placeholder() -> None:
    with pytest.raises(ValueError, match="reply_file"):
        CommandCheck(python("pass"), pass_reply="file")


def test_the_placeholder_needs_file_mode() -> None:
    with pytest.raises(ValueError, match="reply_file"):
        CommandCheck(python("pass", "{reply_file}"))


def test_a_string_command_needs_shell() -> None:
    with pytest.raises(ValueError, match="list of arguments"):
        CommandCheck("ruff check .")


def test_shell_needs_a_string_command() -> None:
    with pytest.raises(ValueError, match="one string"):
        CommandCheck(["ruff", "check"], shell=True)


@pytest.mark.parametrize(("command", "shell"), [([], False), ([""], False), ("  ", True)])
def test_an_empty_command_is_rejected(command: list[str] | str, shell: bool) -> None:
    with pytest.raises(ValueError, match="empty"):
        CommandCheck(command, shell=shell)


def test_names_default_to_the_program_and_the_check_protocol_holds() -> None:
    check = CommandCheck(["/usr/bin/ruff", "check"], required=True)
    assert check.name == "command:ruff" and check.required
    assert isinstance(check, Check)
    assert CommandCheck("make lint | tee log", shell=True).name == "command:make"
    assert CommandCheck(["ruff"], name="lint").name == "lint"


async def test_shell_runs_a_pipeline() -> None:
    ok, feedback = await run(CommandCheck("tr a-z A-Z | sed s/REPLY/answer/; exit 4", shell=True))
    assert not ok and "exited with code 4" in feedback and feedback.endswith("THE answer")


async def test_env_is_merged_over_the_environment_and_cwd_is_used(tmp_path: Path) -> None:
    probe = (
        "import os, sys\n"
        "env_ok = os.environ['RG_X'] == 'y' and 'PATH' in os.environ\n"
        "sys.exit(0 if env_ok and os.getcwd() == os.path.realpath(sys.argv[1]) else 1)"
    )
    check = CommandCheck(python(probe, str(tmp_path)), env={"RG_X": "y"}, cwd=str(tmp_path))
    ok, _ = await run(check)
    assert ok


async def test_a_hanging_command_times_out_with_its_output() -> None:
    hang = "import time; print('working', flush=True); time.sleep(60)"
    check = CommandCheck(python(hang), timeout_seconds=0.5)
    started = time.monotonic()
    ok, feedback = await run(check)
    assert time.monotonic() - started < 0.5 + 3
    assert not ok and "did not finish within 0.5 s" in feedback and "working" in feedback


async def test_a_timeout_kills_a_grandchild_holding_the_pipe(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    check = CommandCheck(python(SPAWN_AND_HANG, str(pids), "hang"), timeout_seconds=1)
    started = time.monotonic()
    ok, feedback = await run(check)
    assert time.monotonic() - started < 1 + 3
    assert not ok and "did not finish" in feedback and "started" in feedback
    assert await wait_gone(*map(int, read(pids).split()))


async def test_a_passing_command_leaves_no_background_process_behind(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    started = time.monotonic()
    ok, _ = await run(CommandCheck(python(SPAWN_AND_HANG, str(pids), "exit"), timeout_seconds=30))
    assert ok and time.monotonic() - started < 10
    assert await wait_gone(*map(int, read(pids).split()))


async def test_an_output_flood_keeps_only_a_bounded_tail() -> None:
    flood = (
        "import sys\n"
        "for _ in range(100): sys.stdout.write('x' * 1_000_000)\n"
        "print('THE END'); sys.exit(1)"
    )
    tracemalloc.start()
    try:
        ok, feedback = await run(CommandCheck(python(flood), tail_chars=100))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    output = feedback.split("Output:\n", 1)[1]
    assert not ok and output.startswith("…") and output.rstrip().endswith("THE END")
    assert len(output) == 1 + 100
    assert peak < 5_000_000  # while 100 MB went through


async def test_the_tail_counts_characters_not_bytes() -> None:
    emoji = "import sys; sys.stdout.buffer.write('\\N{GRINNING FACE}'.encode() * 1000); sys.exit(1)"
    ok, feedback = await run(CommandCheck(python(emoji), tail_chars=100))
    assert not ok and feedback.split("Output:\n", 1)[1] == "…" + "\N{GRINNING FACE}" * 100


async def test_cancelling_the_check_kills_the_process_tree(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    check = CommandCheck(python(SPAWN_AND_HANG, str(pids), "hang"), timeout_seconds=30)
    task = asyncio.create_task(check.check(TURN, Reply(text="r")))
    own, grandchild = map(int, (await wait_for_file(pids)).split())
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    with pytest.raises(ProcessLookupError):
        os.kill(own, 0)  # already reaped by the check itself
    assert await wait_gone(grandchild)


async def test_a_missing_program_raises_a_clear_error() -> None:
    with pytest.raises(FileNotFoundError, match=r"cannot start '/nonexistent/lint'"):
        await run(CommandCheck(["/nonexistent/lint", "."], name="lint"))


async def test_a_missing_cwd_raises_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"cannot start .* in .*nowhere"):
        await run(CommandCheck(python("pass"), cwd=str(tmp_path / "nowhere")))


async def test_a_missing_program_through_the_shell_is_an_ordinary_failure() -> None:
    ok, feedback = await run(CommandCheck("/nonexistent/lint", shell=True))
    assert not ok and "exited with code 127" in feedback


async def test_two_checks_run_at_the_same_time(tmp_path: Path) -> None:
    meet = (
        "import os, sys, time\n"
        "open(sys.argv[1], 'w').close()\n"
        "deadline = time.monotonic() + 10\n"
        "while not os.path.exists(sys.argv[2]):\n"
        "    if time.monotonic() > deadline: sys.exit('the other check never ran')\n"
        "    time.sleep(0.01)\n"
    )
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    results = await asyncio.gather(
        run(CommandCheck(python(meet, a, b))), run(CommandCheck(python(meet, b, a)))
    )
    assert list(results) == [(True, ""), (True, "")]


# -- cwd from the config: inside workspaceDir only ----------------------------------------------


def _made(directory: Path) -> str:
    """Make ``directory``; its real path."""
    directory.mkdir()
    return os.path.realpath(directory)


def _command_config(workspace: Path, cwd: str) -> VerifierConfig:
    source = "import os, sys; sys.exit(os.getcwd())"  # fails, showing where it ran
    check = {"type": "command", "command": python(source), "cwd": cwd}
    return VerifierConfig.from_dict({"workspaceDir": str(workspace), "checks": [check]})


async def test_a_configured_cwd_runs_the_command_inside_the_workspace(tmp_path: Path) -> None:
    app = _made(tmp_path / "app")
    [check] = Verifier(_command_config(tmp_path, "app")).checks
    result = await check.check(Turn(user_message="Build it."), Reply(text="the reply"))
    assert result.feedback is not None and result.feedback.rstrip().endswith(app)


def test_a_configured_cwd_linking_out_of_the_workspace_is_a_config_error(tmp_path: Path) -> None:
    workspace, outside = tmp_path / "workspace", tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    (workspace / "escape").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ConfigError) as caught:
        Verifier(_command_config(workspace, "escape"))
    assert [key for key, _ in caught.value.problems] == ["checks.0.cwd"]
    assert "leaves workspaceDir" in str(caught.value)


# -- detached descendants (Linux: the command runs under a child-subreaper helper) -------------

# Starts a descendant that leaves the command's session and process group, writes its pid to
# argv[1], then exits at once ("exit") or hangs ("hang"). argv[2] says how the descendant
# leaves: "setsid" (a child in a new session) or "daemon" (a double fork, the middle one gone).
DETACH = """
import os, subprocess, sys, time
def record(pid):
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(str(pid))
    os.replace(sys.argv[1] + ".tmp", sys.argv[1])
if sys.argv[2] == "setsid":
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    record(child.pid)
else:
    read, write = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            os.write(write, str(os.getpid()).encode())
            time.sleep(60)
        os._exit(0)
    record(int(os.read(read, 20)))
if sys.argv[3] == "hang":
    time.sleep(60)
"""
linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"),
    reason=(
        "killing detached children is promised on Linux only (a child subreaper helper); "
        "elsewhere the process group is killed, as documented"
    ),
)


@linux_only
@pytest.mark.parametrize("how", ["setsid", "daemon"])
async def test_a_detached_descendant_of_a_passing_command_is_killed(
    tmp_path: Path, how: str
) -> None:
    pid_file = tmp_path / "pid"
    ok, _ = await run(CommandCheck(python(DETACH, str(pid_file), how, "exit"), timeout_seconds=30))
    assert ok
    assert await wait_gone(int(read(pid_file)))


@linux_only
@pytest.mark.parametrize("how", ["setsid", "daemon"])
async def test_a_detached_descendant_is_killed_when_the_command_times_out(
    tmp_path: Path, how: str
) -> None:
    pid_file = tmp_path / "pid"
    check = CommandCheck(python(DETACH, str(pid_file), how, "hang"), timeout_seconds=1)
    ok, feedback = await run(check)
    assert not ok and "did not finish" in feedback
    assert await wait_gone(int(read(pid_file)))


@linux_only
async def test_a_detached_descendant_is_killed_when_the_check_is_cancelled(
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "pid"
    check = CommandCheck(python(DETACH, str(pid_file), "setsid", "hang"), timeout_seconds=30)
    task = asyncio.create_task(check.check(TURN, Reply(text="r")))
    detached = int(await wait_for_file(pid_file))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await wait_gone(detached)


@linux_only
async def test_the_host_process_is_never_made_a_subreaper(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    await run(CommandCheck(python(DETACH, str(pid_file), "setsid", "exit"), timeout_seconds=30))
    libc = ctypes.CDLL(None, use_errno=True)
    flag = ctypes.c_int(-1)
    assert libc.prctl(37, ctypes.byref(flag), 0, 0, 0) == 0  # PR_GET_CHILD_SUBREAPER
    assert flag.value == 0
