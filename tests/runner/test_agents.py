"""The private copy of the messages an agent gets: its edits never reach the caller."""

from __future__ import annotations

import copy
from typing import Any

from replyguard import Status, Turn, Verifier, VerifierConfig
from replyguard.runner._agents import call_agent, copy_messages
from replyguard.testing import ScriptedJudge

FLAT = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi", "name": None},
]
NESTED = [
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is in this picture?"},
            {"type": "image_url", "image_url": {"url": "https://example.test/a.png"}},
        ],
    },
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "function": {"name": "look", "arguments": "{}"}}],
    },
]


def test_a_copy_equals_the_messages_without_sharing_any_of_them() -> None:
    messages = [*FLAT, *NESTED]
    copied = copy_messages(messages)
    assert copied == messages
    assert all(a is not b for a, b in zip(copied, messages, strict=True))


def test_editing_flat_messages_leaves_the_originals_alone() -> None:
    messages = copy.deepcopy(FLAT)
    copied = copy_messages(messages)
    copied[0]["content"] = "edited"
    copied[1]["extra"] = True
    copied.append({"role": "assistant", "content": "scratch"})
    assert messages == FLAT


def test_editing_nested_content_parts_leaves_the_originals_alone() -> None:
    messages: list[dict[str, Any]] = copy.deepcopy(NESTED)
    copied = copy_messages(messages)
    copied[0]["content"][0]["text"] = "edited"
    copied[0]["content"][1]["image_url"]["url"] = "https://example.test/b.png"
    copied[0]["content"].append({"type": "text", "text": "appended"})
    copied[1]["tool_calls"][0]["function"]["arguments"] = '{"x": 1}'
    copied[1]["tool_calls"].clear()
    assert messages == NESTED


def test_a_message_of_a_dict_subclass_is_copied_deeply_too() -> None:
    class Message(dict[str, Any]):
        pass

    original = Message(role="user", content=[{"type": "text", "text": "Hi"}])
    [copied] = copy_messages([original])
    copied["content"][0]["text"] = "edited"
    assert original["content"][0]["text"] == "Hi"
    assert type(copied) is dict


def nested(depth: int) -> list[Any]:
    """A list nested ``depth`` deep: past the interpreter's recursion limit."""
    root: list[Any] = []
    inner = root
    for _ in range(depth):
        inner.append([])
        inner = inner[0]
    return root


def test_messages_nested_past_the_recursion_limit_or_cyclic_are_copied() -> None:
    cyclic: dict[str, Any] = {"role": "tool", "content": "ok"}
    cyclic["self"] = cyclic
    deep = nested(5000)
    messages = [{"role": "user", "content": deep}, cyclic]
    copied = copy_messages(messages)
    assert copied[0]["content"] is not deep and copied[1] is not cyclic
    assert copied[1]["self"] is copied[1]  # the cycle is copied as a cycle
    depth, inner = 0, copied[0]["content"]
    while inner:
        assert inner is not deep
        depth, inner = depth + 1, inner[0]
    assert depth == 5000
    copied[0]["content"].append("edited")
    assert len(deep) == 1  # the caller's structure is untouched


async def test_a_turn_with_history_nested_past_the_recursion_limit_is_verified() -> None:
    """It raised RecursionError out of ``run`` before the agent was called (copying the
    messages), or before a hook ran (copying the turn for it)."""
    seen: list[int] = []
    verifier = Verifier(
        VerifierConfig(enabled=True, verify_all=True, agent_model="openai/gpt-4o"),
        judge=ScriptedJudge(["PASS"]),
        on_verdict=lambda turn, attempt: seen.append(len(turn.history)),
    )
    turn = Turn(user_message="q", history=[{"role": "user", "content": nested(5000)}])
    outcome = await verifier.run(lambda messages: "Done: the report.", turn)
    await verifier.aclose()
    assert (outcome.status, outcome.response) == (Status.PASSED, "Done: the report.")
    assert seen == [1]


async def test_a_hook_runs_on_a_turn_holding_a_value_deepcopy_cannot_copy() -> None:
    """A lock in the turn's metadata (a careless host's): the hook's copy of the turn raised
    out of ``run``; it now shares the value, and the hook runs."""
    import threading

    held = threading.Lock()
    seen: list[object] = []
    verifier = Verifier(
        VerifierConfig(enabled=True, verify_all=True, agent_model="openai/gpt-4o"),
        judge=ScriptedJudge(["PASS"]),
        on_verdict=lambda turn, attempt: seen.append(turn.metadata["lock"]),
    )
    turn = Turn(user_message="q", metadata={"lock": held})
    outcome = await verifier.run(lambda messages: "Done: the report.", turn)
    await verifier.aclose()
    assert outcome.status == Status.PASSED
    assert seen == [held]


def test_values_other_than_dicts_and_lists_are_kept_as_they_are() -> None:
    class Parts(list[Any]):
        pass

    marker, pair = object(), ({"kept": "as is"},)
    original = {"role": "user", "content": Parts([{"type": "text"}]), "m": marker, "t": pair}
    [copied] = copy_messages([original])
    assert copied["m"] is marker and copied["t"] is pair  # not copied: not a dict or a list
    assert type(copied["content"]) is list and copied["content"] == [{"type": "text"}]
    assert copied["content"][0] is not original["content"][0]


async def test_every_kind_of_agent_gets_its_own_copy() -> None:
    seen: list[list[dict[str, Any]]] = []

    async def plain(messages: list[dict[str, Any]]) -> str:
        seen.append(messages)
        return "async"

    class Callable:
        async def __call__(self, messages: list[dict[str, Any]]) -> str:
            seen.append(messages)
            return "async call"

    def sync(messages: list[dict[str, Any]]) -> str:
        seen.append(messages)
        return "sync"

    messages = copy.deepcopy(NESTED)
    for agent, said in ((plain, "async"), (Callable(), "async call"), (sync, "sync")):
        assert (await call_agent(agent, messages)).text == said
        assert seen[-1] == messages and seen[-1] is not messages
        assert seen[-1][0]["content"] is not messages[0]["content"]
