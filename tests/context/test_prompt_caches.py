"""What the judge prompt build keeps between calls: the review request's skeletons per set of
empty and non-empty sections (``_templates.Filler``), each ``ContextLimits``' section caps and
each ``Rubric``'s size bound. Each gives what working it out afresh gives, follows a change of
config or rubric, stays bounded, and is safe with turns built at once in threads."""

from __future__ import annotations

import itertools
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from replyguard._templates import Filler, fill
from replyguard.context import ContextLimits, RulesSource, build_judge_prompt
from replyguard.context import _build as build
from replyguard.context._prompt import (
    EVIDENCE_CAP,
    HISTORY_MESSAGE_CAP,
    MESSAGE_OVERHEAD,
    METADATA_CAP,
    Rubric,
)
from replyguard.context._tokens import size_bound
from replyguard.types import RunMeta, ToolCallRecord, Turn

NONCE = "0123456789ab"
KEYS = ("nonce", "categories", *build._SECTIONS, "history")


def _values(present: tuple[bool, ...]) -> list[str]:
    return [f"<{key} text>" if shown else "" for key, shown in zip(KEYS, present, strict=True)]


def test_the_filler_gives_what_fill_gives_for_every_set_of_empty_sections() -> None:
    filler = Filler("judge_context.j2", KEYS)
    for sections in itertools.product((False, True), repeat=len(KEYS) - 2):
        present = (True, True, *sections)
        values = _values(present)
        assert filler(values) == fill("judge_context.j2", **dict(zip(KEYS, values, strict=True)))


def test_the_filler_keeps_one_skeleton_per_set_of_empty_sections_however_many_texts() -> None:
    filler = Filler("judge_context.j2", KEYS)
    for number in range(2000):  # distinct texts, two sets of empty sections
        values = [f"{key} {number}" for key in KEYS]
        if number % 2:
            values[KEYS.index("rules")] = ""
        assert (f"rules {number}\n" in filler(values)) is not bool(number % 2)
    assert len(filler._plans) == 2


def test_the_filler_never_reads_a_placeholder_inside_a_value() -> None:
    filler = Filler("judge_context.j2", KEYS)
    values = ["\x00reply\x00" for _ in KEYS]
    filled = filler(values)
    assert filled == fill("judge_context.j2", **dict(zip(KEYS, values, strict=True)))
    assert filled.count("\x00reply\x00") == filled.count("\x00") // 2


def test_the_filler_is_right_from_many_threads_at_once() -> None:
    filler = Filler("judge_context.j2", KEYS)
    patterns = [(True, True, *s) for s in itertools.product((False, True), repeat=6)]
    patterns = [(*p, True, True, True) for p in patterns]  # feedback, heartbeat, reply, history
    start = threading.Barrier(8)

    def fill_all(offset: int) -> list[bool]:
        start.wait()
        checked = []
        for present in patterns[offset:] + patterns[:offset]:
            values = _values(present)
            expected = fill("judge_context.j2", **dict(zip(KEYS, values, strict=True)))
            checked.append(filler(values) == expected)
        return checked

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(fill_all, range(0, 64, 8)))
    assert all(all(checked) for checked in results)
    assert len(filler._plans) == len(patterns)


def test_the_caps_follow_the_limits_they_belong_to() -> None:
    small, large = ContextLimits(budget=1000, rules_cap=300), ContextLimits(budget=20000)
    assert small._caps.sections == (1000, 300, 300, METADATA_CAP, 250, 800, 600, 1000)
    assert small._caps.history == 125
    assert large._caps.sections[4] == EVIDENCE_CAP
    assert large._caps.history == HISTORY_MESSAGE_CAP
    assert ContextLimits(budget=1000, rules_cap=300) == small  # a field-wise equal config
    assert ContextLimits() == ContextLimits()  # the cached caps take no part in equality
    assert hash(ContextLimits()) == hash(ContextLimits())


def _turn() -> tuple[Turn, str]:
    history: list[dict[str, Any]] = [
        {"role": "user", "content": f"question {n} " + "words " * 40} for n in range(4)
    ]
    turn = Turn(user_message="Summarise it. " + "detail " * 30, history=history)
    return turn, "The summary: " + "point " * 150


def test_a_reloaded_config_with_other_limits_builds_with_its_own_caps() -> None:
    turn, reply = _turn()
    roomy = build_judge_prompt(turn, reply, limits=ContextLimits(), nonce=NONCE)
    assert roomy.trimmed == ()
    tight = ContextLimits(budget=8000, response_cap=60)  # the same budget, a smaller reply cap
    cut = build_judge_prompt(turn, reply, limits=tight, nonce=NONCE)
    assert "reply" in cut.trimmed
    assert "characters of the reply cut here" in cut.user
    again = build_judge_prompt(turn, reply, limits=ContextLimits(), nonce=NONCE)
    assert again.user == roomy.user


def test_a_different_rubric_has_its_own_size_bound() -> None:
    plain, strict = Rubric(), Rubric(criteria="Check every figure. " * 50)
    assert plain.tokens_at_most == size_bound(plain.system) + MESSAGE_OVERHEAD
    assert strict.tokens_at_most == size_bound(strict.system) + MESSAGE_OVERHEAD
    assert strict.tokens_at_most > plain.tokens_at_most
    assert strict.tokens_at_most >= strict.tokens  # a bound, as before it was kept
    assert strict.tokens_at_most == strict.tokens  # once counted, the count itself


def test_different_rules_texts_each_show_their_own_text() -> None:
    turn, reply = _turn()
    for number in range(3):
        rules = [RulesSource("RULES.md", f"- rule number {number}")]
        prompt = build_judge_prompt(turn, reply, limits=ContextLimits(), rules=rules, nonce=NONCE)
        assert f"- rule number {number}" in prompt.user
        others = [other for other in range(3) if other != number]
        assert all(f"rule number {other}" not in prompt.user for other in others)


@pytest.mark.parametrize("budget", [8000, 1500])
def test_turns_built_at_once_in_threads_equal_those_built_one_by_one(budget: int) -> None:
    limits = ContextLimits(budget=budget)
    meta = RunMeta(stop_reason="stop", tool_calls=(ToolCallRecord(name="find", arguments={}),))

    def turn_of(number: int) -> tuple[Turn, str]:
        history: list[dict[str, Any]] = [
            {"role": "user", "content": f"turn {number} asks " + "more " * (number % 7 * 30)},
        ]
        evidence = [f"passage {number}"] if number % 3 else []
        turn = Turn(user_message=f"request {number}", history=history, evidence=evidence)
        return turn, f"reply {number} " + "text " * (number % 5 * 200)

    def built(number: int) -> tuple[str, str, tuple[str, ...]]:
        turn, reply = turn_of(number)
        rules = [RulesSource("rules.md", f"rule {number % 4}")] if number % 2 else []
        prompt = build_judge_prompt(
            turn, reply, limits=limits, rules=rules, meta=meta, nonce=f"{number:012x}"
        )
        return prompt.system, prompt.user, prompt.trimmed

    alone = [built(number) for number in range(60)]
    with ThreadPoolExecutor(6) as pool:
        together = list(pool.map(built, range(60)))
    assert together == alone


async def test_verifiers_over_different_configs_each_build_with_their_own(
    make_config: Any,
) -> None:
    """The real path: a verifier made from a changed config (smaller reply cap, a custom
    category) sends the judge a prompt with that config's caps and categories, and one made
    from the first config again sends what the first sent."""
    from replyguard import Verifier
    from replyguard.testing import ScriptedAgent, ScriptedJudge

    turn, reply = _turn()
    configs = [
        make_config(verifyAll=True),
        make_config(verifyAll=True, responseTokenCap=60, categories={"pricing": "fix prices"}),
        make_config(verifyAll=True),
    ]
    prompts = []
    for config in configs:
        judge = ScriptedJudge(["PASS"])
        outcome = await Verifier(config, judge=judge).run(ScriptedAgent([reply]), turn)
        assert outcome.status == "passed"
        prompts.append(judge.calls[0])
    first, changed, again = prompts
    assert first.trimmed == () and "characters of the reply cut here" not in first.user
    assert "reply" in changed.trimmed and "characters of the reply cut here" in changed.user
    assert "|pricing]" in changed.user and "|pricing]" not in first.user
    assert changed.system != first.system
    assert again.system == first.system
    assert again.user.replace(again.nonce, "N") == first.user.replace(first.nonce, "N")
