"""What one litellm judge sends each of its models, resolved once when the judge is built.

Per model: its answer's token limit, whether it gets the configured ``apiBase`` and ``apiKey``
(the primary model's provider, or every model behind a proxy), whether it goes through the
Router; asked of litellm once it is loaded: whether it takes the verdict's JSON schema, and in
what form. A model that refuses an option it does not need (a 400 naming ``temperature``,
``response_format`` or ``output_format``) is asked again without it, and never sent it again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from replyguard.config._keys import literal_key
from replyguard.config._schema import VerifierConfig
from replyguard.context._prompt import JudgePrompt
from replyguard.errors import ConfigError, JudgeConfigError
from replyguard.judge._litellm import (
    _loaded_litellm,
    _provider,
    native_structured_format,
    supports_structured_verdict,
)
from replyguard.judge._prompt_cache import with_cached_system
from replyguard.judge._protocol import verdict_format
from replyguard.judge._streamed import verdict_first_messages
from replyguard.telemetry._events import Events, describe_error

# The HTTP client's own timeout runs this much past the judgement's deadline, so the deadline
# (enforced by the judge, always first) decides, and a slow call is a timeout, never a client
# error.
_CLIENT_TIMEOUT_MARGIN = 2.0
# What a judgement can do without: a model that refuses one is asked again without it. (Not
# litellm's ``drop_params``: on every call it costs about 2 % of a loopback call's time.)
# ``output_format`` is the verdict schema in Anthropic's own form (``_format_params``).
_OPTIONAL = ("temperature", "response_format", "output_format")
_FORMAT_OPTIONS = frozenset({"response_format", "output_format"})


class RequestPlan:
    """The keyword arguments of each model's ``litellm.acompletion`` call, and sending them."""

    def __init__(
        self,
        config: VerifierConfig,
        events: Events,
        *,
        routed: frozenset[str],
        key_owner: str | None,
    ) -> None:
        """``routed``: the models that name one of the Router's groups; ``key_owner``: the
        model whose provider issued ``apiKey`` (default: ``config.model``)."""
        self._config = config
        self._events = events
        self._routed = routed
        self._structured: dict[str, bool] = {}  # per model, asked of litellm once
        self._formats: dict[str, dict[str, Any]] = {}  # the schema's option, per model
        self._refused: dict[str, frozenset[str]] = {}  # options a model refused (send)
        self._templates: dict[str, dict[str, Any]] = {}  # per model: ``_template``
        self.verdict_first = config.judge_answer == "verdict_first"
        """Whether the judge is asked for its verdict first, its answer streamed
        (``judge/_streamed``)."""
        self._format = verdict_format(tuple(config.categories), self.verdict_first)
        models = config.judge_models
        self._max_tokens = {model: config.judge_max_tokens_for(model) for model in models}
        self.underlying = {model: config.underlying_models(model) for model in models}
        """The models behind each judge model (``underlying_models``), resolved once."""
        primary = _provider(key_owner or config.model)
        self._own_credentials = {
            model: model not in routed
            and (config.api_base is not None or _provider(model) == primary)
            for model in models
        }
        self._literal_key = _literal(config)
        self.client_timeout = config.timeout_seconds + _CLIENT_TIMEOUT_MARGIN
        """The timeout litellm's HTTP client gets: past the judgement's deadline, which
        decides."""

    def params(
        self, model: str, prompt: JudgePrompt, *, timeout: float, api_key: str | None
    ) -> dict[str, Any]:
        """The keyword arguments of one ``litellm.acompletion`` call to ``model``: a new dict
        each call (the caller may add to it), its options copied from the model's template."""
        template = self._templates.get(model) or self._template(model)
        params = dict(template)
        messages = prompt.messages
        if self.verdict_first:
            messages = verdict_first_messages(messages)
            params["stream_options"] = {"include_usage": True}
        params["messages"] = with_cached_system(self.models_behind(model), messages)
        params["timeout"] = timeout
        if "api_key" in params:
            params["api_key"] = api_key
        return params

    def _template(self, model: str) -> dict[str, Any]:
        """What every call to ``model`` sends, in the order it is sent, ``messages``,
        ``timeout``, ``api_key`` and ``stream_options`` left for each call (``params``);
        kept once litellm is loaded (before that, whether the verdict's schema is sent is a
        guess), until the model refuses an option (``send``)."""
        config = self._config
        settled = _loaded_litellm() is not None
        refused = self._refused.get(model, frozenset())
        template: dict[str, Any] = {
            "model": model,
            "messages": None,
            "max_tokens": self._max_tokens.get(model) or config.judge_max_tokens_for(model),
            "timeout": None,
            "max_retries": 0,
            "num_retries": 0,
        }
        if "temperature" not in refused:
            template["temperature"] = 0
        if not refused & _FORMAT_OPTIONS and self._wants_structured(model):
            template.update(self._format_params(model))
        if self._own_credentials.get(model, False):
            template["api_base"] = config.api_base
            template["api_key"] = None
        if self.verdict_first:
            template["stream"] = True
            template["stream_options"] = None
        if settled:
            self._templates[model] = template
        return template

    def models_behind(self, model: str) -> tuple[str, ...]:
        """The models behind ``model`` (a router group's deployments, or itself)."""
        return self.underlying.get(model) or self._config.underlying_models(model)

    async def send(
        self, call: Callable[..., Awaitable[Any]], model: str, params: dict[str, Any]
    ) -> Any:
        """One call of ``params``; when the model refuses an option it does not need (a 400
        naming ``temperature`` or ``response_format``: litellm's own ``UnsupportedParamsError``
        for ``temperature=0`` on an o-series model, or the provider's), the same call again
        without it; once that call is answered, the model is never sent the option again."""
        try:
            return await call(**params)
        except Exception as exc:
            refused = _refused_options(exc, params)
            if not refused:
                raise
        response = await call(**_without(params, refused))
        self._refused[model] = self._refused.get(model, frozenset()) | refused
        self._templates.pop(model, None)  # made again without the refused options
        self._events.debug("judge_option_refused", model=model, options=sorted(refused))
        return response

    def api_key(self) -> str | None:
        """The configured ``apiKey``, its ``env:`` variable read now; ``JudgeConfigError``
        (logged) when it cannot be."""
        if self._literal_key is not None:
            return self._literal_key
        try:
            return self._config.resolve_api_key()
        except ConfigError as exc:
            raise self.misconfigured(exc) from None

    def misconfigured(self, exc: ConfigError) -> JudgeConfigError:
        """Log a configuration error found at call time; the error to raise for it."""
        error = describe_error(exc, self._events.secrets)
        self._events.error(
            "judge_misconfigured",
            model=self._config.model,
            status_code=None,
            error_class=type(exc).__name__,
            error=error,
        )
        return JudgeConfigError(error, last_error_class=type(exc).__name__)

    def _wants_structured(self, model: str) -> bool:
        known = self._structured.get(model)
        if known is None:
            underlying = self._config.underlying_models(model)
            known = all(map(supports_structured_verdict, underlying))
            if _loaded_litellm() is not None:  # before litellm is loaded the answer is a guess
                self._structured[model] = known
        return known

    def _format_params(self, model: str) -> dict[str, Any]:
        """How the verdict schema is sent to ``model``: as ``response_format``, or, on
        Anthropic's route, as the ``output_format`` litellm makes of it (the same request,
        without litellm mapping it again on every call: ``native_structured_format``)."""
        known = self._formats.get(model)
        if known is None:
            native = None
            if model not in self._routed:
                native = native_structured_format(model, self._format)
            known = native or {"response_format": self._format}
            if _loaded_litellm() is not None:
                self._formats[model] = known
        return known


def _literal(config: VerifierConfig) -> str | None:
    """``config``'s ``apiKey`` when it is the key itself (the same on every call); None when
    it is unset or an ``env:`` reference, or ``config`` a host's subclass that resolves its
    key itself (each read on each call: ``api_key``)."""
    if type(config).resolve_api_key is not VerifierConfig.resolve_api_key:
        return None
    return literal_key(config.api_key)


def _refused_options(exc: Exception, params: dict[str, Any]) -> frozenset[str]:
    """The optional parameters of ``params`` a 400 names: what the model refuses."""
    if getattr(exc, "status_code", None) != 400:
        return frozenset()
    text = str(exc)
    return frozenset(name for name in _OPTIONAL if name in params and name in text)


def _without(params: dict[str, Any], refused: frozenset[str]) -> dict[str, Any]:
    """``params`` without the ``refused`` options."""
    return {key: value for key, value in params.items() if key not in refused}
