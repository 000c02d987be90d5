"""Properties of the pure parts, on arbitrary input: none of them ever raises.

Every text strategy draws from all of Unicode, lone surrogates included (a JSON ``"\\ud83d"``
escape decodes to one), plus fragments the code looks for (verdict tokens, fences, negations,
regex metacharacters, special tokens), so the generated text reaches past the first branch.
"""

from __future__ import annotations

import re
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replyguard import (
    Reply,
    RunMeta,
    SkipReason,
    Turn,
    Verdict,
    VerifierConfig,
    parse_verdict,
)
from replyguard.context import (
    MESSAGE_OVERHEAD,
    ContextLimits,
    JudgePrompt,
    RulesSource,
    build_judge_prompt,
    render_message,
)
from replyguard.context import _build as context_module
from replyguard.context import _sanitise as sanitise
from replyguard.context import _tokens as tokens
from replyguard.context._sanitise import neutralise, without_code
from replyguard.gate._prechecks import skip_reason
from replyguard.gate._triggers import TriggerKind, TriggerMatcher
from replyguard.judge import _verdict as verdict_module
from replyguard.types import ToolCallRecord

# Hundreds of generated examples a property (about 20 s in all): .ci/run's slow step runs them.
pytestmark = pytest.mark.slow

PROPERTY = settings(
    max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
CONTEXT = settings(
    max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)

# -- strategies ---------------------------------------------------------------------------------

ANY_CHARACTER = st.characters(exclude_categories=())
"""Every code point, surrogates and unassigned ones included."""
FRAGMENTS = st.sampled_from(
    [
        "PASS", "FAIL", "pass", "Fail", "**", "`", "```", "```json", "~~~", "[", "]", "(", ")",
        ":", " - ", "\u2014", "Verdict:", "Final verdict:", "> ", "## ", "incomplete",
        "rule_violation", "Rule Violation", "goal-missed", "{", "}", '"verdict"', '"PASS"',
        '"FAIL"', '"category"', '"feedback"', "null", "\n", "\r\n", "\t", " ", "not", "n't",
        "done", "finished", "ready", "here you go", "yet to", "but", ".", ",", "\u2019",
        "HEARTBEAT_OK", "<|endoftext|>", "<user_request-", "</assistant_reply-", "\x00", "\u202e",
        "\u200b", "\ufeff", "\ud83d", "\U0001f600", "é", "漢字", "\\", ".*", "+?", "$^", "|",
    ]
)  # fmt: skip
TEXT = st.lists(st.one_of(FRAGMENTS, st.text(ANY_CHARACTER, max_size=20)), max_size=40).map("".join)
"""Arbitrary Unicode, with a good share of what the parsers and matchers look for."""
LONG_TEXT = st.one_of(
    TEXT,
    st.builds(lambda piece, n: piece * n, st.text(ANY_CHARACTER, min_size=1, max_size=8),
              st.integers(1, 4000)),
)  # fmt: skip
"""``TEXT``, or one short piece repeated into thousands of characters (cuts and caps)."""
JSON_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), TEXT)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(TEXT, inner, max_size=4)),
    max_leaves=12,
)
ODD_VALUES = st.one_of(JSON_VALUES, st.tuples(JSON_SCALARS), st.sets(st.integers(), max_size=3))

# -- parse_verdict --------------------------------------------------------------------------------

JSON_VERDICT = st.builds(
    lambda verdict, category, feedback, before, after: (
        f'{before}{{"verdict": {verdict}, "category": {category}, "feedback": {feedback}}}{after}'
    ),
    st.sampled_from(['"PASS"', '"FAIL"', '"pass"', "1", "null", '["PASS"]', '"maybe"']),
    st.sampled_from(['"incomplete"', '"nope"', "null", "3", '{"a": 1}']),
    st.sampled_from(['"do it"', "null", "[1, 2]", '{"deep": [[[]]]}']),
    TEXT,
    TEXT,
)
VERDICT_TEXT = st.one_of(st.text(ANY_CHARACTER), TEXT, JSON_VERDICT)


@PROPERTY
@given(VERDICT_TEXT)
def test_parse_verdict_never_raises_and_returns_a_verdict(text: str) -> None:
    assert isinstance(parse_verdict(text), Verdict)


@PROPERTY
@given(VERDICT_TEXT)
def test_an_unreadable_verdict_always_passes(text: str) -> None:
    verdict = parse_verdict(text)
    assert verdict.passed or verdict.readable


@PROPERTY
@given(VERDICT_TEXT)
def test_a_pass_never_carries_a_category(text: str) -> None:
    verdict = parse_verdict(text)
    assert not (verdict.passed and verdict.category is not None)


ENDS_IN_PASS = st.builds(
    lambda before, last, after: f"{before}{last}{after}",
    TEXT,
    st.sampled_from(["\nPASS", "\n PASS ", "\npass", "\nPaSs\r", "PASS", "\nPA\u017fS", "\nPASS."]),
    st.text(st.sampled_from(" \t\n\r\u00a0\u2028"), max_size=4),
)


@PROPERTY
@given(st.one_of(ENDS_IN_PASS, VERDICT_TEXT))
def test_the_plain_pass_shortcut_reads_what_the_general_path_reads(text: str) -> None:
    shortcut = verdict_module._plain_pass(text)
    if shortcut is not None:
        assert shortcut == verdict_module._read(text, frozenset())


# -- pre-checks -----------------------------------------------------------------------------------

TOOL_CALLS = st.lists(
    st.builds(ToolCallRecord, name=TEXT, arguments=ODD_VALUES, succeeded=st.booleans()),
    max_size=3,
).map(tuple)
META = st.builds(
    RunMeta,
    stop_reason=st.one_of(st.none(), TEXT, st.sampled_from(["tool_calls", " ERROR ", "stop"])),
    pending_tool_calls=st.one_of(st.integers(0, 10**12), st.lists(JSON_SCALARS, max_size=3)),
    sent_via_messaging_tool=st.booleans(),
    streamed_block_keys=st.frozensets(TEXT, max_size=3),
    duration_ms=st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)),
    tool_calls=TOOL_CALLS,
    usage=st.one_of(st.none(), st.dictionaries(TEXT, JSON_VALUES, max_size=3)),
    cost_usd=st.one_of(st.none(), st.floats(min_value=0, allow_infinity=True)),
    error=st.one_of(st.none(), TEXT),
)
REPLIES = st.builds(Reply, text=LONG_TEXT, meta=META)


@PROPERTY
@given(REPLIES)
def test_skip_reason_never_raises_on_any_reply(reply: Reply) -> None:
    assert skip_reason(reply) is None or isinstance(skip_reason(reply), SkipReason)


@PROPERTY
@given(st.text(st.sampled_from(" \t\n\r\u00a0\u2028\u200b\u200d\u2060\ufeff"), max_size=30))
def test_a_reply_of_only_blank_and_invisible_characters_is_skipped_as_empty(text: str) -> None:
    assert skip_reason(Reply(text=text)) is SkipReason.EMPTY_RESPONSE


# -- triggers -------------------------------------------------------------------------------------

KEYWORD = TEXT.filter(lambda k: bool(k.strip()))
KEYWORDS = st.lists(KEYWORD, min_size=0, max_size=6)


def _matcher(keywords: list[str], **keys: Any) -> TriggerMatcher:
    return TriggerMatcher(VerifierConfig(trigger_keywords=tuple(keywords), **keys))


@PROPERTY
@given(KEYWORDS, LONG_TEXT)
def test_matched_keyword_never_raises_and_names_a_configured_keyword(
    keywords: list[str], text: str
) -> None:
    found = _matcher(keywords).matched_keyword(text)
    assert found is None or found in {" ".join(k.split()) for k in keywords}


@PROPERTY
@given(KEYWORDS, LONG_TEXT, st.booleans(), st.booleans(), st.booleans())
def test_decide_never_raises(
    keywords: list[str], text: str, heartbeat: bool, verify_all: bool, verify_heartbeat: bool
) -> None:
    matcher = _matcher(keywords, verify_all=verify_all, verify_heartbeat=verify_heartbeat)
    decision = matcher.decide(Turn(user_message="hi", heartbeat=heartbeat), text)
    assert decision is None or isinstance(decision, TriggerKind)


@PROPERTY
@given(KEYWORD)
def test_a_keyword_alone_fires(keyword: str) -> None:
    assert _matcher([keyword]).matched_keyword(keyword) == " ".join(keyword.split())


# -- the sanitiser's quick looks -----------------------------------------------------------------

ASCII_TEXT = st.text(st.characters(max_codepoint=0x7F), max_size=60)


@PROPERTY
@given(st.one_of(ASCII_TEXT, TEXT))
def test_the_visible_ascii_look_is_the_hidden_class_search(text: str) -> None:
    assert sanitise._visible_ascii(text) is (
        text.isascii() and sanitise._ASCII_HIDDEN.search(text) is None
    )


def test_the_visible_ascii_look_agrees_on_every_character_below_256() -> None:
    for code in range(256):
        text = f"plain {chr(code)} text"
        assert sanitise._visible_ascii(text) is (
            text.isascii() and sanitise._ASCII_HIDDEN.search(text) is None
        ), hex(code)


@PROPERTY
@given(
    st.one_of(ASCII_TEXT, TEXT, st.builds("{}{}{}".format, ASCII_TEXT, st.sampled_from(
        ["0a1b2c3d4e5f", "0A1B2C3D4E5F", "0a1B2c3D4e5F", "ab", "\u212a", ""]), ASCII_TEXT)),
    st.sampled_from(["0a1b2c3d4e5f", "AB", "\u212a", "k", ""]),
)  # fmt: skip
def test_nothing_to_fence_is_plain_ascii_without_hidden_characters_or_the_code(
    text: str, code: str
) -> None:
    assert sanitise.nothing_to_fence(text, code) is (
        text.isascii()
        and sanitise._ASCII_HIDDEN.search(text) is None
        and code.lower() not in text.lower()
    )


@PROPERTY
@given(st.lists(st.one_of(ASCII_TEXT, TEXT), max_size=6), st.sampled_from(["0a1b2c3d4e5f", "AB"]))
def test_texts_with_nothing_to_fence_together_each_come_back_from_fenced(
    texts: list[str], code: str
) -> None:
    if sanitise.nothing_to_fence("\n".join(texts), code):
        assert all(sanitise.fenced(text, code) is text for text in texts)


# -- the judge prompt -----------------------------------------------------------------------------

ROLES = st.one_of(
    st.sampled_from(["user", "assistant", "system", "tool", "developer", "function", ""]),
    st.none(),
    st.integers(),
    TEXT,
)
PARTS = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": st.one_of(TEXT, st.none())}),
    st.fixed_dictionaries({"type": st.sampled_from(["image_url", "input_audio", "x"])}),
    st.dictionaries(TEXT, JSON_VALUES, max_size=3),
    TEXT,
    JSON_SCALARS,
)
CONTENT = st.one_of(st.none(), LONG_TEXT, st.lists(PARTS, max_size=4), ODD_VALUES)
TOOL_CALL_SHAPES = st.one_of(
    st.fixed_dictionaries(
        {"function": st.fixed_dictionaries({"name": TEXT, "arguments": JSON_VALUES})}
    ),
    st.fixed_dictionaries({"function": ODD_VALUES}),
    JSON_VALUES,
)
MESSAGES = st.fixed_dictionaries(
    {"role": ROLES, "content": CONTENT},
    optional={
        "name": st.one_of(TEXT, st.integers()),
        "tool_call_id": TEXT,
        "tool_calls": st.one_of(st.lists(TOOL_CALL_SHAPES, max_size=3), st.none()),
        "extra": JSON_VALUES,
    },
)
TURNS = st.builds(
    Turn,
    user_message=LONG_TEXT,
    history=st.lists(MESSAGES, max_size=8),
    rules=st.lists(TEXT, max_size=3),
    agent_instructions=st.one_of(st.none(), LONG_TEXT),
    heartbeat=st.booleans(),
    metadata=st.dictionaries(TEXT, JSON_VALUES, max_size=3),
)
LIMITS = st.builds(
    ContextLimits,
    budget=st.integers(1000, 20000),
    response_cap=st.integers(50, 20000),
    rules_cap=st.integers(0, 20000),
    history_turns=st.integers(0, 10),
)
RULES = st.lists(st.builds(RulesSource, origin=TEXT, text=LONG_TEXT), max_size=3)
FEEDBACK = st.lists(LONG_TEXT, max_size=3)


def _prompt(data: st.DataObject) -> tuple[JudgePrompt, Turn, str, ContextLimits]:
    turn = data.draw(TURNS, "turn")
    reply = data.draw(LONG_TEXT, "reply")
    limits = data.draw(LIMITS, "limits")
    prompt = build_judge_prompt(
        turn,
        reply,
        limits=limits,
        rules=data.draw(RULES, "rules"),
        heartbeat_tasks=data.draw(st.one_of(st.none(), LONG_TEXT), "heartbeat"),
        previous_feedback=data.draw(FEEDBACK, "feedback"),
        meta=data.draw(st.one_of(st.none(), META), "meta"),
    )
    return prompt, turn, reply, limits


def _section(prompt: JudgePrompt, name: str) -> str | None:
    code = re.escape(prompt.nonce)
    found = re.search(rf"<{name}-{code}>\n(.*?)\n</{name}-{code}>", prompt.user, re.DOTALL)
    return found.group(1) if found else None


def _keeps_its_head(body: str, original: str, nonce: str) -> bool:
    """The section shows ``original`` (as cleaned for the judge) whole, or the cleaned start of
    it followed by a cut marker. The text is cut before it is cleaned, so a run of hidden
    characters astride the cut is described as the part that was kept."""

    def cleaned(text: str) -> str:
        return without_code(neutralise(text), nonce)

    if body == cleaned(original):
        return True
    kept, marker, _ = body.partition("\n[… ")
    prefixes = (original[:end] for end in range(1, len(original) + 1))
    return bool(marker) and bool(kept) and any(cleaned(p).startswith(kept) for p in prefixes)


@CONTEXT
@given(st.data())
def test_the_judge_prompt_fits_the_budget(data: st.DataObject) -> None:
    prompt, _, _, limits = _prompt(data)
    counted = tokens.count(prompt.system) + tokens.count(prompt.user) + MESSAGE_OVERHEAD
    assert counted <= limits.budget


@CONTEXT
@given(st.data())
def test_a_prompt_built_whole_is_the_one_the_cutting_path_builds(data: st.DataObject) -> None:
    """The shortcut for a turn that fits by its size changes nothing: with it turned off, the
    very same prompt comes out (same nonce), whatever was or was not cut."""
    inputs = {
        "turn": data.draw(TURNS, "turn"),
        "reply_text": data.draw(LONG_TEXT, "reply"),
        "limits": data.draw(LIMITS, "limits"),
        "rules": data.draw(RULES, "rules"),
        "heartbeat_tasks": data.draw(st.one_of(st.none(), LONG_TEXT), "heartbeat"),
        "previous_feedback": data.draw(FEEDBACK, "feedback"),
        "meta": data.draw(st.one_of(st.none(), META), "meta"),
        "nonce": "5eed5eed5eed",
    }
    fast = build_judge_prompt(**inputs)
    with mock.patch.object(context_module, "_at_once", return_value=None):
        cut = build_judge_prompt(**inputs)
    assert (fast.system, fast.user, fast.trimmed) == (cut.system, cut.user, cut.trimmed)
    assert fast.tokens == cut.tokens


@CONTEXT
@given(st.data())
def test_the_judge_prompt_reports_its_own_token_count(data: st.DataObject) -> None:
    prompt, _, _, _ = _prompt(data)
    counted = tokens.count(prompt.system) + tokens.count(prompt.user) + MESSAGE_OVERHEAD
    assert prompt.tokens == counted


@CONTEXT
@given(st.data())
def test_the_user_request_section_keeps_the_head_of_the_request(data: st.DataObject) -> None:
    prompt, turn, _, _ = _prompt(data)
    body = _section(prompt, "user_request")
    assert body is not None and _keeps_its_head(body, turn.user_message, prompt.nonce)


@CONTEXT
@given(st.data())
def test_the_reply_section_keeps_the_head_of_the_reply(data: st.DataObject) -> None:
    prompt, _, reply, _ = _prompt(data)
    body = _section(prompt, "assistant_reply")
    assert body is not None and _keeps_its_head(body, reply, prompt.nonce)


@CONTEXT
@given(st.data())
def test_each_section_code_opens_and_closes_its_sections_only(data: st.DataObject) -> None:
    """No text can add, close or forge a fence: the code appears only in the tags and the
    one line that announces it."""
    prompt, _, _, _ = _prompt(data)
    tags = re.findall(rf"</?([a-z_]+)-{re.escape(prompt.nonce)}>", prompt.user)
    opened = tags[0::2]
    assert tags[1::2] == opened and len(set(opened)) == len(opened)
    assert prompt.user.count(prompt.nonce) == len(tags) + 1


@PROPERTY
@given(st.one_of(MESSAGES, ODD_VALUES))
def test_render_message_never_raises_on_any_value(message: Any) -> None:
    assert isinstance(render_message(message), str)
