"""HttpRequestCheck: the reply is an HTTP request within the allow-lists."""

from __future__ import annotations

import json
from typing import Any

import pytest

from replyguard.checks.base import Check, CheckResult
from replyguard.checks.http_request import HttpRequestCheck
from replyguard.types import FailCategory, Reply, Turn

LEAD = 'The reply must be a JSON object {"method", "url", "headers", "body"} for an HTTP request.'


async def run(check: HttpRequestCheck, request: dict[str, Any] | str) -> CheckResult:
    text = request if isinstance(request, str) else json.dumps(request)
    return await check.check(Turn(user_message="call the API"), Reply(text=text))


async def feedback(check: HttpRequestCheck, request: dict[str, Any] | str) -> str | None:
    return (await run(check, request)).feedback


def get(url: str | None, **extra: Any) -> dict[str, Any]:
    return {"method": "GET", "url": url, **extra}


def test_http_request_check_is_a_check() -> None:
    assert isinstance(HttpRequestCheck(), Check)


@pytest.mark.parametrize(
    "request_",
    [
        get("https://api.example.com/v1/items?q=1#top"),
        {"method": "post", "url": "https://api.example.com", "body": {"a": [1]}},
        {"method": "PUT", "url": "https://api.example.com:8443/x", "body": "plain text"},
        {
            "method": "PATCH",
            "url": "https://API.Example.COM./x",
            "headers": {"Content-Type": "application/json; charset=utf-8"},
            "body": '{"a": 1}',
        },
        {"method": "DELETE", "url": "https://api.example.com/x", "headers": {}, "body": None},
        get("https://api.example.com/", body=""),
        get("https://api.example.com/", headers=None),
    ],
    ids=["get", "lowercase-method", "port-and-text", "json-body", "delete", "empty-body", "null"],
)
async def test_good_requests_pass(request_: dict[str, Any]) -> None:
    check = HttpRequestCheck(allowed_hosts=["*.example.com"])
    result = await run(check, request_)
    assert result.passed and result.value == request_


async def test_a_request_in_a_fence_after_prose_passes() -> None:
    text = 'Calling it now:\n```json\n{"method": "GET", "url": "https://example.com",}\n```'
    result = await run(HttpRequestCheck(), text)
    assert result.value == {"method": "GET", "url": "https://example.com"}


async def test_a_reply_without_json_is_told_so() -> None:
    assert await feedback(HttpRequestCheck(), "I will call the API.") == (
        f"{LEAD} It contains no JSON object or array."
    )


async def test_a_json_array_is_refused() -> None:
    assert await feedback(HttpRequestCheck(), "[1, 2]") == f"{LEAD} It is a JSON array."


async def test_unknown_keys_are_named() -> None:
    request = get("https://example.com", timeout=5, auth="x")
    assert await feedback(HttpRequestCheck(), request) == (
        f"{LEAD} Remove the unknown fields timeout, auth; "
        "only method, url, headers, body are allowed."
    )


@pytest.mark.parametrize(
    ("request_", "problem"),
    [
        ({"url": "https://example.com"}, "must be one of GET, POST, got nothing."),
        (
            get("https://example.com") | {"method": "TRACE"},
            "must be one of GET, POST, got 'TRACE'.",
        ),
        (get("https://example.com") | {"method": 7}, "must be one of GET, POST, got integer."),
    ],
    ids=["missing", "not-allowed", "not-a-string"],
)
async def test_methods_outside_the_allow_list_fail(request_: dict[str, Any], problem: str) -> None:
    check = HttpRequestCheck(allowed_methods=["get", "post"])
    assert await feedback(check, request_) == f"{LEAD} Field method {problem}"


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        (None, "Field url must be a string, got null."),
        ("example.com/path", "Field url must be an absolute URL with a scheme and a host."),
        ("https:example.com", "Field url must be an absolute URL with a scheme and a host."),
        (
            "https://exa mple.com",
            "Field url must not contain whitespace, control characters or backslashes.",
        ),
        (
            "https://example.com/\n",
            "Field url must not contain whitespace, control characters or backslashes.",
        ),
        (
            "https://example.com\u200b/",
            "Field url must not contain whitespace, control characters or backslashes.",
        ),
        (
            "https://example.com\\@evil.com",
            "Field url must not contain whitespace, control characters or backslashes.",
        ),
        (
            "https://user@example.com",
            "Field url must not contain credentials (user@ or user:password@).",
        ),
        (
            "https://u:p@example.com",
            "Field url must not contain credentials (user@ or user:password@).",
        ),
        (
            "https://example.com:99999/",
            "Field url is not a well-formed URL (Port out of range 0-65535).",
        ),
        ("https://example.com:0/", "Field url has an invalid host or port."),
        ("https://[::1/", "Field url is not a well-formed URL (Invalid IPv6 URL)."),
        ("https://exa..mple.com/", "Field url has an invalid host or port."),
        ("https://ex%61mple.com/", "Field url has an invalid host or port."),
        ("http://example.com", "Field url must use the scheme https, not 'http'."),
        ("ftp://example.com", "Field url must use the scheme https, not 'ftp'."),
    ],
)
async def test_malformed_or_disallowed_urls_fail(url: str | None, problem: str) -> None:
    assert await feedback(HttpRequestCheck(), get(url)) == f"{LEAD} {problem}"


async def test_a_non_numeric_port_fails() -> None:
    result = await feedback(HttpRequestCheck(), get("https://example.com:abc/"))
    assert result is not None and "Field url is not a well-formed URL (Port" in result


@pytest.mark.parametrize(
    ("url", "allowed"), [("https://[::1]:8443/x", True), ("https://[::2]/", False)]
)
async def test_an_ipv6_literal_host_is_compared_without_brackets(url: str, allowed: bool) -> None:
    assert (await run(HttpRequestCheck(allowed_hosts=["::1"]), get(url))).passed is allowed


async def test_allowed_schemes_are_compared_case_insensitively() -> None:
    assert (await run(HttpRequestCheck(allowed_schemes=["HTTP"]), get("HTTP://example.com"))).passed


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("https://example.com/x", True),
        ("https://EXAMPLE.com/x", True),
        ("https://example.com./x", True),
        ("https://api.example.com/x", False),
        ("https://example.com.evil.com/x", False),
        ("https://evil.com#@example.com", False),
        ("https://evil.com?@example.com", False),
        ("https://evil-example.com/", False),
        ("https://xn--exmple-cua.com/", False),
    ],
)
async def test_exact_allowed_hosts(url: str, allowed: bool) -> None:
    check = HttpRequestCheck(allowed_hosts=["Example.com."])
    assert (await run(check, get(url))).passed is allowed


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("https://api.example.com/", True),
        ("https://a.b.example.com/", True),
        ("https://API.EXAMPLE.COM./", True),
        ("https://example.com/", False),
        ("https://evil-example.com/", False),
        ("https://api.example.com.evil.com/", False),
        ("https://evil.com/.example.com", False),
    ],
)
async def test_wildcard_hosts_match_subdomains_only(url: str, allowed: bool) -> None:
    check = HttpRequestCheck(allowed_hosts=["*.example.com"])
    assert (await run(check, get(url))).passed is allowed


async def test_a_disallowed_host_is_named_with_the_allowed_ones() -> None:
    check = HttpRequestCheck(allowed_hosts=["example.com", "*.example.org"])
    assert await feedback(check, get("https://evil.com/")) == (
        f"{LEAD} Field url must use one of the allowed hosts example.com, *.example.org, "
        "not 'evil.com'."
    )


async def test_no_allowed_hosts_allows_any_host() -> None:
    assert (await run(HttpRequestCheck(), get("https://anything.test/"))).passed


@pytest.mark.parametrize("pattern", ["", "*", "*example.com", "api.*.example.com"])
def test_an_invalid_allowed_host_is_refused_at_construction(pattern: str) -> None:
    with pytest.raises(ValueError, match="invalid allowed host"):
        HttpRequestCheck(allowed_hosts=[pattern])


@pytest.mark.parametrize(
    ("headers", "problem"),
    [
        ([["Accept", "x"]], "Field headers must be an object of names to strings, got array."),
        ({"Accept": 1}, "Header Accept must have a string value, got integer."),
        ({"Bad Name": "x"}, "Header name 'Bad Name' is not a valid HTTP header name."),
        (
            {"X-A": "a\r\nX-Evil: 1"},
            "Header X-A must not contain line breaks or control characters.",
        ),
    ],
    ids=["not-an-object", "non-string-value", "bad-name", "injected-line"],
)
async def test_bad_headers_fail(headers: Any, problem: str) -> None:
    assert await feedback(HttpRequestCheck(), get("https://x.test", headers=headers)) == (
        f"{LEAD} {problem}"
    )


async def test_required_headers_match_case_insensitively() -> None:
    check = HttpRequestCheck(required_headers=["Authorization", "x-request-id"])
    request = get("https://x.test", headers={"authorization": "t", "X-Request-ID": "1"})
    assert (await run(check, request)).passed


async def test_missing_required_headers_are_named() -> None:
    check = HttpRequestCheck(required_headers=["Authorization", "X-Request-Id"])
    request = get("https://x.test", headers={"X-Request-Id": "1"})
    assert await feedback(check, request) == f"{LEAD} Headers required but missing: Authorization."


@pytest.mark.parametrize(
    ("content_type", "body", "ok"),
    [
        ("application/json", '{"a": 1}', True),
        ("application/json", "{'a': 1}", False),
        ("application/vnd.api+json", "[1,", False),
        ("text/plain", "{'a': 1}", True),
        ("application/json", {"a": 1}, True),
    ],
    ids=["json-string", "not-json", "plus-json", "not-json-type", "object-body"],
)
async def test_a_string_body_must_be_json_when_the_content_type_says_so(
    content_type: str, body: Any, ok: bool
) -> None:
    request = {
        "method": "POST",
        "url": "https://x.test",
        "headers": {"content-type": content_type},
        "body": body,
    }
    assert (await run(HttpRequestCheck(), request)).passed is ok


async def test_an_invalid_json_body_feedback_names_the_parse_error() -> None:
    request = {
        "method": "POST",
        "url": "https://x.test",
        "headers": {"Content-Type": "application/json"},
    }
    assert await feedback(HttpRequestCheck(), request | {"body": '{"a" 1}'}) == (
        f"{LEAD} Field body must be JSON, as Content-Type says: "
        "Expecting ':' delimiter at line 1 column 6."
    )


async def test_a_json_body_holding_nan_is_not_json() -> None:
    request = {
        "method": "POST",
        "url": "https://x.test",
        "headers": {"Content-Type": "application/json"},
        "body": '{"score": NaN}',
    }
    assert await feedback(HttpRequestCheck(), request) == (
        f"{LEAD} Field body must be JSON, as Content-Type says: "
        "NaN is not allowed in JSON; use a number or null."
    )


async def test_a_request_holding_infinity_is_not_json() -> None:
    text = '{"method": "POST", "url": "https://x.test", "body": {"limit": Infinity}}'
    assert not (await run(HttpRequestCheck(), text)).passed


@pytest.mark.parametrize("method", ["GET", "get", "HEAD"])
async def test_a_body_on_get_or_head_fails(method: str) -> None:
    check = HttpRequestCheck(allowed_methods=["GET", "HEAD"])
    request = {"method": method, "url": "https://x.test", "body": {"q": 1}}
    assert await feedback(check, request) == (
        f"{LEAD} A {method.upper()} request must not have a body; use POST or put it in the URL."
    )


async def test_every_problem_is_listed() -> None:
    request = {"method": "TRACE", "url": "http://x.test", "extra": 1}
    assert await feedback(HttpRequestCheck(allowed_methods=["GET"]), request) == (
        f"{LEAD}\n"
        "- Remove the unknown fields extra; only method, url, headers, body are allowed.\n"
        "- Field method must be one of GET, got 'TRACE'.\n"
        "- Field url must use the scheme https, not 'http'."
    )


async def test_failures_carry_the_configured_name_and_category() -> None:
    check = HttpRequestCheck(name="api", category=FailCategory.INCOMPLETE)
    result = await run(check, "nope")
    assert (result.name, result.passed, result.category) == ("api", False, FailCategory.INCOMPLETE)


async def test_feedback_clips_long_values_from_the_reply() -> None:
    result = await feedback(HttpRequestCheck(), get("https://x.test") | {"method": "X" * 500})
    assert result is not None and "X" * 30 not in result
