"""What each kind of streamed item adds to an attempt (``Collected.text_of``): the kind of an
item is decided once per class, as ``isinstance`` decides it, and chunks are read where their
fields are kept (a litellm chunk's extras, an OpenAI chunk's fields, a dict's keys)."""

from __future__ import annotations

from unittest import mock

import pytest
from litellm.types.utils import ModelResponseStream

from replyguard import Reply, RunMeta
from replyguard.runner._stream_source import Collected


class Text(str):
    pass


class Meta(RunMeta):
    pass


def test_a_str_subclass_is_text_and_comes_out_a_plain_str() -> None:
    piece = Collected().text_of(Text("abc"))
    assert piece == "abc"
    assert type(piece) is str


def test_run_meta_reply_and_their_subclasses_are_metadata_not_text() -> None:
    collected = Collected()
    assert collected.text_of(Meta(stop_reason="length")) == ""
    assert collected.reply().meta.stop_reason == "length"
    assert collected.text_of(Reply(text="whole", meta=RunMeta(stop_reason="stop"))) == "whole"
    collected.add("whole")
    assert collected.text_of(Reply(text="again")) == ""  # text already came: metadata only


def test_an_object_posing_as_run_meta_is_taken_as_isinstance_takes_it() -> None:
    posing = mock.MagicMock(spec=RunMeta)
    collected = Collected()
    assert collected.text_of(posing) == ""
    assert collected._given is posing


@pytest.mark.parametrize(
    "chunk",
    [
        ModelResponseStream(choices=[{"index": 0, "delta": {"content": "hi"}}]),
        {"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": None}]},
    ],
    ids=["litellm", "dict"],
)
def test_a_chunk_gives_its_content(chunk: object) -> None:
    assert Collected().text_of(chunk) == "hi"


def test_a_litellm_chunk_with_tool_calls_and_a_finish_reason_is_noted() -> None:
    chunk = ModelResponseStream(
        choices=[
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "delta": {
                    "content": None,
                    "tool_calls": [
                        {"index": 0, "id": "c1", "type": "function", "function": {"name": "f"}}
                    ],
                },
            }
        ]
    )
    collected = Collected()
    assert collected.text_of(chunk) == ""
    assert collected.asks_tools
    assert collected.reply().meta.stop_reason == "tool_calls"


def test_something_else_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match="yielded int"):
        Collected().text_of(42)
