"""Shared pieces of the review tests: ledger lines, a served session and HTTP calls."""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from replyguard.review._labels import LabelFile
from replyguard.review._queue import build_queue, read_ledgers
from replyguard.review._server import Session, make_server

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_LEDGER = ROOT / "examples" / "review" / "ledger.jsonl"
CATEGORIES = ["goal_missed", "incomplete", "rule_violation", "tone_mismatch", "refusal"]


def entry(
    turn_id: str,
    status: str,
    vote: str | None,
    *,
    reply: str | None = None,
    run_kind: str | None = None,
    category: str | None = None,
    judge_output: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A ledger line as the verifier writes it (content only when ``reply`` is given)."""
    line: dict[str, Any] = {
        "ts": "2026-11-28T10:00:00.000Z",
        "turnId": turn_id,
        "agentId": "bot",
        "runKind": run_kind,
        "status": status,
        "reason": extra.pop("reason", None),
        "attempts": 1,
        "judgeModels": ["judge-a"],
        "categories": [category] if vote == "FAIL" else [],
        "judged": [
            {
                "attempt": 1,
                "replySha256": hashlib.sha256((reply or turn_id).encode()).hexdigest(),
                "vote": vote,
                "category": category,
            }
        ],
        **extra,
    }
    if reply is not None:
        line["content"] = {
            "userMessage": f"question {turn_id}",
            "attempts": [
                {
                    "attempt": 1,
                    "reply": reply,
                    "judgeOutput": judge_output,
                    "reasoning": "because",
                    "feedback": None,
                }
            ],
        }
    return line


def write_ledger(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


@contextlib.contextmanager
def serving(
    ledger: Path, labels: Path, *, sample: int = 20, reviewer: str = "ana"
) -> Iterator[tuple[str, Session]]:
    """A review server on a free loopback port, in a thread: ``(host:port, session)``."""
    queue = build_queue(read_ledgers([ledger]), sample=sample, seed=0)
    session = Session(queue, LabelFile(labels), reviewer, CATEGORIES)
    server = make_server(session, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}", session
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def call(
    address: str,
    method: str,
    path: str,
    body: Any = None,
    *,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    """One HTTP request; ``(status, parsed JSON body or text)``."""
    connection = http.client.HTTPConnection(address, timeout=10)
    try:
        data = None if body is None else json.dumps(body).encode()
        sent = {"Content-Type": "application/json", **(headers or {})}
        connection.request(method, path, body=data, headers=sent)
        response = connection.getresponse()
        raw = response.read().decode()
        kind = response.getheader("Content-Type", "")
        return response.status, json.loads(raw) if kind.startswith("application/json") else raw
    finally:
        connection.close()
