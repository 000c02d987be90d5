"""The ``router`` config section, and the litellm ``Router`` built from it once per verifier.

The section lists judge deployments (each in a model group, with its own model, endpoint, key
and rate limits) and how to balance load across a group. ``model`` (and any fallback model)
may then name a group. replyguard stays in charge of time and retries: the Router is built
with ``num_retries=0``, no fallbacks of its own and cooldowns off, so one judge call is one
request to one deployment, the judgement's deadline (``timeoutSeconds``) cancels it, and
``fallbackModels`` and the circuit breaker work as they do without a router.

The Router is built lazily on the first judgement that needs it: ``litellm.router`` is imported
off the event loop (the slow part), the Router itself is constructed on the loop (a strategy may
start a task there); ``env:`` keys are read then, and the keys read are redacted from every
later judgement's logs, errors and spans (``JudgeRouter.resolved_keys``). The deployments handed
to the Router carry no key (the Router logs them at DEBUG): each names a credential that this
module registers in ``litellm.credential_list``. ``Verifier.aclose`` retires the Router, its
strategy's callbacks and tasks, and those credentials: call it after the last turn, since a
judgement still running then would find its credential gone.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
import threading
import uuid
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, field_validator

from replyguard.checks.specs import FILE_MODEL
from replyguard.keys import ApiKey, key_values, resolved_key

RoutingStrategy = Literal[
    "simple-shuffle",
    "least-busy",
    "usage-based-routing-v2",
    "latency-based-routing",
    "cost-based-routing",
]
PerMinute = Annotated[int, Field(ge=1)]
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
# Every change to ``litellm.credential_list`` (one list for the process) holds this lock.
_CREDENTIALS_LOCK = threading.Lock()


class Deployment(BaseModel):
    """One judge deployment: a model at an endpoint, in a model group."""

    model_config = FILE_MODEL

    model_name: str
    """The model group this deployment serves (what ``model`` names)."""
    model: str
    """The deployment's model, in litellm naming (``azure/gpt-4o``, ``openai/gpt-4o-mini``)."""
    api_base: str | None = None
    """The deployment's endpoint (a provider region, a proxy, a self-hosted server)."""
    api_key: ApiKey = None
    """Its API key; ``"env:NAME"`` reads the variable when the router is built."""
    rpm: PerMinute | None = None
    """Requests per minute this deployment takes (the routing strategy respects it)."""
    tpm: PerMinute | None = None
    """Tokens per minute this deployment takes."""
    weight: float | None = Field(default=None, gt=0)
    """Relative share of the group's requests under ``simple-shuffle``."""

    @field_validator("model_name", "model")
    @classmethod
    def _named(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must name a model")
        return value.strip()


class RouterConfig(BaseModel):
    """Judge deployments behind one litellm ``Router`` (its retries, fallbacks, cooldowns off)."""

    model_config = FILE_MODEL

    deployments: tuple[Deployment, ...] = Field(strict=False)
    """The judge deployments; several may share a ``modelName`` to spread its load."""
    routing_strategy: RoutingStrategy = "simple-shuffle"
    """How the Router picks a deployment of a group."""

    @field_validator("deployments")
    @classmethod
    def _not_empty(cls, value: tuple[Deployment, ...]) -> tuple[Deployment, ...]:
        if not value:
            raise ValueError("list at least one deployment")
        return value

    @property
    def groups(self) -> dict[str, tuple[str, ...]]:
        """Each model group and the models of its deployments, in the order given."""
        groups: dict[str, tuple[str, ...]] = {}
        for deployment in self.deployments:
            groups[deployment.model_name] = (
                *groups.get(deployment.model_name, ()),
                deployment.model,
            )
        return groups

    def secrets(self) -> tuple[str, ...]:
        """Every deployment's key value, for redaction."""
        return tuple(value for d in self.deployments for value in key_values(d.api_key))

    def router_arguments(self, credentials: str) -> tuple[dict[str, Any], dict[str, str]]:
        """The keyword arguments of ``litellm.Router``, and the keys (resolved now) by the
        credential names the deployments refer to (``{credentials}-{index}``).

        The Router logs its deployments at DEBUG, so they name their key instead of holding it;
        litellm looks the name up in ``litellm.credential_list`` when it sends the request.
        """
        model_list = []
        keys: dict[str, str] = {}
        for index, deployment in enumerate(self.deployments):
            params: dict[str, Any] = {"model": deployment.model, "max_retries": 0}
            key = resolved_key(deployment.api_key, f"router.deployments.{index}.apiKey")
            if key is not None:
                keys[f"{credentials}-{index}"] = key
            optional = {
                "api_base": deployment.api_base,
                "litellm_credential_name": f"{credentials}-{index}" if key is not None else None,
                "rpm": deployment.rpm,
                "tpm": deployment.tpm,
                "weight": deployment.weight,
            }
            params.update({k: v for k, v in optional.items() if v is not None})
            model_list.append({"model_name": deployment.model_name, "litellm_params": params})
        arguments = {
            "model_list": model_list,
            "routing_strategy": self.routing_strategy,
            "num_retries": 0,
            "max_fallbacks": 0,
            "fallbacks": [],
            "disable_cooldowns": True,
        }
        return arguments, keys


class JudgeRouter:
    """The litellm ``Router`` of one verifier, built on first use, shared by its judges."""

    def __init__(self, config: RouterConfig) -> None:
        self.config = config
        self.groups = frozenset(config.groups)
        self._router: Any = None
        self._credentials = f"replyguard-{uuid.uuid4().hex[:12]}"
        self.resolved_keys: tuple[str, ...] = ()
        """Every deployment key a build read (the current and any rotated one), to redact."""

    def _build(self) -> Any:
        with _CREDENTIALS_LOCK:  # two loops (a task and run_sync) may ask at once
            if self._router is None:
                import litellm
                from litellm.models.credentials import CredentialItem
                from litellm.router import Router

                arguments, keys = self.config.router_arguments(self._credentials)
                self.resolved_keys = tuple(dict.fromkeys((*self.resolved_keys, *keys.values())))
                self._forget_credentials()
                litellm.credential_list.extend(
                    CredentialItem(
                        credential_name=name, credential_values={"api_key": key}, credential_info={}
                    )
                    for name, key in keys.items()
                )
                self._router = Router(**arguments)
            return self._router

    def _forget_credentials(self) -> None:
        litellm = sys.modules.get("litellm")
        if litellm is not None:
            mine = f"{self._credentials}-"
            litellm.credential_list[:] = [
                c for c in litellm.credential_list if not c.credential_name.startswith(mine)
            ]

    async def router(self) -> Any:
        """The Router, built the first time: ``litellm.router`` imported off the event loop,
        the Router constructed on it."""
        if self._router is None:
            await asyncio.to_thread(importlib.import_module, "litellm.router")
            self._build()
        return self._router

    def close(self) -> None:
        """Discard the Router (its callbacks, strategy selectors and their tasks, and keys);
        the next judgement builds a new one."""
        with _CREDENTIALS_LOCK:
            router, self._router = self._router, None
            self._forget_credentials()
        if router is not None:
            _retire(router)
            _drop_selectors(router)


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
