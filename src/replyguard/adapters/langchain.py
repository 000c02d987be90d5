"""LangChain adapter (langchain-core only): a ``Runnable`` whose chat reply is verified.

``VerifiedRunnable(runnable, verifier)`` takes a runnable that answers chat messages with an
``AIMessage`` (a chat model, or a chain ending in one) or a ``str`` (a chain ending in
``StrOutputParser``). ``invoke`` / ``ainvoke`` run it through ``Verifier.run``: on a FAIL the
previous reply and the feedback are appended to the messages and the runnable is invoked again,
so each attempt sees every earlier reply and feedback, as ``Verifier.run`` keeps them. It
returns what the runnable returned for the delivered attempt: a message comes back as a copy
carrying the turn's ``Outcome`` as JSON (``Outcome.model_dump(mode="json")``) in
``response_metadata["replyguard"]``; a ``str`` has nowhere to carry it and comes back as it is.
``batch`` and ``abatch`` come from the ``Runnable`` base class. ``invoke`` (and so ``batch``)
also works where an event loop already runs in the calling thread (a Jupyter cell, sync code
called from async code): the turn then runs from a worker thread while the caller waits. It
shows in callbacks as one chain run, with each attempt as a child run.

``astream`` streams a verified turn through ``Verifier.stream``: each attempt is the
runnable's own ``astream``, and the text the user may see comes back as the runnable's own
chunks (an ``AIMessageChunk``, or a ``str`` from a chain ending in ``StrOutputParser``), with a
``replyguard.Retract`` when the text shown so far is withdrawn (drop the chunks gathered since
the last one: the chunks that follow replace them). A message stream ends with an empty chunk
carrying the ``Outcome`` in ``response_metadata["replyguard"]``, so the chunks after the last
``Retract``, added up, are the delivered message with its outcome.

For an agent built with ``langchain.agents.create_agent``, see
``replyguard.adapters.langchain_agents`` (a middleware judging in the after-model hook).

    verified = VerifiedRunnable(chat_model, verifier)
    reply = await verified.ainvoke([SystemMessage(...), HumanMessage("Summarise the notes.")])
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any, TypeVar, cast

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForChainRun,
        CallbackManagerForChainRun,
    )
    from langchain_core.language_models import LanguageModelInput
    from langchain_core.messages import (
        AIMessage,
        AIMessageChunk,
        BaseMessage,
        HumanMessage,
        ToolMessage,
        convert_to_messages,
        convert_to_openai_messages,
    )
    from langchain_core.runnables import Runnable, RunnableConfig
    from langchain_core.runnables.config import patch_config
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "replyguard.adapters.langchain needs langchain-core: pip install 'replyguard[langchain]'"
    ) from exc

from replyguard.adapters._shared import (
    Attempts,
    blocking,
    make_turn,
    operator_message,
    retry_conversation,
    retry_feedback,
    stream_turn,
    turn_defaults,
)
from replyguard.runner._verifier import Verifier
from replyguard.types import Delta, Outcome, Reply, Retract, RunMeta, Turn

__all__ = ["METADATA_KEY", "VerifiedRunnable", "with_outcome"]

METADATA_KEY = "replyguard"
"""The ``response_metadata`` key under which a delivered message carries its ``Outcome``."""

ChatReply = BaseMessage | str
Messages = list[dict[str, Any]]


def as_messages(value: LanguageModelInput) -> list[BaseMessage]:
    """A runnable's chat input as LangChain messages (a string is one human message)."""
    if isinstance(value, str):
        return [HumanMessage(value)]
    return convert_to_messages(value)


def reply_of(output: ChatReply) -> Reply:
    """A ``Reply`` from an ``AIMessage`` (text, tool calls, usage, finish reason) or a str."""
    if isinstance(output, str):
        return Reply(text=output)
    if not isinstance(output, BaseMessage):
        raise TypeError(f"the runnable must return a message or a str, not {type(output).__name__}")
    meta: dict[str, Any] = {"stop_reason": output.response_metadata.get("finish_reason")}
    if isinstance(output, AIMessage):
        meta["pending_tool_calls"] = len(output.tool_calls)
        if output.usage_metadata is not None:
            meta["usage"] = dict(output.usage_metadata)
    return Reply(text=str(output.text), meta=RunMeta(**meta))


M = TypeVar("M", bound=BaseMessage)


def with_outcome(message: M, outcome: Outcome) -> M:
    """A copy of ``message`` carrying ``outcome`` (as JSON) in its ``response_metadata``."""
    metadata = {**message.response_metadata, METADATA_KEY: outcome.model_dump(mode="json")}
    return message.model_copy(update={"response_metadata": metadata})


def delivered(attempts: Attempts[ChatReply], outcome: Outcome) -> ChatReply:
    """The delivered attempt's output; a message carries the ``outcome``."""
    output = attempts.delivered(outcome)
    said = operator_message(outcome)
    if said is not None:  # ``onExhausted``'s message, in place of every attempt
        if not isinstance(output, BaseMessage):
            return said
        output = output.model_copy(update={"content": said})
    return with_outcome(output, outcome) if isinstance(output, BaseMessage) else output


def turn_of(messages: list[BaseMessage], fields: dict[str, Any]) -> Turn:
    """The last human message and the messages before it; the tool messages after it (this
    turn's tool results, from the host's own tool loop) are the turn's evidence, after any
    the host passed in ``fields``."""
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], HumanMessage):
            history = convert_to_openai_messages(messages[:index])
            results = [
                f"[tool {m.name or m.tool_call_id}] {m.text}"
                for m in messages[index + 1 :]
                if isinstance(m, ToolMessage) and m.text.strip()
            ]
            if results:
                fields = {**fields, "evidence": [*fields.get("evidence", ()), *results]}
            return make_turn(str(messages[index].text), history, fields)
    return make_turn("", convert_to_openai_messages(messages), fields)


class Conversation:
    """The messages of one verified turn: the input, then each earlier reply and its feedback."""

    def __init__(self, messages: list[BaseMessage]) -> None:
        self.messages = list(messages)

    def next_input(self, attempts: Attempts[ChatReply], sent: Messages) -> list[BaseMessage]:
        """The input of the next attempt: after the first, with the last reply and feedback."""
        if attempts:
            last = attempts.last
            previous = last if isinstance(last, BaseMessage) else AIMessage(last)
            self.messages += [previous, HumanMessage(retry_feedback(sent))]
        return list(self.messages)


def chat_messages(messages: list[dict[str, Any]]) -> list[BaseMessage]:
    """OpenAI-style user and assistant messages with text content as LangChain messages."""
    out: list[BaseMessage] = []
    for message in messages:
        content = message.get("content")
        text = content if isinstance(content, str) else ""
        out.append(AIMessage(text) if message.get("role") == "assistant" else HumanMessage(text))
    return out


class VerifiedRunnable(Runnable[LanguageModelInput, ChatReply]):
    """A chat runnable whose reply is verified, and retried with the judge's feedback.

    ``turn_fields`` are extra ``Turn`` fields (``rules``, ``agent_instructions``, ...).
    """

    def __init__(
        self, runnable: Runnable[Any, ChatReply], verifier: Verifier, **turn_fields: Any
    ) -> None:
        self.runnable = runnable
        self.verifier = verifier
        self._fields = turn_defaults(turn_fields)

    def _prepare(self, value: LanguageModelInput) -> tuple[Conversation, Turn, Attempts[ChatReply]]:
        messages = as_messages(value)
        return Conversation(messages), turn_of(messages, self._fields), Attempts()

    def invoke(
        self, input: LanguageModelInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> ChatReply:
        """Invoke the runnable, verify its reply, retry with the feedback, deliver (also where
        an event loop already runs in this thread: from a worker thread then)."""

        def verified(
            value: LanguageModelInput,
            run_manager: CallbackManagerForChainRun,
            config: RunnableConfig,
        ) -> ChatReply:
            conversation, turn, attempts = self._prepare(value)

            def attempt(sent: Messages) -> Reply:
                child = patch_config(config, callbacks=run_manager.get_child())
                output = self.runnable.invoke(conversation.next_input(attempts, sent), child)
                reply = reply_of(output)
                attempts.add(reply.text, output)
                return reply

            return delivered(attempts, blocking(lambda: self.verifier.run_sync(attempt, turn)))

        return self._call_with_config(verified, input, config, **kwargs)

    async def ainvoke(
        self, input: LanguageModelInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> ChatReply:
        """``invoke`` on the running event loop."""

        async def verified(
            value: LanguageModelInput,
            run_manager: AsyncCallbackManagerForChainRun,
            config: RunnableConfig,
        ) -> ChatReply:
            conversation, turn, attempts = self._prepare(value)

            async def attempt(sent: Messages) -> Reply:
                child = patch_config(config, callbacks=run_manager.get_child())
                next_input = conversation.next_input(attempts, sent)
                output = await self.runnable.ainvoke(next_input, child)
                reply = reply_of(output)
                attempts.add(reply.text, output)
                return reply

            return delivered(attempts, await self.verifier.run(attempt, turn))

        return await self._acall_with_config(verified, input, config, **kwargs)

    async def astream(  # type: ignore[override]  # the chunks, and a Retract between attempts
        self, input: LanguageModelInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[ChatReply | Retract]:
        """Stream a verified turn: the runnable's own chunks of the text the user may see, a
        ``Retract`` when the text shown so far is withdrawn, and (for a message stream) a last
        empty chunk carrying the ``Outcome``. Each attempt is the runnable's ``astream``; a
        retry's input is the input, the replies the user was not shown and the feedback.
        Stopping early closes the runnable's stream and any judge call in flight. It shows in
        callbacks as one chain run, with each attempt as a child run."""

        async def one() -> AsyncIterator[LanguageModelInput]:
            yield input

        chunks = self._atransform_stream_with_config(
            one(), cast(Any, self._verified_stream), config, **kwargs
        )
        async with aclosing(chunks) as items:  # type: ignore[type-var]  # an async generator
            async for item in items:
                yield item

    async def _verified_stream(
        self,
        inputs: AsyncIterator[LanguageModelInput],
        run_manager: AsyncCallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> AsyncIterator[ChatReply | Retract]:
        messages = [message async for value in inputs for message in as_messages(value)]
        turn = turn_of(messages, self._fields)
        attempts: Attempts[ChatReply] = Attempts()
        strings = False  # the runnable streams str (a chain ending in StrOutputParser)
        calls = 0

        async def attempt(sent: Messages) -> AsyncIterator[str | RunMeta]:
            nonlocal calls, strings
            calls += 1
            next_input = list(messages)
            if calls > 1:
                next_input += chat_messages(retry_conversation(turn, sent))
            child = patch_config(config, callbacks=run_manager.get_child())
            gathered: Any = None
            async with aclosing(self.runnable.astream(next_input, child)) as chunks:  # type: ignore[type-var]
                async for chunk in chunks:
                    strings = isinstance(chunk, str)
                    gathered = chunk if gathered is None else gathered + chunk
                    text = chunk if isinstance(chunk, str) else str(chunk.text)
                    if text:
                        yield text
            if gathered is not None:
                reply = reply_of(gathered)
                attempts.add(reply.text, gathered)
                yield reply.meta

        async with aclosing(stream_turn(self.verifier, attempt, turn)) as events:
            async for event in events:
                if isinstance(event, Delta):
                    yield event.text if strings else AIMessageChunk(content=event.text)
                elif isinstance(event, Retract):
                    yield event
                elif not strings:
                    yield with_outcome(AIMessageChunk(content=""), event.outcome)
