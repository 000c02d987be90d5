"""The review page's HTTP server (the standard library's; one thread per request).

Routes: ``GET /`` the page; ``GET /api/next?client=ID`` the next turn to label (``turn``:
null when none is left) with the counts; ``POST /api/label`` ``{"key", "label", "category",
"note"}`` appends the label; ``POST /api/skip`` ``{"key"}`` puts the turn aside for this run
of the server (a skipped turn comes back the next time). A turn handed to one page (``client``)
is held for it for ``HOLD_SECONDS``, so two pages on one server are shown different turns;
the label file is read again at each ``next``, so turns labelled by another reviewer (another
server on the same file) are not shown again.

Guarded against other sites and other hosts: every ``POST`` needs the page's token in the
``X-Replyguard-Token`` header (a cross-site form cannot set it, and the server answers no
CORS preflight), a JSON body of at most ``MAX_BODY`` bytes, and, when the server listens on
loopback, a ``Host`` header naming a loopback address (against DNS rebinding).
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from replyguard.review._labels import LabelError, LabelFile, eval_record, shown
from replyguard.review._page import render_page
from replyguard.review._queue import Turn

HOLD_SECONDS = 600.0
MAX_BODY = 64 * 1024
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


@dataclass
class Session:
    """What one server shares between its requests."""

    queue: Sequence[Turn]
    labels: LabelFile
    reviewer: str
    categories: Sequence[str]
    token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    skipped: set[str] = field(default_factory=set)
    held: dict[str, tuple[str, float]] = field(default_factory=dict)
    """``{key: (client, until)}``: the turns handed to a page and not yet labelled."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next_turn(self, client: str, now: float) -> dict[str, Any]:
        """The next turn for ``client`` and the counts (``left``: turns not yet labelled)."""
        labelled = self.labels.labelled()
        with self.lock:
            open_turns = [t for t in self.queue if t.key not in labelled]
            chosen = None
            for turn in open_turns:
                holder, until = self.held.get(turn.key, (client, 0.0))
                if turn.key in self.skipped or (holder != client and until > now):
                    continue
                chosen = turn
                break
            for key, (holder, _) in list(self.held.items()):
                if holder == client:
                    del self.held[key]
            if chosen is not None:
                self.held[chosen.key] = (client, now + HOLD_SECONDS)
        return {
            "turn": shown(chosen) if chosen is not None else None,
            "left": len(open_turns),
            "total": len(self.queue),
            "labelled": len(self.queue) - len(open_turns),
            "skipped": len(self.skipped),
        }

    def find(self, key: Any) -> Turn:
        for turn in self.queue:
            if turn.key == key:
                return turn
        raise LabelError(f"key: no queued turn {key!r}")

    def label(self, body: dict[str, Any]) -> None:
        """Append the label ``body`` gives; raises ``LabelError`` (a bad field) or
        ``OSError`` (the file cannot be written)."""
        turn = self.find(body.get("key"))
        category, note = body.get("category"), body.get("note")
        if category is not None and category not in self.categories:
            raise LabelError(
                f"category: unknown {category!r} (one of: {', '.join(self.categories)})"
            )
        if note is not None and not isinstance(note, str):
            raise LabelError("note: must be a string")
        record = eval_record(
            turn, str(body.get("label")), category=category, note=note, reviewer=self.reviewer
        )
        self.labels.append(record)
        with self.lock:
            self.held.pop(turn.key, None)

    def skip(self, body: dict[str, Any]) -> None:
        turn = self.find(body.get("key"))
        with self.lock:
            self.skipped.add(turn.key)
            self.held.pop(turn.key, None)


class ReviewServer(ThreadingHTTPServer):
    """The HTTP server of one review self._session."""

    daemon_threads = True

    def __init__(self, session: Session, host: str, port: int) -> None:
        self.session = session
        self.loopback = host in LOOPBACK_HOSTS or host.startswith("127.")
        super().__init__((host, port), _Handler)


class _Handler(BaseHTTPRequestHandler):
    """One request of the review page (see the module's routes)."""

    server_version = "replyguard-review"

    @property
    def _reviewing(self) -> ReviewServer:
        server = self.server
        assert isinstance(server, ReviewServer)
        return server

    @property
    def _session(self) -> Session:
        return self._reviewing.session

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: requests are not printed (a label's text must not reach the logs)."""

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("X-Frame-Options", "DENY")
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, value: Any) -> None:
        self._send(status, json.dumps(value).encode("utf-8"), "application/json")

    def _host_ok(self) -> bool:
        if not self._reviewing.loopback:
            return True
        host = urlsplit(f"//{self.headers.get('Host', '')}").hostname or ""
        return host in LOOPBACK_HOSTS or f"[{host}]" in LOOPBACK_HOSTS

    def do_GET(self) -> None:
        if not self._host_ok():
            self._json(HTTPStatus.FORBIDDEN, {"error": "Host: not this server"})
            return
        url = urlsplit(self.path)
        if url.path == "/":
            page = render_page(
                self._session.token, self._session.categories, self._session.reviewer
            )
            self._send(HTTPStatus.OK, page.encode("utf-8"), "text/html; charset=utf-8")
        elif url.path == "/api/next":
            client = parse_qs(url.query).get("client", [""])[0][:64]
            self._json(HTTPStatus.OK, self._session.next_turn(client, time.monotonic()))
        else:
            self._json(HTTPStatus.NOT_FOUND, {"error": f"no such page: {url.path}"})

    def _body(self) -> dict[str, Any] | None:
        if not self._host_ok():
            self._json(HTTPStatus.FORBIDDEN, {"error": "Host: not this server"})
            return None
        token = self.headers.get("X-Replyguard-Token", "")
        if not secrets.compare_digest(token.encode(), self._session.token.encode()):
            self._json(HTTPStatus.FORBIDDEN, {"error": "X-Replyguard-Token: missing or wrong"})
            return None
        if self.headers.get_content_type() != "application/json":
            self._json(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, {"error": "send application/json"})
            return None
        length = self.headers.get("Content-Length", "")
        if not length.isdigit() or int(length) > MAX_BODY:
            self._json(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, {"error": "body too large"})
            return None
        try:
            body = json.loads(self.rfile.read(int(length)))
        except (ValueError, RecursionError):
            body = None
        if not isinstance(body, dict):
            self._json(HTTPStatus.BAD_REQUEST, {"error": "the body must be a JSON object"})
            return None
        return body

    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        if path not in ("/api/label", "/api/skip"):
            self._json(HTTPStatus.NOT_FOUND, {"error": f"no such action: {path}"})
            return
        body = self._body()
        if body is None:
            return
        try:
            (self._session.label if path == "/api/label" else self._session.skip)(body)
        except LabelError as exc:
            self._json(HTTPStatus.BAD_REQUEST, {"error": str(exc)})
        except OSError as exc:
            where = self._session.labels.path
            error = f"cannot write {where}: {type(exc).__name__}"
            self._json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": error})
        else:
            self._json(HTTPStatus.OK, {"ok": True})


def make_server(session: Session, host: str, port: int) -> ReviewServer:
    """A server for ``session`` bound to ``host:port`` (port 0: any free one); raises
    ``OSError`` when the address cannot be bound."""
    return ReviewServer(session, host, port)
