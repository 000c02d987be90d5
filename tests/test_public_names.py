"""Public names report ``replyguard`` as their module, so reprs and tracebacks show no private
path; the pydantic models among them still build (on first use) with their forward references."""

from __future__ import annotations

import subprocess
import sys
import traceback

import pytest

import replyguard

PUBLIC = [getattr(replyguard, name) for name in replyguard.__all__ if name != "__version__"]


@pytest.mark.parametrize("obj", PUBLIC, ids=lambda obj: obj.__name__)
def test_a_public_name_reports_the_package_as_its_module(obj: object) -> None:
    assert obj.__module__ == "replyguard"


def test_reprs_and_tracebacks_name_the_front_door() -> None:
    assert repr(replyguard.Verifier) == "<class 'replyguard.Verifier'>"
    with pytest.raises(replyguard.ConfigError) as caught:
        replyguard.VerifierConfig.from_dict({"nope": 1})
    last = traceback.format_exception_only(caught.value)[-1]
    assert last.startswith("replyguard.ConfigError: ")


def test_the_models_build_on_first_use_after_their_module_changed() -> None:
    """In a fresh process no model is built at import; each one that is built afterwards still
    resolves its forward references (``RunMeta`` in ``Reply``, ``Verdict`` in ``Attempt`` ...)."""
    script = (
        "import replyguard as r\n"
        "assert not r.Outcome.__pydantic_complete__\n"
        "reply = r.Reply(text='hi', meta=r.RunMeta(stop_reason='stop'))\n"
        "attempt = r.Attempt(number=1, reply=reply, verdict=r.Verdict(passed=True))\n"
        "outcome = r.Outcome(response='hi', status=r.Status.PASSED, attempts=(attempt,))\n"
        "assert r.Turn.model_validate({'user_message': 'q'}).user_message == 'q'\n"
        "assert r.JudgeReply(text='PASS', model='m').verdict.passed\n"
        "assert r.VerifierConfig.json_schema()['properties']['judgeMaxTokens']['description']\n"
        "print(type(outcome).__module__, outcome.attempts[0].verdict.passed)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["replyguard", "True"]
