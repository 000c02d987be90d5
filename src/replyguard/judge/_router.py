"""The litellm ``Router`` built once per verifier from the ``router`` config section.

The section (``replyguard.config._router``) lists judge deployments in model groups.
replyguard stays in charge of time and retries: the Router is built with ``num_retries=0``, no
fallbacks of its own and cooldowns off, so one judge call is one request to one deployment,
the judgement's deadline (``timeoutSeconds``) cancels it, and ``fallbackModels`` and the
circuit breaker work as they do without a router.

The Router is built lazily on the first judgement that needs it: ``litellm.router`` is imported
off the event loop (the slow part), the Router itself is constructed on the loop (a strategy may
start a task there); ``env:`` keys are read then, and the keys read are redacted from every
later judgement's logs, errors and spans (``JudgeRouter.resolved_keys``). The deployments handed
to the Router carry no key (the Router logs them at DEBUG): each names a credential that this
module registers in ``litellm.credential_list``. ``Verifier.aclose`` retires the Router, its
strategy's callbacks and tasks, and those credentials: call it after the last turn, since a
judgement still running then would find its credential gone.

With ``state`` the Router keeps its routing state on the fleet's Redis, and a second, local
Router serves the judgements made while Redis is known down (see ``JudgeRouter``).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import sys
import threading
import uuid
import warnings
from collections.abc import Callable
from typing import Any

from replyguard.config._router import RouterConfig
from replyguard.config._state import url_secrets
from replyguard.judge._litellm import first_use
from replyguard.state import current_ticket
from replyguard.telemetry._events import redact

# The Router's strategy selectors, each a callback in litellm's global lists while it lives.
_SELECTORS = (
    "leastbusy_logger",
    "lowesttpm_logger",
    "lowesttpm_logger_v2",
    "lowestlatency_logger",
    "lowestcost_logger",
)
_CALLBACK_LISTS = (
    "callbacks",
    "input_callback",
    "success_callback",
    "_async_success_callback",
    "failure_callback",
    "_async_failure_callback",
    "service_callback",
)
# litellm's loggers, which log the Redis settings (the URL with its password) at DEBUG.
_LITELLM_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy")
# Every change to ``litellm.credential_list`` (one list for the process) holds this lock.
_CREDENTIALS_LOCK = threading.Lock()


class _Redacting(logging.Filter):
    """Takes the fleet's Redis URL and password out of litellm's own log records."""

    def __init__(self, secrets: tuple[str, ...]) -> None:
        super().__init__()
        # Each also as a repr inside a container shows it (quotes, backslashes escaped).
        spellings = (spelling for secret in secrets for spelling in (secret, repr(secret)[1:-1]))
        self.secrets = tuple(dict.fromkeys(spellings))

    def filter(self, record: logging.LogRecord) -> bool:
        # The message as a handler would format it (a repr of the arguments escapes quotes
        # and backslashes, so a password holding one would not be seen in it).
        try:
            message = record.getMessage()
        except Exception:  # litellm passes arguments without placeholders at times
            message = f"{record.msg} {record.args!r}"
        if any(secret in message for secret in self.secrets):
            record.msg, record.args = redact(message, self.secrets), None
        return True


_ROUTER_FIRST_CALL = (
    "litellm.integrations.otel.logger",
    "litellm.router_rust.invoke.prompt_management",
    "litellm.router_strategy.auto_router.baseline_request",
    "litellm.router_utils.client_initalization_utils",
    "litellm.router_utils.pre_call_checks.continuation_prefill_check",
    "litellm.rust_bridge.logger",
    "litellm.types.router:ModelGroupInfo",
    "litellm.types.router:DeploymentPricing",
)
"""What a Router's first call imports and builds on the event loop, in the judgement's
deadline, unless loaded before: its request phases' OpenTelemetry hooks above all (0.1-0.15 s,
whatever the tracing; a busy machine's first routed judgement could not send its request
within a short deadline)."""


def _load_router() -> None:
    """``litellm.router``, with what a Router's first call would load (this thread: blocking)."""
    importlib.import_module("litellm.router")
    for name in _ROUTER_FIRST_CALL:
        first_use(name)


class JudgeRouter:
    """The litellm ``Router`` of one verifier, built on first use, shared by its judges.

    With the fleet's Redis there are two: the fleet's, which keeps its routing state (rpm and
    tpm counters) on Redis, each Redis call bounded by ``timeoutMs``; and a local one, which
    keeps it in this process, for the judgements made while Redis is known down (or that
    were admitted without it). A Router's Redis calls cannot be skipped one by one (litellm
    makes them from its native core), so a judgement that must not wait on Redis goes to the
    Router that has none. Each is built when a judgement first needs it: the fleet's is never
    built while Redis is known down (its construction pings Redis on the event loop).
    """

    def __init__(
        self,
        config: RouterConfig,
        *,
        redis_url: str | None = None,
        redis_timeout: float | None = None,
        redis_down: Callable[[], bool] | None = None,
    ) -> None:
        """``redis_url``: the fleet's Redis (``state``), where the Router then keeps its rpm
        and tpm counters, so every instance counts the same usage; ``redis_timeout``: the
        bound of each of its Redis calls, in seconds (``timeoutMs``); ``redis_down``: whether
        the shared state knows Redis to be unavailable now."""
        self.config = config
        self._redis_url = redis_url
        self._redis_timeout = redis_timeout
        self._redis_down = redis_down
        self._redacting = _Redacting(url_secrets(redis_url) if redis_url else ())
        self.groups = frozenset(config.groups)
        self._routers: dict[bool, Any] = {}
        """The Routers built, by whether they keep their routing state on Redis."""
        self._credentials = f"replyguard-{uuid.uuid4().hex[:12]}"
        self.resolved_keys: tuple[str, ...] = ()
        """Every deployment key a build read (the current and any rotated one), to redact."""

    def _on_redis(self) -> bool:
        """Whether the current judgement routes on the fleet's Redis: there is one, it is not
        known down, and the judgement's ticket was decided on it. A judgement that routes on
        local state although its ticket was shared (Redis found down since) is marked
        degraded too."""
        if self._redis_url is None:
            return False
        down = self._redis_down is not None and self._redis_down()
        ticket = current_ticket.get()
        if ticket is not None and (down or ticket.degraded):
            ticket.degraded = True
            return False
        return not down

    def _build(self, on_redis: bool) -> Any:
        with _CREDENTIALS_LOCK:  # two loops (a task and run_sync) may ask at once
            router = self._routers.get(on_redis)
            if router is None:
                import litellm
                from litellm.models.credentials import CredentialItem
                from litellm.router import Router

                arguments, keys = self.config.router_arguments(
                    self._credentials,
                    redis_url=self._redis_url if on_redis else None,
                    redis_timeout=self._redis_timeout,
                )
                if not self._routers:  # the first of its generation: its keys are the ones
                    self.resolved_keys = tuple(dict.fromkeys((*self.resolved_keys, *keys.values())))
                    self._forget_credentials()
                    litellm.credential_list.extend(
                        CredentialItem(
                            credential_name=name,
                            credential_values={"api_key": key},
                            credential_info={},
                        )
                        for name, key in keys.items()
                    )
                if self._redacting.secrets:  # before the Router logs its Redis settings
                    for name in _LITELLM_LOGGERS:
                        logging.getLogger(name).addFilter(self._redacting)
                router = self._routers[on_redis] = Router(**arguments)
            return router

    def _forget_credentials(self) -> None:
        litellm = sys.modules.get("litellm")
        if litellm is not None:
            mine = f"{self._credentials}-"
            litellm.credential_list[:] = [
                c for c in litellm.credential_list if not c.credential_name.startswith(mine)
            ]

    async def router(self) -> Any:
        """The Router for the current judgement (see ``_on_redis``), built the first time:
        ``litellm.router`` imported off the event loop, the Router constructed on it."""
        on_redis = self._on_redis()
        router = self._routers.get(on_redis)
        if router is None:
            await asyncio.to_thread(_load_router)
            router = self._build(on_redis)
        return router

    async def aclose(self) -> None:
        """``close``, and the fleet Router's own Redis connections (its routing state's pool,
        which it opens as it is built) closed on the running loop, waiting at most
        ``_DISCONNECT_SECONDS``: a discarded Router left them open until collected."""
        routers = list(self._routers.values())
        self.close()
        for router in routers:
            await _disconnect(_routing_redis(router))

    def close(self) -> None:
        """Discard the Routers (their callbacks, strategy selectors and their tasks, and
        keys); the next judgement builds new ones."""
        with _CREDENTIALS_LOCK:
            routers = list(self._routers.values())
            self._routers.clear()
            self._forget_credentials()
        for router in routers:
            _retire(router)
            _drop_selectors(router)
        for name in _LITELLM_LOGGERS:
            logging.getLogger(name).removeFilter(self._redacting)


async def _disconnect(redis: Any) -> None:
    """Close a Router's Redis connections (none without a Redis)."""
    if redis is None:
        return
    with contextlib.suppress(Exception):
        async with asyncio.timeout(_DISCONNECT_SECONDS):
            # Twice, a pass of the loop between: the Router's first ping runs in a task of its
            # own and may connect just after the first.
            for _ in range(2):
                await redis.disconnect()
                for pool in _cached_pools(redis):
                    await pool.disconnect(inuse_connections=True)
                await asyncio.sleep(0.01)
    close_sync = getattr(getattr(redis, "redis_client", None), "close", None)
    if callable(close_sync):  # its sync client's connection
        with contextlib.suppress(Exception):
            close_sync()


_DISCONNECT_SECONDS = 2.0


def _cached_pools(redis: Any) -> list[Any]:
    """The connection pools of the async clients litellm cached for a Router's Redis on the
    running loop: one for each client scope its calls ran in, and one for its own tasks
    (``usage-based-routing-v2``'s sync of its counters). ``RedisCache.disconnect`` reaches
    only the last pool made, so the others' connections stayed open in litellm's cache."""
    cache = getattr(sys.modules.get("litellm"), "in_memory_llm_clients_cache", None)
    cache_key = getattr(redis, "_get_async_client_cache_key", None)
    if cache is None or not callable(cache_key):
        return []
    base = str(cache.update_cache_key_with_event_loop(cache_key()))
    clients = getattr(cache, "cache_dict", {})
    found = (c for k, c in list(clients.items()) if k == base or str(k).startswith(f"{base}#"))
    pools = (getattr(client, "connection_pool", None) for client in found)
    return [pool for pool in dict.fromkeys(pools) if pool is not None]


def _routing_redis(router: Any) -> Any:
    """The Redis client of a Router's routing state, where this litellm keeps it
    (``health().store``; ``cache`` before), or None."""
    if router is None:
        return None
    with contextlib.suppress(Exception), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # ``Router.cache``, where it is
        health = getattr(router, "health", None)
        store = health().store if callable(health) else getattr(router, "cache", None)
        return getattr(store, "redis_cache", None)
    return None


def _retire(router: Any) -> None:
    """Take the Router's global registrations out of litellm: ``Router.retire()`` where it
    exists (litellm 1.110 and later, where ``discard()`` is deprecated), ``discard()`` before."""
    retire = getattr(router, "retire", None)
    if callable(retire):
        retire()
    else:
        router.discard()


def _drop_selectors(router: Any) -> None:
    """Take the Router's strategy selectors out of litellm's callback lists and cancel their
    sync tasks (``Router.discard`` and ``retire`` leave both behind)."""
    import litellm

    selectors = [s for s in (getattr(router, name, None) for name in _SELECTORS) if s is not None]
    for selector in selectors:
        task = getattr(selector, "_sync_task", None)
        if isinstance(task, asyncio.Task) and not task.done():
            loop = task.get_loop()
            if loop is _running_loop():
                task.cancel()
            elif not loop.is_closed():
                loop.call_soon_threadsafe(task.cancel)
    ids = {id(s) for s in selectors}
    for name in _CALLBACK_LISTS:
        callbacks = getattr(litellm, name, None)
        if isinstance(callbacks, list):
            callbacks[:] = [c for c in callbacks if id(c) not in ids]


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
