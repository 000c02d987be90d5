"""``VerifiedRunnable.astream``: a LangChain runnable's stream through ``Verifier.stream``,
driven by langchain-core's GenericFakeChatModel (it streams a reply word by word) and the
scripted judge."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.runnables import RunnableGenerator, RunnableLambda

from replyguard import Outcome, Retract, Status, Verifier
from replyguard.adapters.langchain import METADATA_KEY, VerifiedRunnable
from replyguard.testing import ScriptedJudge

BAD = "Done: the report."
GOOD = "Done: the report, dated 2026-01-02."
FEEDBACK = "Add the report's date."
FAIL = f"FAIL [incomplete]: {FEEDBACK}"
RELEASE = {"mode": "release", "holdBackChars": 0}
WAIT = 5.0


class Recorder:
    """A step in front of the model that keeps every input the model was given."""

    def __init__(self) -> None:
        self.inputs: list[list[BaseMessage]] = []

    def __call__(self, messages: list[BaseMessage]) -> list[BaseMessage]:
        self.inputs.append(list(messages))
        return messages


def model(*replies: str) -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter(AIMessage(reply) for reply in replies))


def after_last_retract(items: list[Any]) -> list[Any]:
    for index in range(len(items) - 1, -1, -1):
        if isinstance(items[index], Retract):
            return items[index + 1 :]
    return items


async def collect(verified: VerifiedRunnable, value: Any) -> list[Any]:
    return [item async for item in verified.astream(value)]


async def test_a_failed_reply_is_retracted_and_the_retry_streams_in_its_place(
    make_config: Any,
) -> None:
    judge, recorder = ScriptedJudge([FAIL, "PASS"]), Recorder()
    chain = RunnableLambda(recorder) | model(BAD, GOOD)
    verifier = Verifier(make_config(verifyAll=True, streaming=RELEASE), judge=judge)
    items = await collect(VerifiedRunnable(chain, verifier), "Write the weekly report.")
    retract = items.index(Retract(1, "incomplete"))
    before = items[:retract]
    assert all(isinstance(chunk, AIMessageChunk) for chunk in before) and len(before) > 1
    assert "".join(chunk.text for chunk in before) == BAD  # word by word, as the model streamed
    delivered = after_last_retract(items)
    message = delivered[0]
    for chunk in delivered[1:]:
        message = message + chunk
    assert message.text == GOOD
    outcome = Outcome.model_validate(message.response_metadata[METADATA_KEY])
    assert (outcome.status, outcome.response, len(outcome.attempts)) == (Status.PASSED, GOOD, 2)
    # The retry's input holds the feedback, not the withdrawn reply.
    retry = recorder.inputs[1]
    assert [type(m) for m in retry] == [HumanMessage, HumanMessage]
    assert FEEDBACK in retry[1].text
    judge.assert_exhausted()


async def test_buffer_mode_streams_only_the_delivered_reply(make_config: Any) -> None:
    judge, recorder = ScriptedJudge([FAIL, "PASS"]), Recorder()
    chain = RunnableLambda(recorder) | model(BAD, GOOD)
    verifier = Verifier(make_config(verifyAll=True), judge=judge)
    items = await collect(VerifiedRunnable(chain, verifier), "Write the weekly report.")
    assert not any(isinstance(item, Retract) for item in items)
    assert "".join(chunk.text for chunk in items) == GOOD
    # Never shown, so not withdrawn: the retry sees its earlier reply, as in ainvoke.
    assert [m.text for m in recorder.inputs[1]][1] == BAD


async def test_a_string_chain_streams_strings(make_config: Any) -> None:
    judge = ScriptedJudge([FAIL, "PASS"])
    chain = model(BAD, GOOD) | StrOutputParser()
    verifier = Verifier(make_config(verifyAll=True, streaming=RELEASE), judge=judge)
    items = await collect(VerifiedRunnable(chain, verifier), "Write the weekly report.")
    assert Retract(1, "incomplete") in items
    delivered = after_last_retract(items)
    assert all(isinstance(item, str) for item in delivered)
    assert "".join(delivered) == GOOD


async def test_text_arrives_while_the_model_streams_and_closing_stops_it(
    make_config: Any,
) -> None:
    closed = asyncio.Event()

    async def endless(inputs: AsyncIterator[Any]) -> AsyncIterator[AIMessageChunk]:
        try:
            yield AIMessageChunk(content="Done: ")
            await asyncio.Event().wait()  # never set: only closing ends it
            yield AIMessageChunk(content="never")  # pragma: no cover
        finally:
            closed.set()

    judge = ScriptedJudge([])
    verifier = Verifier(make_config(verifyAll=True, streaming=RELEASE), judge=judge)
    verified = VerifiedRunnable(RunnableGenerator(endless), verifier)
    async with aclosing(verified.astream("Write the weekly report.")) as items:  # type: ignore[type-var]
        async for item in items:
            assert item.text == "Done: "  # shown while the model is still writing
            break
    async with asyncio.timeout(WAIT):
        await closed.wait()
    judge.assert_exhausted()


async def test_the_stream_shows_in_callbacks_as_one_chain_run_with_child_runs(
    make_config: Any,
) -> None:
    class Runs(BaseCallbackHandler):
        def __init__(self) -> None:
            self.started: list[tuple[str | None, Any]] = []

        def on_chain_start(self, serialized: Any, inputs: Any, **kwargs: Any) -> None:
            self.started.append((kwargs.get("name"), kwargs.get("parent_run_id")))

    runs = Runs()
    judge = ScriptedJudge([FAIL, "PASS"])
    verifier = Verifier(make_config(verifyAll=True, streaming=RELEASE), judge=judge)
    chain = RunnableLambda(lambda messages: messages) | model(BAD, GOOD)
    verified = VerifiedRunnable(chain, verifier)
    items = [i async for i in verified.astream("Report.", {"callbacks": [runs]})]
    assert items[-1].response_metadata[METADATA_KEY]["status"] == "passed"
    roots = [name for name, parent in runs.started if parent is None]
    assert roots == ["VerifiedRunnable"]
    assert sum(1 for name, _ in runs.started if name == "RunnableSequence") == 2
