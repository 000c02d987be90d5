"""The private copy of the messages an agent gets: its edits never reach the caller."""

from __future__ import annotations

import copy
from typing import Any

from replyguard.runner._agents import copy_messages

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
