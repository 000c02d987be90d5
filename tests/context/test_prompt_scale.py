"""Big turns: what a judgement tokenizes scales with what the judge is sent, not with what
the agent produced, and the rendered prompt is never tokenized whole."""

from __future__ import annotations

from typing import Any

import pytest

from replyguard.context import (
    MESSAGE_OVERHEAD,
    ContextLimits,
    RulesSource,
    _encoding,
    build_judge_prompt,
    reply_in_view,
)
from replyguard.context import _tokens as tokens
from replyguard.types import RunMeta, ToolCallRecord, Turn

WORDS = ["the", "report", "shows", "revenue", "growth", "across", "all", "regions", "costs"]
CJK = "漢字仮名交じり文の例です中文文本测试的一是不了人我在有他这为之大来以个中上们到说国和地"


def _prose(chars: int, seed: int) -> str:
    out, size, index = [], 0, seed
    while size < chars:
        sentence = " ".join(WORDS[(index + i * 7) % len(WORDS)] for i in range(12)) + ". "
        out.append(sentence.capitalize())
        size += len(sentence)
        index += 5
    return "".join(out)[:chars]


def _cjk(chars: int, seed: int) -> str:
    out, size, index = [], 0, seed
    while size < chars:
        sentence = "".join(CJK[(index + i * 11) % len(CJK)] for i in range(20)) + "。"
        out.append(sentence)
        size += len(sentence)
        index += 3
    return "".join(out)[:chars]


def _json(chars: int, seed: int) -> str:
    out, size, index = [], 0, seed
    while size < chars:
        row = f'  {{"id": {index}, "name": "row {index}", "tags": ["a", "b"]}},\n'
        out.append(row)
        size += len(row)
        index += 1
    return "[\n" + "".join(out)[:chars] + "]"


MAKE = {"prose": _prose, "cjk": _cjk, "json": _json}


class Recording:
    """The encoding, recording the text of each tokenization."""

    def __init__(self) -> None:
        self.real = tokens.encoding()
        self.texts: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def encode_ordinary(self, text: str) -> list[int]:
        self.texts.append(text)
        result: list[int] = self.real.encode_ordinary(text)
        return result


def _turn(chars: int, kind: str) -> tuple[Turn, str]:
    make = MAKE[kind]
    history = [
        {"role": "user" if i % 2 else "assistant", "content": make(chars * 8 // 100, 10 + i)}
        for i in range(5)
    ]
    return Turn(user_message=make(chars // 10, 1), history=history), make(chars // 2, 2)


def _recorded_build(
    monkeypatch: pytest.MonkeyPatch, chars: int, kind: str
) -> tuple[Recording, str, int]:
    turn, reply = _turn(chars, kind)
    rules = [RulesSource("AGENTS.md", _prose(1500, 7))]
    meta = RunMeta(stop_reason="stop", tool_calls=(ToolCallRecord(name="search"),))
    recording = Recording()
    with monkeypatch.context() as patch:
        patch.setattr(_encoding, "encoding", lambda: recording)
        prompt = build_judge_prompt(turn, reply, limits=ContextLimits(), rules=rules, meta=meta)
        counted = prompt.counted_tokens
    exact = tokens.count(prompt.system) + tokens.count(prompt.user) + MESSAGE_OVERHEAD
    assert counted is None or counted == exact
    assert exact <= ContextLimits().budget
    return recording, prompt.user, exact


@pytest.mark.parametrize("kind", list(MAKE))
def test_a_big_turn_s_prompt_is_never_tokenized_whole(
    monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    recording, user, _ = _recorded_build(monkeypatch, 1_000_000, kind)
    assert recording.texts
    assert max(len(text) for text in recording.texts) < len(user) / 2


@pytest.mark.parametrize("kind", list(MAKE))
def test_what_a_prompt_build_tokenizes_does_not_grow_with_the_turn(
    monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    # Once unrecorded first: what a process counts once (the rubric's tokens, on the first
    # build that needs them exactly) is counted here, whichever test ran before this one.
    _recorded_build(monkeypatch, 1_000_000, kind)
    one, user, _ = _recorded_build(monkeypatch, 1_000_000, kind)
    ten, _, _ = _recorded_build(monkeypatch, 10_000_000, kind)
    small, large = sum(map(len, one.texts)), sum(map(len, ten.texts))
    assert abs(large - small) <= small // 10
    assert small <= 3 * len(user)


def test_the_reply_s_view_tokenizes_the_same_for_a_10_mb_reply_as_for_a_1_mb_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sizes = []
    for chars in (1_000_000, 10_000_000):
        recording = Recording()
        reply = _prose(chars, 3)
        with monkeypatch.context() as patch:
            patch.setattr(_encoding, "encoding", lambda recording=recording: recording)
            view = reply_in_view(reply, ContextLimits().response_cap)
        sizes.append((sum(map(len, recording.texts)), len(view)))
    (one, one_view), (ten, ten_view) = sizes
    assert abs(ten - one) <= one // 100 and abs(ten_view - one_view) <= one_view // 100
