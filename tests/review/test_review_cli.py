"""``replyguard review`` on the command line: its usage errors, and a served run stopped by
Ctrl-C."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from support_review import SAMPLE_LEDGER, entry, write_ledger

from replyguard.cli import main


def test_no_matching_ledger_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["review", str(tmp_path / "*.jsonl")]) == 2
    assert "no ledger file matches" in capsys.readouterr().err


def test_a_bad_outcomes_file_names_its_line_and_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = write_ledger(tmp_path / "l.jsonl", [entry("t", "flagged", "FAIL")])
    outcomes = tmp_path / "o.jsonl"
    outcomes.write_text('{"turnId": "t", "outcome": "great"}\n', encoding="utf-8")
    assert main(["review", str(ledger), "--outcomes", str(outcomes)]) == 2
    assert "o.jsonl:1: outcome: must be 'good' or 'bad'" in capsys.readouterr().err


def test_a_port_in_use_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ledger = write_ledger(tmp_path / "l.jsonl", [entry("t", "flagged", "FAIL")])
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["review", str(ledger), "--port", str(port)]) == 2
    assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err


@pytest.mark.slow
def test_the_command_serves_until_ctrl_c_and_exits_0(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    labels = tmp_path / "labels.jsonl"
    command = [sys.executable, "-m", "replyguard", "review", str(SAMPLE_LEDGER)]
    process = subprocess.Popen(
        [*command, "--port", "0", "--labels", str(labels)],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stderr is not None
        first = process.stderr.readline()
        assert "turns queued from 33" in first and str(labels) in first
        url = process.stderr.readline().split()[1]
        with urllib.request.urlopen(url, timeout=30) as response:
            assert "replyguard review" in response.read().decode()
    finally:
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=30)
        if process.stderr is not None:
            process.stderr.close()
    assert code == 0
