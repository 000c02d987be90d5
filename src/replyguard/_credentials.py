"""Whether each judge model a config can call has credentials, told without importing litellm.

litellm finds a model's key in what the call passes (the config's ``apiKey`` and ``apiBase``,
or a router deployment's) or else in its provider's environment variables. ``PROVIDER_KEYS``
is our own table of those variables, by provider (a test checks it against litellm's own
``validate_environment``), so ``replyguard check-config`` and a ``Verifier`` can tell a judge
that would fail every call for want of a key in under a millisecond, not after litellm's import and
an HTTP error.

A model has credentials when any of these holds:

- the call passes an ``apiKey`` (a literal key, or ``env:NAME`` with ``NAME`` set): the
  config's own for the models it applies to (``apiBase`` set, or the provider of ``model``;
  see ``LiteLLMJudge``), a deployment's for a router group;
- the call passes an ``apiBase``: the endpoint is the operator's (a proxy, a gateway, a local
  server), which may need no key at all, and only that endpoint can say. Not on the routes
  whose client refuses to send without a key whatever the endpoint (``KEY_ALWAYS``: OpenAI,
  Anthropic, Gemini, Azure): a proxy that takes none needs a placeholder ``apiKey`` there;
- its provider needs no key (``KEYLESS``: ollama, vLLM, LM Studio, ...);
- its provider's variables are set (any one alternative of ``PROVIDER_KEYS``, every variable
  of it non-empty);
- its provider is none we know (``vertex_ai`` and ``bedrock`` read their cloud's credential
  chain, files and metadata servers included; a bare name litellm may not know): not checked.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from pydantic import SecretStr

from replyguard._families import model_family
from replyguard.config._keys import ENV_PREFIX
from replyguard.config._schema import VerifierConfig

PROVIDER_KEYS: Mapping[str, tuple[tuple[str, ...], ...]] = {
    "openai": (("OPENAI_API_KEY",),),
    "anthropic": (("ANTHROPIC_API_KEY",), ("ANTHROPIC_AUTH_TOKEN",)),
    "azure": (("AZURE_API_KEY", "AZURE_API_BASE"),),
    "gemini": (("GEMINI_API_KEY",), ("GOOGLE_API_KEY",)),
    "mistral": (("MISTRAL_API_KEY",),),
    "cohere": (("COHERE_API_KEY",),),
    "groq": (("GROQ_API_KEY",),),
    "xai": (("XAI_API_KEY",),),
    "deepseek": (("DEEPSEEK_API_KEY",),),
    "openrouter": (("OPENROUTER_API_KEY",),),
    "together_ai": (("TOGETHERAI_API_KEY",),),
    "fireworks_ai": (
        ("FIREWORKS_AI_API_KEY",),
        ("FIREWORKS_API_KEY",),
        ("FIREWORKSAI_API_KEY",),
        ("FIREWORKS_AI_TOKEN",),
    ),
    "perplexity": (("PERPLEXITYAI_API_KEY",),),
    "cerebras": (("CEREBRAS_API_KEY",),),
    "dashscope": (("DASHSCOPE_API_KEY",),),
    "moonshot": (("MOONSHOT_API_KEY",),),
    "nvidia_nim": (("NVIDIA_NIM_API_KEY",),),
    "deepinfra": (("DEEPINFRA_API_KEY",),),
    "huggingface": (("HUGGINGFACE_API_KEY",),),
    "replicate": (("REPLICATE_API_KEY",),),
    "ai21": (("AI21_API_KEY",),),
}
"""Each provider's environment variables, by litellm's provider name: alternatives, any one of
which gives a key when every variable in it is set (Azure needs its endpoint too)."""

KEY_ALWAYS = frozenset({"openai", "anthropic", "gemini", "azure"})
"""Providers whose client refuses to send a request without a key, even to an ``apiBase``."""

KEYLESS = frozenset({"ollama", "ollama_chat", "hosted_vllm", "vllm", "lm_studio", "llamafile"})
"""Providers served from the operator's own machines, which need no key."""


def provider(model: str) -> str | None:
    """litellm's provider of ``model``: its prefix, or for a bare name of the OpenAI or
    Anthropic family (``gpt-4o``, ``claude-sonnet-4-5``) that company; None when it cannot be
    told without litellm."""
    if "/" in model:
        return model.split("/", 1)[0].strip().lower()
    family = model_family(model)
    return family if family in ("openai", "anthropic") else None


def _route(model: str) -> str | None:
    """The route ``LiteLLMJudge`` compares to tell whose ``apiKey`` a model may get."""
    return model.split("/", 1)[0].lower() if "/" in model else model_family(model)


def _found(alternatives: tuple[tuple[str, ...], ...]) -> bool:
    return any(all(os.environ.get(name) for name in names) for names in alternatives)


@dataclass(frozen=True)
class MissingCredentials:
    """A judge model that would be called without a key: which, where, and what to set."""

    model: str
    """The model litellm would call (a router deployment's own model for a group)."""
    key: str
    """Where the config names it: ``model``, ``fallbackModels``, ``runKinds.NAME.model``,
    ``panel.models``, ``router.deployments.3``, ..."""
    alternatives: tuple[tuple[str, ...], ...]
    """The environment variables that would give it one: any one tuple, every variable set."""
    api_key: str | None = None
    """The config key of the ``apiKey`` (``env:NAME``) whose variable is unset, when that is
    what it lacks (``apiKey``, ``router.deployments.0.apiKey``)."""

    @property
    def from_api_key(self) -> bool:
        """Whether it lacks the variable a configured ``apiKey`` reads."""
        return self.api_key is not None

    @property
    def variables(self) -> tuple[str, ...]:
        """What to set: the first alternative."""
        return self.alternatives[0]

    @property
    def message(self) -> str:
        """For a person: the model and the variable, never a value."""
        names = " and ".join(self.variables)
        if self.api_key is not None:
            return (
                f"judge model {self.model!r} has no key: environment variable {names} is not "
                f"set ({self.api_key})"
            )
        others = ", ".join(" and ".join(names) for names in self.alternatives[1:])
        instead = f" (or {others})" if others else ""
        return (
            f"judge model {self.model!r} has no credentials: set {names}{instead}, or give "
            "it an apiKey in the config"
        )

    def still_missing(self) -> bool:
        """Whether it still has none, reading the environment now."""
        return not _found(self.alternatives)


def _lacking(
    model: str, key: str, api_key: SecretStr | None, api_base: str | None, api_key_key: str
) -> MissingCredentials | None:
    """What ``model`` lacks when its call passes ``api_key`` (the config's key
    ``api_key_key``) and ``api_base``, if anything."""
    if api_key is not None:
        raw = api_key.get_secret_value()
        name = raw[len(ENV_PREFIX) :].strip() if raw.startswith(ENV_PREFIX) else ""
        if not name or os.environ.get(name):
            return None
        return MissingCredentials(model, key, ((name,),), api_key=api_key_key)
    route = provider(model)
    if route is None or route in KEYLESS or (api_base is not None and route not in KEY_ALWAYS):
        return None
    alternatives = PROVIDER_KEYS.get(route)
    if alternatives is not None and api_base is not None:  # the endpoint is given: a key is not
        alternatives = tuple(
            tuple(v for v in names if not v.endswith("_API_BASE")) for names in alternatives
        )
    if alternatives is None or _found(alternatives):
        return None
    return MissingCredentials(model, key, alternatives)


def _deployments(config: VerifierConfig, group: str) -> Iterator[tuple[int, str]]:
    assert config.router is not None
    for index, deployment in enumerate(config.router.deployments):
        if deployment.model_name == group:
            yield index, deployment.model


def model_lacks(
    config: VerifierConfig, owner: str, model: str, key: str
) -> list[MissingCredentials]:
    """What each model behind the judge model ``model`` lacks, as ``LiteLLMJudge`` calls it
    under ``config`` with the key issued for ``owner``'s provider (the verifier's ``model``):
    a router group's deployments with their own key and endpoint, any other model with the
    config's ``apiKey`` and ``apiBase`` when they apply to it."""
    router = config.router
    if router is not None and model in router.groups:
        found = []
        for index, deployed in _deployments(config, model):
            deployment = router.deployments[index]
            where = f"router.deployments.{index}"
            missing = _lacking(
                deployed, where, deployment.api_key, deployment.api_base, f"{where}.apiKey"
            )
            found += [missing] if missing is not None else []
        return found
    own = config.api_base is not None or _route(model) == _route(owner)
    missing = _lacking(
        model, key, config.api_key if own else None, config.api_base if own else None, "apiKey"
    )
    return [missing] if missing is not None else []


def _named_models(config: VerifierConfig, prefix: str) -> Iterator[tuple[str, str]]:
    """``(key, model)`` for every judge model ``config`` names, in the order they are tried."""
    if config.panel is not None:
        for member in config.panel.members:
            for model in (member.model, *member.fallback_models):
                yield f"{prefix}panel.models", model
        return
    yield f"{prefix}model", config.model
    for model in config.fallback_models:
        yield f"{prefix}fallbackModels", model


def missing_credentials(config: VerifierConfig) -> list[MissingCredentials]:
    """Every model the config can call that has no credentials, each once, in key order: the
    verifier's judge, fallbacks and panel members, then each run kind's, router groups
    expanded to their deployments (none of a profile whose ``judgeAfterChecks`` is
    ``"never"``)."""
    found: dict[tuple[str, str], MissingCredentials] = {}
    for name in (None, *config.run_kinds):
        profile = config.for_run_kind(name)
        if profile.judge_after_checks == "never":  # its checks decide alone: no judge call
            continue
        prefix = f"runKinds.{name}." if name is not None else ""
        for key, model in _named_models(profile, prefix):
            for missing in model_lacks(profile, config.model, model, key):
                deployment = missing.key if missing.key.startswith("router.") else ""
                found.setdefault((missing.model, deployment), missing)
    return list(found.values())


@dataclass(frozen=True)
class CredentialGate:
    """The judge models a profile calls first (its model, or each panel member's) that had no
    credentials when the verifier was built, checked again on every turn (a key set since
    counts). A turn whose judge has none fails open at once (``missing_credentials``)."""

    firsts: tuple[str, ...]
    """The models the profile's judgement calls first: its model, or each panel member's."""
    missing: Mapping[str, tuple[MissingCredentials, ...]]
    """Each of them found without, with what every model behind it lacks (a group's every
    deployment)."""

    @classmethod
    def build(cls, config: VerifierConfig, owner: str) -> CredentialGate | None:
        """The gate of a profile's ``config`` (a run kind's, or the verifier's own), with the
        verifier's model ``owner``; None when every first model has credentials."""
        if config.judge_after_checks == "never":
            return None
        panel = config.panel
        firsts = tuple(m.model for m in panel.members) if panel is not None else (config.model,)
        missing: dict[str, tuple[MissingCredentials, ...]] = {}
        for model in firsts:
            lacks = model_lacks(config, owner, model, "model")
            behind = config.underlying_models(model)
            if lacks and len(lacks) == len(behind):  # a group: only when every deployment lacks
                missing[model] = tuple(lacks)
        return cls(firsts, missing) if missing else None

    def lacking(self, model: str) -> MissingCredentials | None:
        """What judge model ``model`` lacks now, or None when it has credentials."""
        lacks = self.missing.get(model)
        if not lacks or not all(missing.still_missing() for missing in lacks):
            return None
        return lacks[0]

    def blocking(self) -> MissingCredentials | None:
        """What the first of them lacks when every one lacks a key now (the judgement cannot
        call any), else None."""
        lacks = [self.lacking(model) for model in self.firsts]
        return lacks[0] if all(lacks) else None
