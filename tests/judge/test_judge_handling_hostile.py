"""The judge's cheaper handling held to what it replaced, on hostile input: the lean shield
(``shielded``) against ``asyncio.shield`` at every point a cancellation can arrive, a plain
PASS's kept fields through the copies the runner and a host make of an answer, and an
answer's odd usage read as validation reads it."""

from __future__ import annotations

import asyncio
import copy
import gc
import json
import pickle
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
import respx

from conftest import API_KEY
from replyguard import Turn, Verifier, VerifierConfig
from replyguard._frozen import replaced
from replyguard.judge import LiteLLMJudge
from replyguard.judge._litellm import read_response
from replyguard.judge._protocol import JudgeReply, plain_pass, readable
from replyguard.judge._settling import let_go, shielded
from replyguard.judge._verdict import parse_verdict, plain_pass_fields
from replyguard.telemetry import Events
from support.provider_server import ANTHROPIC, OPENAI, Step, Wire

PLAIN = "The reply answers the question.\nPASS"

Shield = Callable[[asyncio.Task[Any]], Awaitable[Any]]


class Refused(Exception):
    """The call's own failure."""


async def _call(ending: str, started: asyncio.Event, release: asyncio.Event) -> str:
    started.set()
    await release.wait()
    if ending == "error":
        raise Refused("no")
    if ending == "cancelled":
        raise asyncio.CancelledError
    return "answer"


async def _cut_off(
    shield: Shield, ending: str, cancel: str, let_it_go: bool
) -> tuple[list[str], str, list[str]]:
    """What the caller of a shielded call saw, how the call ended, and what the loop logged
    as never retrieved, when the caller is cancelled at ``cancel``."""
    loop = asyncio.get_running_loop()
    logged: list[str] = []
    loop.set_exception_handler(lambda _, context: logged.append(str(context.get("message"))))
    started, release = asyncio.Event(), asyncio.Event()
    task = loop.create_task(_call(ending, started, release))
    seen: list[str] = []

    async def caller(call: asyncio.Task[str]) -> None:
        try:
            seen.append(f"result {await shield(call)}")
        except asyncio.CancelledError:
            seen.append("cancelled")
            if let_it_go:
                await let_go(call)
            raise
        except Refused:
            seen.append("refused")

    waiter = loop.create_task(caller(task))
    if cancel == "before-it-starts":
        await asyncio.sleep(0)
        waiter.cancel()
        await asyncio.sleep(0)
    elif cancel in ("while-it-runs", "twice"):
        await started.wait()
        waiter.cancel()
        if cancel == "twice":
            waiter.cancel()
            await asyncio.sleep(0)
            waiter.cancel()
    elif cancel == "after-it-ended":  # its outcome handed on, the caller not resumed yet
        await started.wait()
        task.add_done_callback(lambda _, caller=waiter: caller.cancel())
    release.set()
    try:
        await waiter
    except asyncio.CancelledError:
        seen.append("caller cancelled")
    for _ in range(5):
        await asyncio.sleep(0)
    ended = "cancelled" if task.cancelled() else "done" if task.done() else "running"
    del task, waiter
    gc.collect()
    await asyncio.sleep(0)
    loop.set_exception_handler(None)
    return seen, ended, logged


@pytest.mark.parametrize("let_it_go", [False, True], ids=["kept", "let-go"])
@pytest.mark.parametrize(
    "cancel", ["never", "before-it-starts", "while-it-runs", "twice", "after-it-ended"]
)
@pytest.mark.parametrize("ending", ["answer", "error", "cancelled"])
async def test_the_lean_shield_ends_as_asyncio_shield_wherever_it_is_cut_off(
    ending: str, cancel: str, let_it_go: bool
) -> None:
    lean = await _cut_off(shielded, ending, cancel, let_it_go)
    reference = await _cut_off(asyncio.shield, ending, cancel, let_it_go)
    assert lean[:2] == reference[:2]  # what the caller saw, how the call ended
    assert lean[2] == []  # a call given up on has its error read: nothing logged


# --- a plain PASS's kept fields through copies ---------------------------------------------


def _copies(reply: JudgeReply) -> dict[str, JudgeReply]:
    return {
        "panel-member": reply.model_copy(update={"model": "panel-seat"}),
        "tokens-added": reply.model_copy(update={"prompt_tokens": 9, "cost_usd": 0.5}),
        "pickled": pickle.loads(pickle.dumps(reply)),
        "deep-copied": copy.deepcopy(reply),
        "equal-text": reply.model_copy(update={"text": "".join(list(PLAIN))}),
    }


@pytest.mark.parametrize(
    "kind", ["panel-member", "tokens-added", "pickled", "deep-copied", "equal-text"]
)
async def test_a_copy_of_a_plain_pass_read_gives_the_parse_fields(kind: str) -> None:
    reply = JudgeReply(text=PLAIN, model="m")
    assert await readable(reply) is True
    copied = _copies(reply)[kind]
    expected = parse_verdict(PLAIN)
    fields = plain_pass(copied)
    assert fields is not None
    assert fields == plain_pass_fields(PLAIN)
    assert copied.verdict == expected
    assert copied.verdict.model_fields_set == expected.model_fields_set


FAILED = "It lacks the third point.\nFAIL [incomplete]: add it"


def _with_text(how: str, reply: JudgeReply, text: str) -> JudgeReply:
    if how == "model_copy":
        return reply.model_copy(update={"text": text})
    return replaced(reply, {"text": text})


@pytest.mark.parametrize("how", ["model_copy", "replaced"])
@pytest.mark.parametrize(
    ("first", "then"), [(PLAIN, FAILED), (FAILED, PLAIN)], ids=["pass-to-fail", "fail-to-pass"]
)
@pytest.mark.parametrize("read", ["readable", "verdict", "parsed"])
async def test_a_copy_with_its_text_changed_reads_its_own_text(
    read: str, first: str, then: str, how: str
) -> None:
    """A host's judge that rewrites the answer's text (a redaction, a translation) after the
    litellm judge read it gets the verdict of the text it returns, never the original's kept
    on the copy."""
    reply = JudgeReply(text=first, model="m")
    if read == "readable":
        assert await readable(reply) is True
    elif read == "verdict":
        assert reply.verdict == parse_verdict(first)
    else:
        assert await reply.parsed() == parse_verdict(first)
    changed = _with_text(how, reply, then)
    fields = plain_pass(changed)  # the runner's first look: the copy's own text
    assert (fields is not None) is (then == PLAIN)
    assert changed.verdict == parse_verdict(then)
    assert await changed.parsed() == parse_verdict(then)
    assert reply.verdict == parse_verdict(first)  # the original keeps its own


# --- an answer's odd usage --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("usage", "cost"),
    [
        pytest.param({"prompt_tokens": True, "completion_tokens": False}, 0.0, id="bool-counts"),
        pytest.param({"prompt_tokens": "12", "completion_tokens": "3"}, 0.0, id="text-counts"),
        pytest.param({"prompt_tokens": 12.9, "completion_tokens": 0}, 0.0, id="float-count"),
        pytest.param({"prompt_tokens": 1, "completion_tokens": 1}, float("inf"), id="inf-cost"),
        pytest.param({"prompt_tokens": 1, "completion_tokens": 1}, -0.0, id="negative-zero"),
        pytest.param({"prompt_tokens": 1, "completion_tokens": 1}, True, id="bool-cost"),
        pytest.param(None, 0.0, id="no-usage"),
    ],
)
def test_odd_usage_reads_as_validation_reads_it(usage: Any, cost: Any) -> None:
    class Response(dict[str, Any]):
        _hidden_params: dict[str, Any]

    response = Response(model=["not", "a", "name"], choices=[{"message": {"content": PLAIN}}])
    if usage is not None:
        response["usage"] = usage
    response._hidden_params = {"response_cost": cost}
    reply = read_response(response, "m", set())
    again = JudgeReply(**reply.model_dump())
    assert reply.__dict__ == again.__dict__
    assert [type(v) for v in reply.__dict__.values()] == [type(v) for v in again.__dict__.values()]
    assert reply.model_fields_set == again.model_fields_set


# --- the template after calls on the wire -----------------------------------------------------


@pytest.mark.parametrize("wire", [OPENAI, ANTHROPIC], ids=["openai", "anthropic"])
async def test_calls_on_the_wire_leave_the_model_template_as_it_was(
    respx_litellm: None, make_config: Callable[..., VerifierConfig], wire: Wire
) -> None:
    """litellm maps the options it is given (the verdict schema into a provider's form): the
    template each call copies, its nested schema included, is the same after the calls, and
    each call sends the same options."""
    keys = {"verifyAll": True, "apiKey": API_KEY, "agentModel": wire.agent_model}
    config = make_config(model=wire.judge_model, **keys)
    judge = LiteLLMJudge(config, Events())
    verifier = Verifier(config, judge=judge)

    def respond(request: httpx.Request) -> httpx.Response:
        model = json.loads(request.content)["model"]
        return httpx.Response(200, json=wire.answer(Step(text="PASS"), model))

    with respx.mock(assert_all_mocked=True) as http:
        route = http.post(wire.url).mock(side_effect=respond)
        await verifier.verify(Turn(user_message="Summarise the report."), "Done: three points.")
        templates = copy.deepcopy(judge._plan._templates)
        assert templates  # kept once litellm is loaded
        await verifier.verify(Turn(user_message="Name three cities."), "Paris, Rome, Oslo.")
        await verifier.verify(Turn(user_message="Name two rivers."), "Nile, Amazon.")
    assert judge._plan._templates == templates
    bodies = [json.loads(call.request.content) for call in route.calls]
    options = [{k: v for k, v in b.items() if k not in ("messages", "system")} for b in bodies]
    assert len(options) == 3 and options[0] == options[1] == options[2]
    await verifier.aclose()


# --- the literal key kept per plan ------------------------------------------------------------


class _VaultConfig(VerifierConfig):
    """A host's config whose key comes from its own store, whatever the file says."""

    def resolve_api_key(self) -> str | None:
        return "sk-from-the-vault-0123456789"


def test_a_host_config_resolving_its_own_key_is_asked_on_every_call(
    make_config: Callable[..., VerifierConfig],
) -> None:
    """The literal key kept per plan is ``VerifierConfig``'s own reading of ``apiKey``: a
    subclass that resolves the key itself is asked each call, as before the key was kept."""
    config = _VaultConfig(**make_config(apiKey=API_KEY).__dict__)
    plan = LiteLLMJudge(config, Events())._plan
    assert plan.api_key() == "sk-from-the-vault-0123456789"
