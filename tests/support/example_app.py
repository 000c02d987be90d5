"""The FastAPI example (``examples/fastapi_backend/app.py``), loaded as a module, and served for
real: uvicorn on 127.0.0.1, on a port of its own, inside the test's event loop."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from support.ports import listening_socket

APP_FILE = Path(__file__).resolve().parents[2] / "examples" / "fastapi_backend" / "app.py"


def load_example() -> ModuleType:
    """``app.py`` as a module (once per process: later calls give the same module)."""
    name = "fastapi_backend_app"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, APP_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@asynccontextmanager
async def serving(app: Any) -> AsyncIterator[str]:
    """``app`` (a FastAPI app) served by uvicorn on a free loopback port; yields its URL once
    the app's startup (its lifespan) is over.

    On exit uvicorn shuts down, giving open responses a few seconds to end.
    """
    import uvicorn

    started = asyncio.Event()
    app_lifespan = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[Any]:
        async with app_lifespan(app) as state:
            started.set()
            yield state

    app.router.lifespan_context = lifespan
    listener = listening_socket()
    port = listener.getsockname()[1]
    config = uvicorn.Config(
        app, http="h11", lifespan="on", log_level="warning", timeout_graceful_shutdown=5
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[listener]))
    startup = asyncio.create_task(started.wait())
    await asyncio.wait({task, startup}, return_when=asyncio.FIRST_COMPLETED)
    startup.cancel()
    if task.done():  # the app did not start: say why
        listener.close()
        task.result()
        raise RuntimeError("the app did not start")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
        listener.close()
