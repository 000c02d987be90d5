"""The sections' own renderings are what the general path renders: a dict of strings is the
text ``json.dumps`` makes of it."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from replyguard.context._sections import _text

# Any code point, lone surrogates, quotes, backslashes and control characters included.
ANY_TEXT = st.text(st.characters(blacklist_categories=()), max_size=12)
VALUES = st.one_of(
    ANY_TEXT,
    st.integers(),
    st.floats(),
    st.booleans(),
    st.none(),
    st.lists(ANY_TEXT, max_size=2),
)


@given(st.dictionaries(ANY_TEXT, ANY_TEXT, max_size=6))
def test_a_dict_of_strings_reads_as_its_json(value: dict[str, str]) -> None:
    assert _text(value) == json.dumps(value, default=str, ensure_ascii=False)


@given(st.dictionaries(st.one_of(ANY_TEXT, st.integers()), VALUES, max_size=6))
def test_any_flat_dict_reads_as_its_json(value: dict[Any, Any]) -> None:
    assert _text(value) == json.dumps(value, default=str, ensure_ascii=False)


def test_a_string_subclass_is_left_to_json() -> None:
    class Name(str):
        pass

    value = {Name("q"): Name("report")}
    assert _text(value) == json.dumps(value, default=str, ensure_ascii=False)
