"""``replyguard serve`` as a real process on 127.0.0.1, and a loopback provider that plays both
the agent's upstream (OpenAI wire, ``/v1/chat/completions``) and the judge (Anthropic wire,
``/v1/messages``) from two scripts.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import openai

from support.ports import free_port
from support.provider_server import ProviderServer, Seen, Step

SRC = Path(__file__).resolve().parents[2] / "src"
CLIENT_KEY = "rg-client-KEY-0123456789abcdef"
UPSTREAM_KEY = "sk-upstream-KEY-0123456789abcdef"
JUDGE_KEY = "sk-ant-judge-KEY-0123456789abcdef"
KEYS = (CLIENT_KEY, UPSTREAM_KEY, JUDGE_KEY)
FAIL = "FAIL [incomplete]: Add the report's date."
ASK_MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "Always date reports."},
    {"role": "user", "content": "Write the weekly report."},
]


@dataclass
class TwoScripts:
    """Answers for the agent (OpenAI path) and for the judge (Anthropic path), each in order;
    ``agent_default`` / ``judge_default`` once a script runs out."""

    agent: deque[Step] = field(default_factory=deque)
    judge: deque[Step] = field(default_factory=deque)
    agent_default: Step = field(default_factory=lambda: Step(text="Done: the report."))
    judge_default: Step = field(default_factory=lambda: Step(text="PASS"))
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, seen: Seen) -> Step:
        judge = seen.path.rstrip("/").endswith("/messages")
        with self.lock:
            queue = self.judge if judge else self.agent
            if queue:
                return queue.popleft()
        return self.judge_default if judge else self.agent_default


@contextlib.contextmanager
def provider() -> Iterator[tuple[ProviderServer, TwoScripts]]:
    """The loopback provider and its two scripts."""
    scripts = TwoScripts()
    with ProviderServer() as server:
        server.respond_with(scripts)
        yield server, scripts


def agent_calls(server: ProviderServer) -> list[Seen]:
    return [s for s in server.seen if s.path.rstrip("/").endswith("/chat/completions")]


def judge_calls(server: ProviderServer) -> list[Seen]:
    return [s for s in server.seen if s.path.rstrip("/").endswith("/messages")]


def served_config(url: str, **more: Any) -> dict[str, Any]:
    """A config verifying every reply with an Anthropic judge and an OpenAI upstream, both on
    the loopback provider at ``url``; the client must present ``CLIENT_KEY``."""
    config: dict[str, Any] = {
        "enabled": True,
        "model": "anthropic/claude-sonnet-4-5",
        "apiBase": url,
        "apiKey": "env:RG_TEST_JUDGE_KEY",
        "verifyAll": True,
        "maxAttempts": 3,
        "serve": {
            "upstream": {"apiBase": f"{url}/v1", "apiKey": "env:RG_TEST_UPSTREAM_KEY"},
            "apiKeys": ["env:RG_TEST_CLIENT_KEY"],
        },
    }
    config.update(more)
    return config


def serve_env(**more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RG_TEST_")}
    env.update(
        PYTHONPATH=str(SRC),
        RG_TEST_JUDGE_KEY=JUDGE_KEY,
        RG_TEST_UPSTREAM_KEY=UPSTREAM_KEY,
        RG_TEST_CLIENT_KEY=CLIENT_KEY,
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        PYTHONUNBUFFERED="1",
    )
    env.update(more)
    return env


@dataclass
class Served:
    """A running server: its base URL, its process, what it printed."""

    url: str
    process: subprocess.Popen[str]
    ready_line: str
    stderr_path: Path

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text()

    def stop(self, sig: int = signal.SIGTERM, *, within: float = 30) -> int:
        """Send ``sig`` and wait for the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            return self.process.wait(timeout=within)
        finally:
            if self.process.stdout is not None:
                self.process.stdout.close()


def start(
    config: dict[str, Any] | None,
    tmp: Path,
    *,
    workers: int = 1,
    port: int | None = None,
    env: dict[str, str] | None = None,
    args: tuple[str, ...] = (),
) -> subprocess.Popen[str]:
    """Start ``replyguard serve`` (not waiting); stdout piped, stderr to ``tmp/stderr``."""
    command = [sys.executable, "-m", "replyguard", "serve", "--port", str(port or free_port())]
    if config is not None:
        path = tmp / "config.json"
        path.write_text(json.dumps(config))
        command += ["--config", str(path)]
    command += ["--workers", str(workers), *args]
    with (tmp / "stderr").open("w") as stderr:
        return subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=env or serve_env(),
            cwd=tmp,
        )


@contextlib.contextmanager
def serving(
    config: dict[str, Any], tmp: Path, *, workers: int = 1, env: dict[str, str] | None = None
) -> Iterator[Served]:
    """A server started and ready (its ready line read); stopped with SIGTERM after, and its
    clean exit (0) checked."""
    port = free_port()
    process = start(config, tmp, workers=workers, port=port, env=env)
    assert process.stdout is not None
    line = _read_line(process, within=60)
    if "ready on" not in line:
        process.kill()
        process.wait()
        process.stdout.close()
        raise RuntimeError(f"the server did not start: {line!r}\n{(tmp / 'stderr').read_text()}")
    served = Served(f"http://127.0.0.1:{port}", process, line, tmp / "stderr")
    try:
        yield served
    finally:
        code = served.stop()
        assert code == 0, f"exit {code}: {served.stderr}"


def _read_line(process: subprocess.Popen[str], *, within: float) -> str:
    """The process's next stdout line, or "" when it exits or ``within`` runs out."""
    got: list[str] = []
    assert process.stdout is not None
    reader = threading.Thread(target=lambda: got.append(process.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(within)
    return got[0] if got else ""


def client(served: Served, key: str = CLIENT_KEY) -> openai.OpenAI:
    """The official SDK pointed at the server, without its retries."""
    return openai.OpenAI(base_url=f"{served.url}/v1", api_key=key, max_retries=0)


def async_client(served: Served) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{served.url}/v1", api_key=CLIENT_KEY, max_retries=0)


def fail_then_pass(scripts: TwoScripts) -> None:
    """The agent's first reply fails (``FAIL``), its second passes."""
    scripts.agent.extend([Step(text="Done: the report."), Step(text="Done: the report, dated.")])
    scripts.judge.extend([Step(text=FAIL), Step(text="PASS")])
