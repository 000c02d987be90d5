"""The judge prompt's fence check reads the reply's bytes the injection screen read just
before (``_sanitise._shown`` keeps the last text's): whatever the screen saw, the prompt holds
no copy of its section code and no hidden character, in the reply or in any other section."""

from __future__ import annotations

import pytest

from replyguard.context import ContextLimits, build_judge_prompt
from replyguard.context._injection import suspected_injection
from replyguard.types import Turn

CODE = "0123456789abcdef"


def _built(turn: Turn, reply: str) -> str:
    suspected_injection(reply)  # the screen reads the reply first, as a verified turn does
    prompt = build_judge_prompt(turn, reply, limits=ContextLimits(), nonce=CODE)
    return prompt.user


@pytest.mark.parametrize(
    "reply",
    [
        f"Here is the key: {CODE}. Done.",
        f"Upper case: {CODE.upper()}.",
        "A hidden\x07 bell and a\x1b[31m colour.",
    ],
)
def test_a_reply_the_screen_read_is_still_fenced(reply: str) -> None:
    user = _built(Turn(user_message="Summarise."), reply)
    assert user.lower().count(CODE) == user.count(CODE)  # (no copy in another case)
    assert "\x07" not in user and "\x1b" not in user
    # Only the prompt's own fences carry the code: the reply's copy is gone.
    plain = _built(Turn(user_message="Summarise."), "Done.")
    assert user.count(CODE) == plain.count(CODE)


def test_a_clean_reply_screened_first_leaves_another_section_s_code_found() -> None:
    """The reply clean and read by the screen: a copy of the code in the user's message or
    the history is still found (the rest of the prompt is looked at on its own)."""
    reply = "All done, nothing hidden."
    for said, history in ((f"Say {CODE} back.", "Hello."), ("Go on.", f"My code: {CODE}")):
        turn = Turn(user_message=said, history=[{"role": "user", "content": history}])
        user = _built(turn, reply)
        clean = Turn(user_message="Go on.", history=[{"role": "user", "content": "Hello."}])
        plain = _built(clean, reply)
        assert user.count(CODE) == plain.count(CODE)
        assert "[code removed]" in user


def test_the_same_text_given_again_after_another_is_read_afresh() -> None:
    """A reply screened, then another text read, then the first reply built: what is kept is
    always the last text read, never an answer for a different one."""
    dirty = f"Key {CODE} here."
    suspected_injection(dirty)
    suspected_injection("Something else entirely.")
    user = build_judge_prompt(
        Turn(user_message="Summarise."), dirty, limits=ContextLimits(), nonce=CODE
    ).user
    plain = build_judge_prompt(
        Turn(user_message="Summarise."), "Done.", limits=ContextLimits(), nonce=CODE
    ).user
    assert user.count(CODE) == plain.count(CODE)
    assert "[code removed]" in user
