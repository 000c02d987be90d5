"""What the litellm judges of one verifier hold: built by the first of them, shared by the
judges it makes for run kinds and panel members, closed by it.

``JudgeParts`` holds the verifier's share of litellm's HTTP clients (``ClientScope``), its
byte-capped answer sessions (``AnswerSessions``) and its Router (``JudgeRouter``, when the
config names router groups). A part handed in by the caller is borrowed: used, never closed.
What the parts built themselves they close:

- ``aclose()`` (``LiteLLMJudge.aclose``, so ``Verifier.aclose``): the Router, the clients and
  sessions of the running loop, and litellm's logging worker there;
- ``close()`` (``Verifier.close``): the Router, which needs no loop;
- as an event loop the judges called on shuts down (``replyguard._loop_ends``): their clients
  and sessions of that loop, and the logging worker there (the scope stays open: no
  ``verifier_reopened`` warning on a later loop);
- when the judge that built them is garbage-collected without ``aclose``: the clients and
  sessions, on each loop still running (``release_when_collected``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from replyguard._loop_ends import LoopEnds
from replyguard.config._schema import VerifierConfig
from replyguard.judge._answer_cap import AnswerSessions
from replyguard.judge._clients import ClientScope, release_when_collected
from replyguard.judge._litellm import warm_routes
from replyguard.judge._worker import stop_logging_worker
from replyguard.telemetry._events import Events

if TYPE_CHECKING:  # loaded when a config names router groups
    from replyguard.judge._router import JudgeRouter

# How much longer than the longest judgement ``aclose`` waits for judge calls in flight.
_DRAIN_MARGIN = 1.0


def _run_kind_configs(config: VerifierConfig) -> tuple[VerifierConfig, ...]:
    """The config and each run kind's: every config a judgement of the verifier runs under."""
    return (config, *(config.for_run_kind(name) for name in config.run_kinds))


class JudgeParts:
    """The clients, sessions and Router the litellm judges of one verifier share."""

    def __init__(
        self,
        config: VerifierConfig,
        events: Events,
        *,
        router: JudgeRouter | None,
        clients: ClientScope | None,
        sessions: AnswerSessions | None,
        redis_down: Callable[[], bool] | None = None,
    ) -> None:
        """Builds what is not handed in (and then owns it): the Router when ``config`` names
        router groups, the client scope and the answer sessions. ``redis_down``: whether the
        shared state knows the fleet's Redis to be unavailable now (the Router then routes on
        a local Router of its own)."""
        configs = _run_kind_configs(config)
        self.models = tuple(dict.fromkeys(m for c in configs for m in c.judge_deployment_models))
        """Every model a judgement may call, each once (every run kind's)."""
        self._own_router = router is None and config.router is not None
        if self._own_router:
            router = _router_of(config, redis_down)
        self.router = router
        self._own_clients = clients is None
        if clients is None:
            longest = max(c.timeout_seconds for c in configs)
            clients = ClientScope(events, drain_seconds=longest + _DRAIN_MARGIN)
        self.clients = clients
        self._own_sessions = sessions is None
        self.sessions = sessions if sessions is not None else AnswerSessions()
        self._ends = LoopEnds(self._loop_ending)

    def released_with(self, owner: object) -> None:
        """Close the owned clients and sessions when ``owner`` (the judge that built them) is
        collected without ``aclose``."""
        owned = (
            *((self.clients,) if self._own_clients else ()),
            *((self.sessions,) if self._own_sessions else ()),
        )
        if owned:
            release_when_collected(owner, *owned)

    def watch(self, loop: asyncio.AbstractEventLoop) -> None:
        """A judge calls on ``loop``: close what is held there as it shuts down."""
        self._ends.watch(loop)

    async def warmup(self) -> None:
        """Load what the first call of every judge model's route would (off the event loop),
        and build the Router."""
        await warm_routes(self.models)
        if self.router is not None:
            await self.router.router()

    async def aclose(self) -> None:
        """Close the owned Router, and what is held on the running loop."""
        if self._own_router and self.router is not None:
            await self.router.aclose()
        if self._own_clients:
            await self.clients.aclose()
        if self._own_sessions:
            await self.sessions.aclose()
        await stop_logging_worker()

    def close(self) -> None:
        """Discard the owned Router (its callbacks, tasks and credentials)."""
        if self._own_router and self.router is not None:
            self.router.close()

    async def _loop_ending(self) -> None:
        if self._own_clients:
            await self.clients.close_loop()
        if self._own_sessions:
            await self.sessions.aclose()
        await stop_logging_worker()


def _router_of(config: VerifierConfig, redis_down: Callable[[], bool] | None) -> JudgeRouter:
    """The Router of ``config``'s router groups: counting on the fleet's Redis, if any, each
    of its Redis calls bounded by ``state.timeoutMs``, and on its local state while
    ``redis_down()``."""
    from replyguard.judge._router import JudgeRouter

    assert config.router is not None
    state = config.state
    return JudgeRouter(
        config.router,
        redis_url=state.resolve_url() if state is not None else None,
        redis_timeout=state.timeout_ms / 1000 if state is not None else None,
        redis_down=redis_down,
    )
