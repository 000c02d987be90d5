"""Loopback ports for the tests: one helper, used by every test and support module."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (bound, then released): for a
    server about to start on it, or a connection that must be refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def listening_socket(backlog: int = 64) -> socket.socket:
    """A TCP socket listening on a free port of 127.0.0.1 (``getsockname()[1]``): handed to a
    server, or left unanswered to show that nothing connects to it."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(backlog)
    return listener
