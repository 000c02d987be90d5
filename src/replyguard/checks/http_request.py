"""The HTTP request check: the reply is a request that an executor will send as it is.

The reply (repaired like any JSON reply) must be an object with ``method`` and ``url`` and,
optionally, ``headers`` and ``body``; any other key fails. The check refuses what an executor
should not have to guess about:

- a method outside ``allowed_methods`` (compared case-insensitively);
- a URL that is not absolute, that holds whitespace, control or invisible characters or
  backslashes (URL parsers disagree about those), credentials (``user:pass@``) or a bad port,
  or whose scheme or host is outside the allow-lists. Hosts are compared lowercase with one
  trailing dot removed, as written (IDN hosts are not converted to or from punycode):
  ``*.example.com`` matches ``api.example.com`` but neither ``example.com`` nor
  ``evil-example.com``. IPv6 hosts are listed without brackets; no hosts allows any host;
- headers that are not string to string, with an invalid name or a control character in a
  value, or without a required header (names compared case-insensitively);
- a string body that is not JSON while ``Content-Type`` is JSON (``*/json`` or ``*+json``),
  ``NaN`` and ``Infinity`` included;
- a body on GET or HEAD: RFC 9110 gives it no meaning and servers and proxies may drop or
  refuse it, so the request would not do what the agent meant. A null or empty body is none.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import SplitResult, urlsplit

from replyguard.checks.base import CheckResult, failed, passed
from replyguard.checks.json_repair import (
    clip,
    decode_error,
    json_type,
    parse_json,
    problems_feedback,
    read_json,
)
from replyguard.types import FailCategory, Reply, Turn

_KEYS = ("method", "url", "headers", "body")
_LEAD = 'The reply must be a JSON object {"method", "url", "headers", "body"} for an HTTP request.'
_NO_BODY_METHODS = frozenset({"GET", "HEAD"})
_BAD_URL_CHARACTER = re.compile(
    r"[\s\\\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]"
)
_HOST_LABEL = re.compile(r"[\w-]{1,63}")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_HEADER_VALUE_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


class HttpRequestCheck:
    """The reply must be a well-formed HTTP request within the allow-lists."""

    def __init__(
        self,
        *,
        allowed_schemes: Sequence[str] = ("https",),
        allowed_hosts: Sequence[str] = (),
        allowed_methods: Sequence[str] = ("GET", "POST", "PUT", "PATCH", "DELETE"),
        required_headers: Sequence[str] = (),
        name: str = "http_request",
        required: bool = False,
        category: FailCategory = FailCategory.RULE_VIOLATION,
    ) -> None:
        self.name = name
        self.required = required
        self.category = category
        self.allowed_schemes = tuple(scheme.lower() for scheme in allowed_schemes)
        self.allowed_hosts = tuple(_host_pattern(host) for host in allowed_hosts)
        self.allowed_methods = tuple(method.upper() for method in allowed_methods)
        self.required_headers = tuple(required_headers)

    async def check(self, turn: Turn, reply: Reply) -> CheckResult:
        try:
            _, request = read_json(reply.text, dict)
        except ValueError as exc:
            return failed(self.name, self.category, f"{_LEAD} {exc}")
        if not isinstance(request, dict):
            return failed(self.name, self.category, f"{_LEAD} It is a JSON {json_type(request)}.")
        problems = [
            *_unknown_keys(request),
            *self._method_problems(request),
            *self._url_problems(request),
            *self._header_problems(request.get("headers")),
            *_body_problems(request),
        ]
        if problems:
            return failed(self.name, self.category, problems_feedback(_LEAD, problems))
        return passed(self.name, value=request)

    def _method_problems(self, request: Mapping[str, Any]) -> Iterator[str]:
        method = request.get("method")
        if not isinstance(method, str) or method.upper() not in self.allowed_methods:
            allowed = ", ".join(self.allowed_methods)
            yield f"Field method must be one of {allowed}, got {_shown(request, 'method')}."

    def _url_problems(self, request: Mapping[str, Any]) -> Iterator[str]:
        url = request.get("url")
        if not isinstance(url, str):
            yield f"Field url must be a string, got {_shown(request, 'url')}."
            return
        if _BAD_URL_CHARACTER.search(url):
            yield "Field url must not contain whitespace, control characters or backslashes."
            return
        try:
            parts = urlsplit(url)
            host, port = parts.hostname, parts.port
        except ValueError as exc:
            yield f"Field url is not a well-formed URL ({clip(str(exc), 60)})."
            return
        if not parts.scheme or not host:
            yield "Field url must be an absolute URL with a scheme and a host."
        elif "@" in parts.netloc:
            yield "Field url must not contain credentials (user@ or user:password@)."
        elif port == 0 or not _valid_host(parts, host):
            yield "Field url has an invalid host or port."
        else:
            yield from self._allow_list_problems(parts.scheme, host.removesuffix("."))

    def _allow_list_problems(self, scheme: str, host: str) -> Iterator[str]:
        if scheme not in self.allowed_schemes:
            allowed = ", ".join(self.allowed_schemes)
            yield f"Field url must use the scheme {allowed}, not {clip(scheme)!r}."
        if self.allowed_hosts and not any(_host_matches(host, p) for p in self.allowed_hosts):
            allowed = clip(", ".join(self.allowed_hosts), 200)
            yield f"Field url must use one of the allowed hosts {allowed}, not {clip(host)!r}."

    def _header_problems(self, headers: Any) -> Iterator[str]:
        if headers is None:
            headers = {}
        if not isinstance(headers, dict):
            yield f"Field headers must be an object of names to strings, got {json_type(headers)}."
            return
        for header, value in headers.items():
            if not _HEADER_NAME.fullmatch(header):
                yield f"Header name {clip(header)!r} is not a valid HTTP header name."
            elif not isinstance(value, str):
                yield f"Header {header} must have a string value, got {json_type(value)}."
            elif _HEADER_VALUE_CONTROL.search(value):
                yield f"Header {header} must not contain line breaks or control characters."
        present = {header.lower() for header in headers}
        missing = [header for header in self.required_headers if header.lower() not in present]
        if missing:
            yield f"Headers required but missing: {', '.join(missing)}."


def _host_pattern(pattern: str) -> str:
    """An allowed host, normalised: lowercase, no trailing dot, ``*.`` only as a prefix."""
    normalised = pattern.strip().lower().removesuffix(".")
    if not normalised or "*" in normalised.removeprefix("*."):
        raise ValueError(f"invalid allowed host {pattern!r}: use a host or *.domain")
    return normalised


def _host_matches(host: str, pattern: str) -> bool:
    if pattern.startswith("*."):
        return host.endswith(pattern[1:])  # ".example.com": a subdomain, not the domain itself
    return host == pattern


def _valid_host(parts: SplitResult, host: str) -> bool:
    if parts.netloc.startswith("["):  # an IPv6 literal, already checked by urlsplit
        return True
    labels = host.removesuffix(".").split(".")
    return len(host) <= 253 and all(_HOST_LABEL.fullmatch(label) for label in labels)


def _unknown_keys(request: Mapping[str, Any]) -> Iterator[str]:
    unknown = [clip(key) for key in request if key not in _KEYS]
    if unknown:
        shown = ", ".join(unknown[:5])
        yield f"Remove the unknown fields {shown}; only {', '.join(_KEYS)} are allowed."


def _body_problems(request: Mapping[str, Any]) -> Iterator[str]:
    body, method = request.get("body"), request.get("method")
    if body is None or body == "":
        return
    if isinstance(method, str) and method.upper() in _NO_BODY_METHODS:
        yield f"A {method.upper()} request must not have a body; use POST or put it in the URL."
    elif isinstance(body, str) and _is_json_content(request.get("headers")):
        try:
            parse_json(body)
        except (ValueError, RecursionError) as exc:
            yield f"Field body must be JSON, as Content-Type says: {decode_error(exc)}."


def _is_json_content(headers: Any) -> bool:
    if not isinstance(headers, dict):
        return False
    for header, value in headers.items():
        if header.lower() == "content-type" and isinstance(value, str):
            media_type = value.split(";")[0].strip().lower()
            return media_type.endswith(("/json", "+json"))
    return False


def _shown(request: Mapping[str, Any], key: str) -> str:
    """What the agent gave for ``key``: a short quote of a string, else its JSON type."""
    if key not in request:
        return "nothing"
    value = request[key]
    return repr(clip(value)) if isinstance(value, str) else json_type(value)
