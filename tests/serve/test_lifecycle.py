"""How ``replyguard serve`` starts and stops, as a real process: exit 2 with one clear message
when it cannot start (a bad config, an unset key variable, a port in use), a warning when it
listens beyond loopback without keys, a clean stop on SIGTERM/SIGINT that answers the turns
in flight first, and a client that goes away cancelling its turn's upstream call."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.ports import listening_socket
from support.provider_server import Step
from support.serve_process import (
    CLIENT_KEY,
    KEYS,
    _read_line,
    agent_calls,
    provider,
    served_config,
    serving,
    start,
)

ASK = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Write the report."}]}
AUTH = {"authorization": f"Bearer {CLIENT_KEY}"}


def _refused(config: dict[str, Any] | None, tmp: Path, **kwargs: Any) -> tuple[int, str]:
    process = start(config, tmp, **kwargs)
    try:
        code = process.wait(timeout=60)
    finally:
        assert process.stdout is not None
        process.stdout.close()
    return code, (tmp / "stderr").read_text()


def test_a_bad_config_exits_2_naming_the_key(tmp_path: Path) -> None:
    code, stderr = _refused({"serve": {"maxBodyBytes": "lots"}}, tmp_path)
    assert code == 2
    assert "serve.maxBodyBytes" in stderr and "config.json" in stderr
    assert "Traceback" not in stderr


def test_an_unset_api_keys_variable_exits_2_naming_it(tmp_path: Path) -> None:
    config = {"serve": {"apiKeys": ["env:RG_TEST_NOT_SET_ANYWHERE"]}}
    code, stderr = _refused(config, tmp_path)
    assert code == 2
    assert "RG_TEST_NOT_SET_ANYWHERE" in stderr and "serve.apiKeys[0]" in stderr


def test_a_port_in_use_exits_2(tmp_path: Path) -> None:
    with listening_socket() as taken:
        code, stderr = _refused(None, tmp_path, port=taken.getsockname()[1])
    assert code == 2
    assert "port in use" in stderr


def test_no_key_appears_in_a_refusal(tmp_path: Path) -> None:
    config = {"apiKey": KEYS[2], "serve": {"apiKeys": [KEYS[0]], "colour": 1}}
    code, stderr = _refused(config, tmp_path)
    assert code == 2 and "serve.colour" in stderr
    for key in KEYS:
        assert key not in stderr


@pytest.mark.slow
def test_listening_beyond_loopback_without_keys_warns(tmp_path: Path) -> None:
    process = start({}, tmp_path, args=("--host", "0.0.0.0"))
    try:
        line = _read_line(process, within=60)
        assert "ready on http://0.0.0.0:" in line
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        assert process.stdout is not None
        process.stdout.close()
    assert "without serve.apiKeys" in (tmp_path / "stderr").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_answers_the_turns_in_flight_then_exits_0(
    tmp_path: Path, sig: signal.Signals
) -> None:
    with provider() as (server, scripts):
        scripts.agent.append(Step(text="Done: slow but verified.", delay=1.0))
        answers: list[httpx.Response] = []
        with serving(served_config(server.url), tmp_path) as served:
            asking = threading.Thread(
                target=lambda: answers.append(
                    httpx.post(
                        f"{served.url}/v1/chat/completions", json=ASK, headers=AUTH, timeout=30
                    )
                )
            )
            asking.start()
            assert len(server.seen) or _wait_for(lambda: len(agent_calls(server)) == 1)
            code = served.stop(sig)
            asking.join(30)
        assert code == 0
        [answer] = answers
        assert answer.status_code == 200
        assert answer.json()["choices"][0]["message"]["content"] == "Done: slow but verified."


def _wait_for(condition: Any, within: float = 10) -> bool:
    end = time.monotonic() + within
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.02)
    return False


@pytest.mark.slow
@pytest.mark.parametrize("stream", [False, True])
def test_a_client_that_goes_away_cancels_its_turn_and_frees_the_upstream(
    tmp_path: Path, stream: bool
) -> None:
    with provider() as (server, scripts):
        scripts.agent.append(Step(text="never read", delay=30))
        with serving(served_config(server.url), tmp_path) as served:
            body = {**ASK, "stream": stream}
            with pytest.raises(httpx.ReadTimeout):
                httpx.post(
                    f"{served.url}/v1/chat/completions", json=body, headers=AUTH, timeout=1.0
                )
            assert server.open_connections_now(0, within=5) == 0
            health = httpx.get(f"{served.url}/healthz")
            assert health.status_code == 200
