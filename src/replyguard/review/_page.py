"""The review page: one self-contained HTML document, ``page.html`` beside this module (no
network, no outside script; a content security policy allows nothing else).

Keys: ``p`` PASS; ``f`` FAIL, then a category's number (``0`` or Enter: no category, Escape:
back); ``s`` skip; ``n`` write a note (Escape leaves the note, which goes with the next label).
Every text from the ledger is put in the page with ``textContent``, never as HTML, so a reply
holding markup or script is shown as the text it is.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from html import escape
from importlib.resources import files


@functools.cache
def _template() -> str:
    return files("replyguard.review").joinpath("page.html").read_text(encoding="utf-8")


def script_json(value: object) -> str:
    """JSON safe inside a ``<script>`` element (no ``</script>``, no HTML comment)."""
    text = json.dumps(value)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_page(token: str, categories: Sequence[str], reviewer: str) -> str:
    """The page, with the server's token, the FAIL categories it offers and the reviewer."""
    config = script_json({"token": token, "categories": list(categories)})
    page = _template().replace("{{REVIEWER}}", escape(reviewer, quote=True))
    return page.replace("{{CONFIG}}", config)
