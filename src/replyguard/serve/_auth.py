"""Who may call the server: ``Authorization: Bearer <key>`` against ``serve.apiKeys``.

Every configured key is compared, in constant time, whatever the first comparisons gave; a
key is never logged, counted or echoed. The client's bearer stays here: the upstream call
carries the operator's key (``serve.upstream.apiKey``) or litellm's environment, never it.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

__all__ = ["authorized", "bearer"]


def bearer(headers: Mapping[str, str]) -> str | None:
    """The bearer token of an ``Authorization`` header, if there is one."""
    scheme, _, token = headers.get("authorization", "").strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def authorized(keys: tuple[str, ...], headers: Mapping[str, str]) -> bool:
    """Whether the request may go on: no keys configured, or its bearer is one of them."""
    if not keys:
        return True
    token = bearer(headers)
    if token is None:
        return False
    given = token.encode()
    matched = False
    for key in keys:
        matched |= hmac.compare_digest(given, key.encode())
    return matched
