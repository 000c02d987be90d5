"""repair_json and JsonCheck: free repair, shape, model, schema and field rules."""

from __future__ import annotations

import json
from typing import Any

import pydantic
import pytest

from replyguard.checks.base import Check, CheckResult
from replyguard.checks.json_check import JsonCheck
from replyguard.checks.json_repair import repair_json
from replyguard.config._checks import FieldRule
from replyguard.types import FailCategory, Reply, Turn

TEN_MB = 10 * 1024 * 1024


async def run(check: JsonCheck, text: str) -> CheckResult:
    return await check.check(Turn(user_message="give me JSON"), Reply(text=text))


# -- repair_json ---------------------------------------------------------------------------


def test_valid_json_is_returned_stripped() -> None:
    assert repair_json('  \n{"a": 1}\n ') == '{"a": 1}'


@pytest.mark.parametrize(
    "text",
    [
        '```json\n{"a": 1}\n```',
        '```\n{"a": 1}\n```',
        '~~~\n{"a": 1}\n~~~',
        '````json\n{"a": 1}\n````',
        'Here you go:\n```json\n{"a": 1}\n```\nAnything else?',
        '```json\n{"a": 1}',
        '{"a": 1}\n```',
    ],
    ids=["json", "bare", "tilde", "four-backticks", "with-prose", "unclosed", "closing-only"],
)
def test_markdown_fences_are_stripped(text: str) -> None:
    assert repair_json(text) == '{"a": 1}'


def test_a_fence_inside_a_string_value_does_not_end_the_block() -> None:
    inner = '{"code": "```python\\nprint(1)\\n```", "more": "~~~"}'
    assert repair_json(f"```json\n{inner}\n```") == inner


@pytest.mark.parametrize(
    "text",
    [
        'Here is the result:\n{"a": [1, 2]}\nLet me know!',
        'Here is {the} result: {"a": [1, 2]}',
        'Result (see [note]): {"a": [1, 2]} -- done {really}',
        'Unbalanced { preamble: {"a": [1, 2]}',
        'Stray ] and } first, then {"a": [1, 2]}',
    ],
    ids=["prose", "braces-in-preamble", "brackets-everywhere", "unbalanced", "stray-closers"],
)
def test_preamble_and_postamble_prose_are_dropped(text: str) -> None:
    assert repair_json(text) == '{"a": [1, 2]}'


def test_braces_and_commas_inside_strings_do_not_end_the_json() -> None:
    assert repair_json('Sure: {"a": "x}, ]{[", "b": 2} ok') == '{"a": "x}, ]{[", "b": 2}'


def test_escaped_quotes_and_backslashes_inside_strings_are_respected() -> None:
    text = r'Out: {"a": "say \"}\" now", "b": "C:\\", "c": "\\\"}"} end'
    assert repair_json(text) == r'{"a": "say \"}\" now", "b": "C:\\", "c": "\\\"}"}'


@pytest.mark.parametrize(
    ("text", "repaired"),
    [
        ('{"a": [1, 2,],}', '{"a": [1, 2]}'),
        ('[{"a": 1,}, [2, [3,],],]', '[{"a": 1}, [2, [3]]]'),
        ('{"a": 1 ,\n}', '{"a": 1 \n}'),
        ('Done: {"a": {"b": [],},} !', '{"a": {"b": []}}'),
    ],
    ids=["object-and-array", "nested", "keeps-whitespace", "with-prose"],
)
def test_trailing_commas_outside_strings_are_removed(text: str, repaired: str) -> None:
    assert repair_json(text) == repaired


def test_commas_inside_strings_survive_trailing_comma_removal() -> None:
    repaired = repair_json('{"a": "a,]", "b": "x,}", "c": [1,],}')
    assert repaired is not None and json.loads(repaired) == {"a": "a,]", "b": "x,}", "c": [1]}


def test_repair_never_changes_string_values() -> None:
    value = {
        "code": '```json\n{"x": [1,],}\n```',
        "path": "C:\\dir\\",
        "quote": 'he said "}" and ",]"',
        "unicode": "Zoë 日本 🎉 \u2028",
        "list": ["a,", "]", "{"],
    }
    messy = "Sure! Here it is:\n```json\n" + json.dumps(value, indent=2)[:-1] + ",\n}\n```\nBye"
    repaired = repair_json(messy)
    assert repaired is not None and json.loads(repaired) == value


def test_repair_returns_the_exact_substring_rather_than_reserialising() -> None:
    assert repair_json('Here:  {  "a" :1,"b":[ 2 ]}  thanks') == '{  "a" :1,"b":[ 2 ]}'


@pytest.mark.parametrize(
    "text",
    ['{"a": [1, 2', '{"a": "unterminated', "[1, 2", '{"a": 1', '```json\n{"a": [1\n```'],
)
def test_truncated_json_is_not_recovered(text: str) -> None:
    assert repair_json(text) is None


@pytest.mark.parametrize(
    "text",
    [
        'Here: {"a": {"b": 1}',
        '{"a": {"b": 1}, "c": tr',
        '{"a": [{"b": 1}], "c": -',
        '{"a": {"b": 1}, "c": "cut {short}',
        '```json\n{"a": {"b": 1}\n```',
        'Note {see below}: {"a": {"b": 1}',
    ],
)
def test_a_complete_part_of_truncated_json_is_not_taken_for_the_answer(text: str) -> None:
    assert repair_json(text) is None


@pytest.mark.parametrize(
    ("text", "repaired"),
    [
        ('Note [1]: see below.\n{"ok": true}', '{"ok": true}'),
        ('See [1] and [2] for the format.\n\n{"ok": true}\nThanks.', '{"ok": true}'),
        ('As in [1]. The answer: {"ok": true}', '{"ok": true}'),
        ('Note [1]: see below.\n[{"ok": true}]', '[{"ok": true}]'),
        ("Totals [1, 2] are in the table.", "[1, 2]"),  # nothing else: the first span
    ],
    ids=["footnote-line", "two-footnotes", "footnote-same-line", "array-answer", "only-inline"],
)
def test_a_footnote_marker_in_prose_yields_to_the_json_that_ends_its_line(
    text: str, repaired: str
) -> None:
    assert repair_json(text) == repaired


@pytest.mark.parametrize(
    "text",
    [
        'See [1]. {"a": [1, 2',
        'Input: {"x": 1}. Output: {"result": [1, 2',
        'Run [1]:\n```bash\nls\n```\nOutput: {"result": [1, 2',
    ],
    ids=["citation", "example", "across-a-code-fence"],
)
def test_a_span_before_json_cut_short_is_not_taken_for_the_answer(text: str) -> None:
    assert repair_json(text) is None


@pytest.mark.parametrize(
    "text",
    [
        'Call:\n```bash\ncurl -d \'{"name": "test"}\' https://api/x\n```\nIt returns:\n'
        '```json\n{"id": 42}\n```',
        '```python\nprint([1, 2])\n```\n```json\n{"id": 42}\n```',
        '```sh\necho \'{"a": 1}\'\n```\nResult: {"id": 42}',
        '```JSON\n{"id": 42}\n```',
        '```jsonc\n{"id": 42,}\n```',
    ],
    ids=["curl-then-json", "python-then-json", "shell-then-prose", "upper-case", "jsonc"],
)
def test_json_comes_from_json_fences_not_from_code_in_other_languages(text: str) -> None:
    assert json.loads(repair_json(text) or "null") == {"id": 42}


@pytest.mark.parametrize(
    "text",
    ['```bash\ncurl -d \'{"name": "test"}\' https://api/x\n```', "```python\nprint([1, 2])\n```"],
    ids=["curl", "python"],
)
def test_a_fence_in_another_language_alone_holds_no_json(text: str) -> None:
    assert repair_json(text) is None


@pytest.mark.parametrize(
    "text",
    ['{"score": NaN}', "[Infinity]", '{"a": -Infinity}', 'Here: {"a": [NaN]}'],
)
def test_nan_and_infinity_are_not_json(text: str) -> None:
    assert repair_json(text) is None


@pytest.mark.parametrize("text", ["", "just prose", "{not json}", "[a, b]", "} {"])
def test_text_without_json_gives_none(text: str) -> None:
    assert repair_json(text) is None


def test_a_valid_inner_object_of_broken_json_is_not_taken_for_the_answer() -> None:
    assert repair_json('{"a": {"b": 1}, oops}') is None


def test_unicode_json_after_prose_is_recovered() -> None:
    assert repair_json('Voilà 🎉 : {"nom": "Zoë", "日本": "✓"}') == '{"nom": "Zoë", "日本": "✓"}'


def test_a_ten_megabyte_valid_reply_is_returned() -> None:
    text = json.dumps({"data": "x" * TEN_MB})
    assert repair_json(text) == text


@pytest.mark.parametrize(
    "text",
    ["garbage " * (TEN_MB // 8), "{[" * (TEN_MB // 2), '{"a": "' + "\\n" * (TEN_MB // 2)],
    ids=["prose", "brackets", "unterminated-string"],
)
def test_a_ten_megabyte_garbage_reply_gives_none(text: str) -> None:
    assert repair_json(text) is None


def test_a_large_reply_within_the_limit_is_scanned() -> None:
    assert repair_json("prose, " * 250_000 + '{"a": [1,]} bye') == '{"a": [1]}'


@pytest.mark.parametrize(
    "text",
    ["{" * 1_000_000 + '{"a": 1}', '{"{' * 600_000 + " [1]", "[" * 100_000 + "]" * 100_000],
    ids=["unclosed-braces", "quotes-and-braces", "nested-too-deep"],
)
def test_large_hostile_replies_within_the_limit_give_none(text: str) -> None:
    assert repair_json(text) is None


def test_beyond_max_chars_prose_is_not_scanned() -> None:
    assert repair_json('Here: {"a": 1}', max_chars=5) is None


def test_beyond_max_chars_fences_are_still_stripped() -> None:
    assert repair_json('```json\n{"a": 1}\n```', max_chars=5) == '{"a": 1}'


@pytest.mark.parametrize(("spans", "repaired"), [(10, '{"a": 1}'), (100, None)])
def test_the_number_of_bracket_scans_is_bounded(spans: int, repaired: str | None) -> None:
    assert repair_json("{x} " * spans + '{"a": 1}') == repaired


# -- JsonCheck: shape and parse errors -----------------------------------------------------


def test_json_check_is_a_check() -> None:
    assert isinstance(JsonCheck(), Check)


@pytest.mark.parametrize(
    ("expect", "text", "ok"),
    [
        ("object", '{"a": 1}', True),
        ("object", "[1]", False),
        ("object", '"text"', False),
        ("array", "[1]", True),
        ("array", '{"a": 1}', False),
        ("any", "[1]", True),
        ("any", '{"a": 1}', True),
        ("any", "42", True),
    ],
)
async def test_expect_sets_the_top_level_shape(expect: Any, text: str, ok: bool) -> None:
    assert (await run(JsonCheck(expect=expect), text)).passed is ok


async def test_expect_object_looks_past_an_array_in_the_prose() -> None:
    result = await run(JsonCheck(expect="object"), 'Step [1] is done. Result: {"a": 1}')
    assert result.passed and result.value == {"a": 1}


async def test_a_passing_reply_carries_the_parsed_value() -> None:
    assert (await run(JsonCheck(), 'ok: {"a": [1, "x"]}')).value == {"a": [1, "x"]}


async def test_invalid_json_feedback_names_the_parse_error() -> None:
    result = await run(JsonCheck(expect="object", name="out"), '{\n  "a": 1\n    "b": 2\n}')
    assert (result.name, result.passed, result.category, result.feedback) == (
        "out",
        False,
        FailCategory.RULE_VIOLATION,
        "The reply must be a JSON object. It is not valid JSON: "
        "Expecting ',' delimiter at line 3 column 5.",
    )


async def test_parse_error_positions_count_the_prose_before_the_json() -> None:
    result = await run(JsonCheck(), 'Here:\n{"a": 1\n "b": 2}')
    assert result.feedback is not None and result.feedback.endswith("line 3 column 2.")


async def test_a_reply_without_json_is_told_so() -> None:
    result = await run(JsonCheck(expect="array"), "I could not find anything.")
    assert result.feedback == "The reply must be a JSON array. It contains no JSON object or array."


async def test_wrong_shape_feedback_names_the_shape_found() -> None:
    result = await run(JsonCheck(expect="object"), "[1, 2]")
    assert result.feedback == "The reply must be a JSON object, not an array."


async def test_the_category_of_failures_is_configurable() -> None:
    result = await run(JsonCheck(category=FailCategory.INCOMPLETE), "nope")
    assert result.category is FailCategory.INCOMPLETE


async def test_feedback_does_not_echo_a_long_reply() -> None:
    result = await run(JsonCheck(), "x" * 5000 + '{"a": ')
    assert result.feedback is not None and len(result.feedback) < 200


# -- JsonCheck: deliver_repaired -----------------------------------------------------------


@pytest.mark.parametrize(
    ("deliver_repaired", "text", "delivered"),
    [
        (True, 'Sure: {"a": 1,}', '{"a": 1}'),
        (False, 'Sure: {"a": 1,}', None),
        (True, '{"a": 1}', None),
    ],
    ids=["on", "off", "nothing-to-repair"],
)
async def test_deliver_repaired_delivers_the_repaired_text(
    deliver_repaired: bool, text: str, delivered: str | None
) -> None:
    result = await run(JsonCheck(deliver_repaired=deliver_repaired), text)
    assert result.passed and result.deliver_text == delivered


# -- JsonCheck: pydantic model -------------------------------------------------------------


class Item(pydantic.BaseModel):
    name: str
    price: float


class Order(pydantic.BaseModel):
    items: list[Item]


async def test_a_model_turns_the_value_into_an_instance() -> None:
    result = await run(JsonCheck(model=Order), '{"items": [{"name": "tea", "price": 2.5}]}')
    assert result.passed and result.value == Order(items=[Item(name="tea", price=2.5)])


async def test_model_errors_name_the_field_path() -> None:
    result = await run(JsonCheck(model=Order), '{"items": [{"name": "tea", "price": "cheap"}]}')
    assert result.feedback is not None and result.feedback.startswith(
        "Fix the JSON: Field items.0.price: Input should be a valid number"
    )


# -- JsonCheck: JSON Schema ----------------------------------------------------------------

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "tags": {"type": "array", "maxItems": 2}},
    "required": ["name"],
}


async def test_a_schema_passes_a_conforming_value() -> None:
    assert (await run(JsonCheck(schema=SCHEMA), '{"name": "x", "tags": []}')).passed


async def test_schema_errors_name_their_json_path() -> None:
    result = await run(JsonCheck(schema=SCHEMA), '{"name": 5, "tags": [1, 2, 3]}')
    assert result.feedback == (
        "Fix the JSON:\n- Field name: 5 is not of type 'string'.\n"
        "- Field tags: [1, 2, 3] is too long."
    )


async def test_schema_errors_at_the_root_say_so() -> None:
    result = await run(JsonCheck(schema=SCHEMA), "{}")
    assert result.feedback == "Fix the JSON: The JSON value: 'name' is a required property."


async def test_at_most_ten_problems_are_listed() -> None:
    schema = {"type": "array", "items": {"type": "string"}}
    result = await run(JsonCheck(schema=schema), json.dumps(list(range(30))))
    assert result.feedback is not None
    assert result.feedback.count("\n- Field") == 10
    assert result.feedback.endswith("- (more problems not shown)")


async def test_schema_feedback_shortens_a_long_offending_value() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    result = await run(JsonCheck(schema=schema), json.dumps({"a": "y" * 1000}))
    assert result.feedback is not None and "y" * 25 not in result.feedback


@pytest.mark.parametrize(
    "schema", [{"type": "strnig"}, {"properties": {"a": {"minimum": "zero"}}}, {"required": 1}]
)
def test_an_invalid_schema_is_refused_at_construction(schema: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="invalid JSON Schema at"):
        JsonCheck(schema=schema)


# -- JsonCheck: field rules ----------------------------------------------------------------

DOC = {
    "name": "tea",
    "count": 3,
    "price": 2.5,
    "flag": True,
    "nothing": None,
    "tags": ["a", "b"],
    "items": [{"name": "cup", "price": "cheap"}],
}


@pytest.mark.parametrize(
    ("path", "rule", "problem"),
    [
        ("name", FieldRule(), None),
        ("missing", FieldRule(), "Field missing is missing."),
        ("missing", FieldRule(required=False, type="string"), None),
        ("items.0.name", FieldRule(type="string"), None),
        ("items.1.name", FieldRule(), "Field items.1.name is missing."),
        ("items.x", FieldRule(), "Field items.x is missing."),
        (
            "items.0.price",
            FieldRule(type="number"),
            "Field items.0.price must be a number, got string.",
        ),
        ("count", FieldRule(type="number"), None),
        ("count", FieldRule(type="integer"), None),
        ("price", FieldRule(type="integer"), "Field price must be an integer, got number."),
        ("flag", FieldRule(type="integer"), "Field flag must be an integer, got boolean."),
        ("flag", FieldRule(type="number"), "Field flag must be a number, got boolean."),
        ("nothing", FieldRule(type="null"), None),
        ("tags", FieldRule(type="object"), "Field tags must be an object, got array."),
        ("name", FieldRule(pattern="^t"), None),
        ("name", FieldRule(pattern="^x"), "Field name must match the pattern '^x'."),
        ("count", FieldRule(pattern="3"), "Field count must be a string, got integer."),
        ("count", FieldRule(minimum=1, maximum=3), None),
        ("count", FieldRule(minimum=4), "Field count must be at least 4, got 3."),
        ("price", FieldRule(maximum=2), "Field price must be at most 2, got 2.5."),
        ("name", FieldRule(minimum=0), "Field name must be a number, got string."),
        ("name", FieldRule(min_length=3, max_length=3), None),
        ("name", FieldRule(min_length=4), "Field name must have at least 4 characters, got 3."),
        ("tags", FieldRule(max_length=1), "Field tags must have at most 1 items, got 2."),
        (
            "count",
            FieldRule(min_length=1),
            "Field count must be a string or an array, got integer.",
        ),
        ("name", FieldRule(enum=["tea", "coffee"]), None),
        ("count", FieldRule(enum=[3.0]), None),
        ("flag", FieldRule(enum=[1]), "Field flag must be one of [1]."),
    ],
)
async def test_field_rules(path: str, rule: FieldRule, problem: str | None) -> None:
    result = await run(JsonCheck(fields={path: rule}), json.dumps(DOC))
    expected = None if problem is None else f"Fix the JSON: {problem}"
    assert result.feedback == expected


async def test_nan_fails_as_not_json_before_any_rule() -> None:
    result = await run(JsonCheck(fields={"a": FieldRule(minimum=0)}), '{"a": NaN}')
    assert result.feedback == (
        "The reply must be valid JSON. It is not valid JSON: "
        "NaN is not allowed in JSON; use a number or null."
    )


async def test_every_broken_field_rule_is_reported() -> None:
    rules = {"name": FieldRule(type="integer"), "count": FieldRule(maximum=1)}
    result = await run(JsonCheck(fields=rules), json.dumps(DOC))
    assert result.feedback == (
        "Fix the JSON:\n- Field name must be an integer, got string.\n"
        "- Field count must be at most 1, got 3."
    )


async def test_a_passing_callable_field_rule_passes() -> None:
    result = await run(
        JsonCheck(fields={"count": lambda v: (v > 0, "must be positive")}), '{"count": 2}'
    )
    assert result.passed


async def test_a_failing_callable_field_rule_gives_its_message() -> None:
    result = await run(
        JsonCheck(fields={"count": lambda v: (v > 5, "must exceed 5")}), '{"count": 2}'
    )
    assert result.feedback == "Fix the JSON: Field count: must exceed 5"


async def test_a_callable_field_rule_is_not_called_for_a_missing_field() -> None:
    def never(value: Any) -> tuple[bool, str]:
        raise AssertionError("called")

    result = await run(JsonCheck(fields={"count": never}), "{}")
    assert result.feedback == "Fix the JSON: Field count is missing."


async def test_a_callable_field_rule_that_raises_fails_the_reply() -> None:
    result = await run(JsonCheck(fields={"count": lambda v: (v > 0, "")}), '{"count": "two"}')
    assert result.feedback == "Fix the JSON: Field count could not be checked (TypeError)."


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\x00\x01 {",
        '{"a": ' * 50_000,
        "[" * 100_000 + "]" * 100_000,
        '{"a": ' + "9" * 5000 + "}",
        '```json\n{"a": 1\n```',
        '"' + "\\" * 1001,
        "{[" * (TEN_MB // 2),
    ],
    ids=[
        "empty",
        "control",
        "deep-open",
        "deep-closed",
        "huge-int",
        "broken-fence",
        "escapes",
        "ten-megabytes",
    ],
)
async def test_hostile_replies_fail_without_raising(text: str) -> None:
    check = JsonCheck(expect="object", schema=SCHEMA, fields={"a.b.0": FieldRule(type="string")})
    result = await run(check, text)
    assert result.passed is False and result.feedback
