"""A worker process of ``replyguard serve --workers N``: the app uvicorn imports by name.

The parent has checked the config and set the environment (``_runner``): the config file, the
run folder, the metrics folder (before ``prometheus_client`` is imported here).
"""

from __future__ import annotations

import os

from starlette.applications import Starlette

from replyguard.config._schema import VerifierConfig
from replyguard.serve._app import Served, build_app
from replyguard.serve._runner import CONFIG_ENV, mark_ready

__all__ = ["worker_app"]


def worker_app() -> Starlette:
    """The app of one worker (uvicorn's ``factory=True``)."""
    path = os.environ.get(CONFIG_ENV) or None
    config = VerifierConfig() if path is None else VerifierConfig.load(path)
    return build_app(Served.from_config(config, on_ready=mark_ready))
