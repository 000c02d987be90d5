"""The FastAPI example without keys: its offline mode (a scripted chat model and judge), the
startup's line per key, and a missing chat-model key told to the page in one line, not as a
traceback. Served by uvicorn on a loopback port; no request leaves the machine."""

from __future__ import annotations

import json
import logging
import os
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.example_app import APP_FILE, load_example, serving

example = load_example()
ROOT = APP_FILE.parents[2]
QUESTION = "Plan a three-day trip to Lisbon."
FIRST = example.offline_reply(QUESTION, 1)
RETRIED = example.offline_reply(QUESTION, 2)
KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")


@pytest.fixture
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*KEYS, example.OFFLINE_ENV, example.API_BASE_ENV, example.MODEL_ENV):
        monkeypatch.delenv(name, raising=False)


@asynccontextmanager
async def client_of(app: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with serving(app) as url, httpx.AsyncClient(base_url=url, timeout=20) as client:
        yield client


async def stream(client: httpx.AsyncClient, message: str = QUESTION) -> list[tuple[str, Any]]:
    """Every Server-Sent Event of one turn, as (name, JSON data)."""
    body = {"conversationId": "c1", "message": message}
    events, name = [], "message"
    async with client.stream("POST", "/chat/stream", json=body) as response:
        async for line in response.aiter_lines():
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                events.append((name, json.loads(line[5:])))
    return events


def shape(events: list[tuple[str, Any]]) -> list[str]:
    """Each event in a word: the phase of a progress event, else its name; deltas as one."""
    words: list[str] = []
    for name, data in events:
        word = data["phase"] if name == "progress" else name
        if not (word == "delta" and words and words[-1] == "delta"):
            words.append(word)
    return words


def text_after_last_retract(events: list[tuple[str, Any]]) -> str:
    shown = ""
    for name, data in events:
        shown = "" if name == "retract" else shown + (data["text"] if name == "delta" else "")
    return shown


async def test_offline_mode_fails_withdraws_and_retries_with_no_key(
    no_keys: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``REPLYGUARD_EXAMPLE_OFFLINE=1`` and nothing else: the app as a user starts it."""
    monkeypatch.setenv(example.OFFLINE_ENV, "1")
    monkeypatch.delenv(example.CONFIG_ENV, raising=False)
    async with client_of(example.create_app()) as client:
        events = await stream(client)
        whole = (await client.post("/chat", json={"conversationId": "c2", "message": "Hi"})).json()
    assert shape(events) == [
        "writing",
        "delta",
        "checking",
        "retract",
        "revising",
        "delta",
        "checking",
        "done",
    ]
    retract = next(data for name, data in events if name == "retract")
    assert retract == {"attempt": 1, "reason": "incomplete"}
    shown_first = "".join(
        d["text"] for n, d in events[: events.index(("retract", retract))] if n == "delta"
    )
    assert shown_first.strip() == FIRST
    done = events[-1][1]
    assert (done["status"], done["attempts"], done["reply"].strip()) == ("passed", 2, RETRIED)
    assert text_after_last_retract(events) == done["reply"]
    assert (whole["status"], whole["attempts"]) == ("passed", 2)
    assert whole["reply"] == example.offline_reply("Hi", 2)


async def test_offline_buffer_mode_shows_the_phases_then_the_reply() -> None:
    agent, streaming_agent = example.offline_agents(pause=0)
    app = example.create_app(
        verifier=example.offline_verifier("buffer", judge_delay=0),
        agent=agent,
        streaming_agent=streaming_agent,
    )
    async with client_of(app) as client:
        events = await stream(client)
    assert shape(events) == ["writing", "checking", "revising", "checking", "delta", "done"]
    assert text_after_last_retract(events).strip() == RETRIED


@pytest.fixture
def judge_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``REPLYGUARD_CONFIG`` like the README's: the judge's key from ``ANTHROPIC_API_KEY``."""
    path = tmp_path / "verifier.json"
    settings = {
        "enabled": True,
        "verifyAll": True,
        "model": "anthropic/claude-sonnet-4-5",
        "agentModel": "openai/gpt-4o-mini",
        "apiKey": "env:ANTHROPIC_API_KEY",
    }
    path.write_text(json.dumps(settings), encoding="utf-8")
    monkeypatch.setenv(example.CONFIG_ENV, str(path))
    return path


def key_lines(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "chat_example"]


async def test_the_startup_says_in_one_line_each_that_a_key_is_missing(
    no_keys: None, judge_config: Path, caplog: pytest.LogCaptureFixture
) -> None:
    app = example.create_app()
    with caplog.at_level(logging.INFO):
        async with app.router.lifespan_context(app):
            pass
    assert key_lines(caplog) == [
        (
            "WARNING",
            "chat model openai/gpt-4o-mini: OPENAI_API_KEY is not set; every message will get "
            "an error (set it, or try the example offline: REPLYGUARD_EXAMPLE_OFFLINE=1)",
        ),
        (
            "WARNING",
            "judge anthropic/claude-sonnet-4-5: environment variable ANTHROPIC_API_KEY is not "
            "set; replies are delivered unjudged (failed_open)",
        ),
    ]


async def test_the_startup_says_when_both_keys_are_set(
    no_keys: None,
    judge_config: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in KEYS:
        monkeypatch.setenv(name, "sk-example-placeholder")
    app = example.create_app()
    with caplog.at_level(logging.INFO):
        async with app.router.lifespan_context(app):
            pass
    assert key_lines(caplog) == [
        ("INFO", "chat model openai/gpt-4o-mini: its key is set"),
        ("INFO", "judge anthropic/claude-sonnet-4-5: its key is set"),
    ]


async def test_a_missing_chat_key_is_an_error_event_and_one_log_line(
    no_keys: None, judge_config: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The real litellm agent, with no key: it fails before any request is sent."""
    detail = "the chat model did not answer: OPENAI_API_KEY is not set"
    async with client_of(example.create_app()) as client:
        caplog.clear()
        events = await stream(client)
        response = await client.post("/chat", json={"conversationId": "c2", "message": "Hi"})
    assert events == [
        ("progress", {"phase": "writing", "attempt": 1}),
        ("error", {"detail": detail}),
    ]
    assert (response.status_code, response.json()) == (502, {"detail": detail})
    failures = [r for r in caplog.records if r.name == "chat_example" and r.levelname == "ERROR"]
    assert len(failures) == 2
    for record in failures:
        assert record.exc_info is None  # no traceback
        assert record.getMessage().startswith("the chat model did not answer: ")
        assert "OPENAI_API_KEY" in record.getMessage() and "\n" not in record.getMessage()


# -- the README's command, run from the repository's root ---------------------------------------


def readme_command() -> list[str]:
    """The README's line that starts the example offline from the repository's root."""
    readme = (APP_FILE.parent / "README.md").read_text(encoding="utf-8")
    lines = [line for line in readme.splitlines() if "--app-dir" in line and "OFFLINE" in line]
    assert len(lines) == 1, lines
    return shlex.split(lines[0].split("#")[0])


@pytest.fixture
def port() -> int:
    """A loopback port that was free a moment ago (closed again for uvicorn to take)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free: int = probe.getsockname()[1]
    return free


def test_the_readmes_offline_command_works_from_the_repository_root(port: int) -> None:
    assignment, program, *arguments = readme_command()
    name, value = assignment.split("=", 1)
    assert (name, value, program) == (example.OFFLINE_ENV, "1", "uvicorn")
    env = {k: v for k, v in os.environ.items() if k not in KEYS} | {name: value}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)  # this checkout's replyguard
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", *arguments, "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=20) as client:
            give_up = time.monotonic() + 60
            while True:
                try:
                    page = client.get("/")
                    break
                except httpx.ConnectError:
                    assert server.poll() is None, "uvicorn exited"
                    assert time.monotonic() < give_up, "uvicorn did not start within 60 s"
                    time.sleep(0.2)
            answer = client.post("/chat", json={"conversationId": "c", "message": "Hi"})
    finally:
        server.terminate()
        output, _ = server.communicate(timeout=30)
    assert page.status_code == 200 and 'fetch("chat/stream"' in page.text
    assert (answer.json()["status"], answer.json()["attempts"]) == ("passed", 2)
    assert "offline: a scripted chat model and judge, no key needed (release mode)" in output
    assert "Traceback" not in output
