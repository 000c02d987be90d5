"""A judge's answer is made a verdict in one copy, its texts redacted on the way
(``_judging.redact_texts``), and a plain PASS of the parse's fields without a verdict made
first (``_protocol.plain_pass``): the same value (fields, ``model_fields_set``, types) as the
verdict parsed, copied with what it cost and redacted after (``model_copy`` twice)."""

from __future__ import annotations

from typing import Any

import pytest

from replyguard import Turn, Verifier
from replyguard._frozen import assembled
from replyguard.context import JudgePrompt
from replyguard.judge import JudgeReply
from replyguard.judge._protocol import plain_pass
from replyguard.runner._judging import _JUDGE_TEXTS, redact_texts
from replyguard.telemetry._events import redact
from replyguard.types import Reason, Verdict, replaced

KEY = "3f9a1c7e5b2d4f608a1e9c3b7d5f2a64"  # KNOWN_KEYS: no key shape at all
SHAPED = "sk-proj-ABCDEFGHIJKLMNOPQRST"  # KNOWN_KEYS: a key shape, redacted unconfigured


def _two_copies(verdict: Verdict, update: dict[str, Any], secrets: tuple[str, ...]) -> Verdict:
    """What ``_read`` made before: the update's copy, then a copy of its redacted texts."""
    updated = verdict.model_copy(update=update)
    changed = {}
    for name in _JUDGE_TEXTS:
        value = getattr(updated, name)
        if isinstance(value, str) and redact(value, secrets) != value:
            changed[name] = redact(value, secrets)
    return updated.model_copy(update=changed) if changed else updated


CASES = [
    pytest.param(Verdict(passed=True, raw="PASS"), {"model": "m", "latency_ms": 1.0}, id="clean"),
    pytest.param(
        Verdict(passed=False, raw=f"FAIL {KEY}", feedback=f"say {SHAPED}", reasoning=KEY),
        {"model": f"judge-{KEY}", "prompt_tokens": 3},
        id="every-text",
    ),
    pytest.param(
        Verdict(passed=True, readable=False, raw=f"?? {SHAPED}", error="unparsed"),
        {"fail_open_reason": Reason.UNREADABLE_VERDICT, "error": f"note {KEY}", "model": "m"},
        id="unreadable-note",
    ),
    pytest.param(
        Verdict(passed=True, error=f"kept {KEY}"), {"model": "m"}, id="a-text-not-updated"
    ),
]


@pytest.mark.parametrize(("verdict", "update"), CASES)
def test_one_copy_gives_what_two_copies_gave(verdict: Verdict, update: dict[str, Any]) -> None:
    secrets = (KEY,)
    expected = _two_copies(verdict, update, secrets)
    given = dict(update)
    redact_texts(verdict.__dict__, given, secrets)
    made = replaced(verdict, given)
    assert made == expected
    assert made.model_fields_set == expected.model_fields_set
    assert {name: type(value) for name, value in made} == {
        name: type(value) for name, value in expected
    }
    for name in _JUDGE_TEXTS:
        text = getattr(made, name)
        assert text is None or (KEY not in text and SHAPED not in text)


def test_the_verdict_redacted_is_left_as_it_was() -> None:
    verdict = Verdict(passed=False, feedback=f"say {KEY}")
    redact_texts(verdict.__dict__, {}, (KEY,))
    assert verdict.feedback == f"say {KEY}"


def _same(made: Verdict, expected: Verdict) -> None:
    assert made == expected
    assert made.model_fields_set == expected.model_fields_set
    assert [(name, type(value)) for name, value in made] == [
        (name, type(value)) for name, value in expected
    ]


UPDATE = {"model": f"judge-{KEY}", "prompt_tokens": 7, "cost_usd": 0.5, "latency_ms": 2.0}


@pytest.mark.parametrize(
    "text",
    [
        "PASS",
        "  pass  \n",
        f"The reply is fine; the key {KEY} is the user's own.\nPASS",
        f"reasoning with {SHAPED}\n\n  Pass",
        "line one\nline two\nPASS\n\n",
    ],
)
def test_a_plain_pass_made_of_its_fields_is_the_verdict_parsed(text: str) -> None:
    secrets = (KEY,)
    expected = _two_copies(JudgeReply(text=text, model="m").verdict, UPDATE, secrets)
    fields = plain_pass(JudgeReply(text=text, model="m"))
    assert fields is not None
    given = dict(UPDATE)
    redact_texts(fields, given, secrets)
    _same(assembled(Verdict, **{**fields, **given}), expected)


@pytest.mark.parametrize(
    "text",
    [
        "FAIL: no",
        "PASS\nFAIL",
        "I would not fail it.\nPASS",  # a "fail" anywhere: the general path
        '{"verdict": "PASS"}',
        "```\nPASS\n```",
        "PASS but",
        "\uff30\uff21\uff33\uff33",  # a full-width PASS
        "   ",
        "x" * 20_001 + "\nPASS",  # parsed off the loop
    ],
)
def test_any_other_answer_is_left_to_the_parse(text: str) -> None:
    assert plain_pass(JudgeReply(text=text, model="m")) is None


def test_an_answer_read_already_is_left_to_the_parse() -> None:
    answer = JudgeReply(text="PASS", model="m")
    assert answer.verdict.passed
    assert plain_pass(answer) is None


class _OwnParse(JudgeReply):
    """A host's answer type that reads its own verdicts."""

    async def parsed(self, categories: Any = ()) -> Verdict:
        return Verdict(passed=False, feedback="the host's own reading")


def test_a_host_s_answer_type_is_left_to_its_own_parse() -> None:
    assert plain_pass(_OwnParse(text="PASS", model="m")) is None


class _Answering:
    """A host's judge returning ``answer``."""

    def __init__(self, answer: JudgeReply) -> None:
        self.answer = answer

    async def judge(self, prompt: JudgePrompt, *, time_left: float) -> JudgeReply:
        return self.answer


async def test_a_turn_reads_a_host_s_answer_type_by_its_own_parse(make_config: Any) -> None:
    verifier = Verifier(
        make_config(verifyAll=True), judge=_Answering(_OwnParse(text="PASS", model="m"))
    )
    verdict = await verifier.verify(Turn(user_message="hi"), "hello")
    assert not verdict.passed
    assert verdict.feedback == "the host's own reading"


async def test_a_turn_s_plain_pass_carries_what_it_cost_redacted(make_config: Any) -> None:
    answer = JudgeReply(
        text=f"The reply quotes {SHAPED} back.\nPASS",
        model="judge/x",
        prompt_tokens=11,
        completion_tokens=3,
        cost_usd=0.25,
    )
    verifier = Verifier(make_config(verifyAll=True), judge=_Answering(answer))
    verdict = await verifier.verify(Turn(user_message="hi"), "hello")
    assert verdict.passed and verdict.readable and verdict.fail_open_reason is None
    assert (verdict.model, verdict.prompt_tokens, verdict.completion_tokens) == ("judge/x", 11, 3)
    assert verdict.cost_usd == 0.25 and verdict.latency_ms > 0
    assert verdict.raw is not None and SHAPED not in verdict.raw
    assert verdict.reasoning is not None and SHAPED not in verdict.reasoning
    assert {"raw", "reasoning", "model", "prompt_tokens", "latency_ms"} <= verdict.model_fields_set


@pytest.mark.parametrize(
    "text", ["PASS", " PASS ", "\nPASS", "\n\n  PASS\n", "why\nPASS", "  \nwhy  \n\nPASS"]
)
def test_a_plain_pass_reads_its_reasoning_as_the_general_parse_does(text: str) -> None:
    """A lone PASS has no reasoning to clean: the quick read and the general one agree on
    every answer, with text before the verdict line or none."""
    from replyguard.judge._verdict import _read, plain_pass_fields

    fields = plain_pass_fields(text)
    assert fields is not None
    general = _read(text, frozenset())
    assert general.passed
    assert fields["reasoning"] == general.reasoning
    assert fields["raw"] == general.raw
