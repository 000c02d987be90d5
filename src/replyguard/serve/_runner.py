"""``replyguard serve``: check the config, bind the address, run the workers on uvicorn.

The parent checks everything a worker would refuse (the config file, the ``env:`` keys, the
judge and agent families) and binds the listening socket itself, so that a bad config, an
unset variable or a port in use exits 2 with one message before anything is served. Then:

- one worker (the default): the app runs in this process;
- ``--workers N``: uvicorn's supervisor spawns N processes sharing the socket (the kernel
  hands each connection to one of them) and restarts one that dies; each builds its own
  ``Verifier`` from the same config (a fleet on one Redis when the config has ``state``).

Metrics are summed across workers through a folder of per-process files
(``serve/_metrics.py``), created here and removed at exit. The ready line is printed once
every worker has warmed up (each leaves a marker file in the same run folder).
SIGTERM/SIGINT: the listening socket closes, turns in flight are answered, each worker closes
its verifier (``aclose``), then the command exits 0.
"""

from __future__ import annotations

import argparse
import errno
import inspect
import ipaddress
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from replyguard.config._schema import VerifierConfig
from replyguard.errors import ConfigError, CrossFamilyError

__all__ = ["CONFIG_ENV", "RUN_DIR_ENV", "add_arguments", "main"]

CONFIG_ENV = "REPLYGUARD_SERVE_CONFIG"
"""The config file a worker process loads (empty: the defaults)."""
RUN_DIR_ENV = "REPLYGUARD_SERVE_RUN_DIR"
"""The run folder: the metrics files and the workers' ready markers."""
READY_PREFIX = "ready-"


class _Refused(Exception):
    """The server cannot start: the message, exit 2."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``serve`` command's arguments."""
    parser.add_argument("--config", metavar="FILE", help="the verifier config (else defaults)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8080, help="port to bind (default 8080)")
    parser.add_argument(
        "--workers", type=int, default=1, help="worker processes sharing the port (default 1)"
    )


def _check_extra() -> None:
    # Found, not imported: prometheus_client must see the metrics folder when it is imported.
    missing = [m for m in ("starlette", "uvicorn", "prometheus_client") if find_spec(m) is None]
    if missing:
        raise _Refused(f"{', '.join(missing)} not installed: pip install 'replyguard[serve]'")


def _checked_config(path: str | None) -> VerifierConfig:
    """The config as a worker will use it; ``_Refused`` for anything a worker would refuse."""
    from replyguard.runner._verifier import Verifier

    try:
        config = VerifierConfig() if path is None else VerifierConfig.load(path)
        serve = config.serve
        if serve is not None:
            serve.resolve_api_keys()
            if serve.upstream is not None:
                serve.upstream.resolve_api_key()
        Verifier(config, preload=False).close()
    except (ConfigError, CrossFamilyError) as exc:
        raise _Refused(str(exc)) from None
    return config


def _bind(host: str, port: int) -> socket.socket:
    """The listening socket; ``_Refused`` when the address cannot be had."""
    if not 0 <= port <= 65535:
        raise _Refused(f"--port {port}: not a port number (0-65535)")
    try:
        info = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, address = info[0]
        listener = socket.socket(family, kind, proto)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind(address)
        except OSError:
            listener.close()
            raise
        listener.listen(2048)
    except OSError as exc:
        in_use = getattr(exc, "errno", None) == errno.EADDRINUSE
        reason = "port in use" if in_use else exc.strerror or str(exc)
        raise _Refused(f"cannot listen on {host}:{port}: {reason}") from None
    listener.set_inheritable(True)
    return listener


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _ready_line(host: str, port: int, workers: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    plural = "s" if workers != 1 else ""
    return f"replyguard serve: ready on http://{shown}:{port} ({workers} worker{plural})"


def _announce_when_ready(run_dir: Path, workers: int, line: str, stop: threading.Event) -> None:
    while not stop.wait(0.05):
        if len(list(run_dir.glob(f"{READY_PREFIX}*"))) >= workers:
            print(line, flush=True)
            return


def mark_ready() -> None:
    """A worker is warmed up: leave its marker in the run folder."""
    run_dir = os.environ.get(RUN_DIR_ENV)
    if run_dir:
        Path(run_dir, f"{READY_PREFIX}{os.getpid()}").touch()


def _quiet_signals() -> None:
    """SIGTERM and SIGINT handled in Python: uvicorn raises the signal it caught again once
    it has shut down gracefully, and the command then exits 0 instead of dying of it."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)


def _uvicorn_config(app: Any, listener: socket.socket, workers: int, **more: Any) -> Any:
    import uvicorn

    host, port = listener.getsockname()[:2]
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        workers=workers,
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=None,
        **more,
    )


def _serve(config: VerifierConfig, listener: socket.socket, workers: int, line: str) -> None:
    import uvicorn

    if workers == 1:
        from replyguard.serve._app import Served, build_app

        def ready() -> None:
            mark_ready()
            print(line, flush=True)

        served = Served.from_config(config, on_ready=ready)
        server = uvicorn.Server(_uvicorn_config(build_app(served), listener, 1, lifespan="on"))
        _quiet_signals()
        server.run(sockets=[listener])
        return
    from uvicorn.supervisors import Multiprocess

    uvicorn_config = _uvicorn_config(
        "replyguard.serve._worker:worker_app", listener, workers, factory=True, lifespan="on"
    )
    more: dict[str, Any] = {}
    if "target" in inspect.signature(Multiprocess).parameters:  # older uvicorn: the worker target
        more["target"] = uvicorn.Server(uvicorn_config).run
    Multiprocess(uvicorn_config, sockets=[listener], **more).run()


def run(args: argparse.Namespace) -> int:
    """Serve until SIGTERM/SIGINT; the exit code."""
    if args.workers < 1:
        raise _Refused(f"--workers {args.workers}: at least 1")
    _check_extra()
    config = _checked_config(args.config)
    listener = _bind(args.host, args.port)
    if not _is_loopback(args.host) and not (config.serve and config.serve.api_keys):
        print(
            f"replyguard serve: warning: listening on {args.host} without serve.apiKeys: "
            "anyone who can reach it may call the upstream model at your expense",
            file=sys.stderr,
            flush=True,
        )
    run_dir = Path(tempfile.mkdtemp(prefix="replyguard-serve-"))
    (run_dir / "metrics").mkdir()
    os.environ.update(
        {
            CONFIG_ENV: os.path.abspath(args.config) if args.config else "",
            RUN_DIR_ENV: str(run_dir),
            "PROMETHEUS_MULTIPROC_DIR": str(run_dir / "metrics"),
        }
    )
    port = listener.getsockname()[1]
    line = _ready_line(args.host, port, args.workers)
    stop = threading.Event()
    if args.workers > 1:
        watcher = threading.Thread(
            target=_announce_when_ready, args=(run_dir, args.workers, line, stop), daemon=True
        )
        watcher.start()
    try:
        _serve(config, listener, args.workers, line)
    finally:
        stop.set()
        listener.close()
        shutil.rmtree(run_dir, ignore_errors=True)
    return 0


def main(args: argparse.Namespace) -> int:
    """``replyguard serve``: 0 after a clean stop, 2 when it cannot start."""
    try:
        return run(args)
    except _Refused as exc:
        print(f"replyguard serve: {exc}", file=sys.stderr, flush=True)
        return 2
