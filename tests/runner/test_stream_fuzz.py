"""A forbidden phrase split across any chunk boundary is still caught, and none of it is shown.

1,000 random chunkings per mode, each streamed through ``Verifier.stream`` with the rules check
alone deciding (``judgeAfterChecks: never``: no judge call in the loop), as ``str`` deltas,
OpenAI-shaped dicts, OpenAI ``ChatCompletionChunk`` objects and litellm ``ModelResponseStream``
objects in turn, around emoji and other multi-codepoint text, the phrase in random case.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
from litellm.types.utils import ModelResponseStream
from openai.types.chat import ChatCompletionChunk

from replyguard import Delta, Done, Retract, Status, Turn, Verifier, VerifierConfig
from replyguard.testing import ScriptedJudge, ScriptedStreamAgent

CHUNKINGS = 1000
PHRASES = ["as an AI", "I can't", "hell", "👍🏽 deal", "!!!"]
FILLER = [
    "Sure, ",
    "hello ",
    "shell ",
    "👍🏽 ",
    "👨‍👩‍👧 family ",
    "🇫🇷 ",
    "e\u0301te\u0301 ",
    "As an ",
    "AIM ",
    "日本語の文 ",
    "\n",
    "I can ",
]
AFTER = [" and more.", ", so 👍🏽", "\n\nNext: 日本語", " ", "! 🇫🇷", ""]
RETRY = "Here is a clean answer 🙂 with 日本語 and e\u0301."
HOLD = 16
TURN = Turn(user_message="Tell me about yourself.")


def as_dict(text: str) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}


def as_openai(text: str) -> ChatCompletionChunk:
    return ChatCompletionChunk.model_validate(
        {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "m", **as_dict(text)}
    )


def as_litellm(text: str) -> ModelResponseStream:
    return ModelResponseStream(choices=as_dict(text)["choices"])


KINDS: list[Callable[[str], Any]] = [str, as_dict, as_openai, as_litellm]


def case_variant(text: str, rng: random.Random) -> str:
    return "".join(c.upper() if rng.random() < 0.5 else c.lower() for c in text)


def verifier(mode: str) -> Verifier:
    config = VerifierConfig.from_dict(
        {
            "enabled": True,
            "verifyAll": True,
            "judgeAfterChecks": "never",
            "maxAttempts": 2,
            "checks": [{"type": "rules", "forbiddenPhrases": PHRASES}],
            "streaming": {"mode": mode, "holdBackChars": HOLD},
        }
    )
    return Verifier(config, judge=ScriptedJudge([]), preload=False)


@pytest.mark.parametrize("mode", ["buffer", "release"])
async def test_a_split_phrase_is_cut_and_none_of_it_is_shown(mode: str) -> None:
    rng = random.Random(f"stream-fuzz-{mode}")
    streamed = verifier(mode)
    for run in range(CHUNKINGS):
        phrase = case_variant(rng.choice(PHRASES), rng)
        before = "".join(rng.choice(FILLER) for _ in range(rng.randint(0, 6)))
        text = before + phrase + rng.choice(AFTER)
        start, end = len(before), len(before) + len(phrase)
        cuts = sorted(rng.sample(range(1, len(text)), rng.randint(0, min(12, len(text) - 1))))
        pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        kind = KINDS[run % len(KINDS)]
        agent = ScriptedStreamAgent([[kind(p) for p in pieces], [RETRY]])

        events = [event async for event in streamed.stream(agent, TURN)]

        context = f"run {run}: {pieces!r}"
        done = events[-1]
        assert isinstance(done, Done), context
        assert (done.outcome.status, done.outcome.response) == (Status.PASSED, RETRY), context
        retracts = [i for i, e in enumerate(events) if isinstance(e, Retract)]
        after = events[retracts[-1] + 1 :] if retracts else events
        assert "".join(e.text for e in after if isinstance(e, Delta)) == RETRY, context
        first = events[: retracts[0]] if retracts else []
        shown = "".join(e.text for e in first if isinstance(e, Delta))
        assert text.startswith(shown) and len(shown) <= start, context  # 0 bytes of the phrase
        if mode == "buffer":
            assert not retracts, context
        # The stream was closed within one chunk of the one that completed the phrase (the
        # character after a word edge decides it).
        deciding = min(end, len(text) - 1)
        assert agent.pulled[0] <= 1 + sum(1 for c in [0, *cuts] if c <= deciding), context
        assert agent.closed == 2, context
        # The cut text never enters the retry's history: the turn, then the feedback.
        assert [m["role"] for m in agent.calls[1]] == ["user", "user"], context
