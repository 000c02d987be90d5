"""The ``router`` config section: judge deployments behind one litellm ``Router``.

The section lists judge deployments (each in a model group, with its own model, endpoint, key
and rate limits) and how to balance load across a group. ``model`` (and any fallback model)
may then name a group. ``replyguard.judge._router`` builds the Router from it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, field_validator

from replyguard.config._checks import FILE_MODEL
from replyguard.config._keys import ENV_PREFIX, ApiKey, key_values, resolved_key

RoutingStrategy = Literal[
    "simple-shuffle",
    "least-busy",
    "usage-based-routing-v2",
    "latency-based-routing",
    "cost-based-routing",
]
PerMinute = Annotated[int, Field(ge=1)]


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

    def router_arguments(
        self, credentials: str, *, redis_url: str | None = None, redis_timeout: float | None = None
    ) -> tuple[dict[str, Any], dict[str, str]]:
        """The keyword arguments of ``litellm.Router``, and the keys (resolved now) by the
        credential names the deployments refer to (``{credentials}-{index}``).

        The Router logs its deployments at DEBUG, so they name their key instead of holding it;
        litellm looks the name up in ``litellm.credential_list`` when it sends the request.
        Each deployment gets an id derived from its settings (``deployment_id``), the same in
        every process, since litellm keys its rpm and tpm counters by it; with ``redis_url``
        those counters are kept there, fleet-wide, and ``redis_timeout`` (seconds) bounds each
        of the Router's Redis calls (its socket and connect timeouts, which litellm's Redis
        clients, redis-py and its native one, both take; litellm's default is 5 s).
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
            model_list.append(
                {
                    "model_name": deployment.model_name,
                    "litellm_params": params,
                    "model_info": {"id": deployment_id(deployment, index)},
                }
            )
        arguments: dict[str, Any] = {
            "model_list": model_list,
            "routing_strategy": self.routing_strategy,
            "num_retries": 0,
            "max_fallbacks": 0,
            "fallbacks": [],
            "disable_cooldowns": True,
        }
        if redis_url is not None:
            arguments["redis_url"] = redis_url
            if redis_timeout is not None:
                bound = {"socket_timeout": redis_timeout, "socket_connect_timeout": redis_timeout}
                arguments["cache_kwargs"] = bound
        return arguments, keys


def deployment_id(deployment: Deployment, index: int) -> str:
    """A deployment's id: a digest of its place and settings (its key's reference, never the
    key), so every process of a fleet gives the same deployment the same id."""
    key = deployment.api_key.get_secret_value() if deployment.api_key is not None else ""
    reference = key if key.startswith(ENV_PREFIX) else hashlib.sha256(key.encode()).hexdigest()
    settings = [
        index,
        deployment.model_name,
        deployment.model,
        deployment.api_base,
        reference,
        deployment.rpm,
        deployment.tpm,
    ]
    digest = hashlib.sha256(json.dumps(settings).encode()).hexdigest()
    return f"replyguard-{digest[:20]}"
