"""The boundary to litellm: its lazy import (off the event loop), closing its clients, reading
a response (text, tokens, cost) and classifying a failure by its HTTP status.

Every call into litellm's module object goes through here or through the other modules of
``replyguard.judge`` (the router, the answer cap, the client scopes, prompt caching).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import sys
import threading
from collections.abc import Iterable
from typing import Any, Literal

from replyguard._families import model_family
from replyguard._forks import loading
from replyguard._frozen import assembled_from
from replyguard.judge._prompt_cache import look_up
from replyguard.judge._protocol import JudgeReply
from replyguard.judge._worker import stop_logging_worker

Failure = Literal["config", "timeout", "transient"]
"""What a failed judge call means: our configuration, a timeout, or a passing fault."""
# 4xx statuses that say "busy" or "try again", not "your request is wrong".
_BUSY_STATUSES = frozenset({408, 409, 429})


# What litellm loads lazily on its first call (litellm 1.110), done here with litellm itself,
# off the event loop, so that the first turn after ``warmup()`` (or the background preload)
# pays for none of it: a module (``module``), a lazy attribute (``module:attribute``), or a
# pydantic model whose validator is built on first use (``module:Model``). A name another
# litellm version lacks is skipped; what is skipped, the first call still does itself.
_FIRST_CALL = (
    # On the thread that calls, the event loop: its logging callback manager (about 0.4 s)
    # and the modules of the routes every call looks up.
    "litellm.litellm_core_utils.logging_callback_manager",
    "litellm._service_logger",
    "litellm.integrations.prometheus_services",
    "litellm.integrations.generic_api.generic_api_callback",
    "litellm.llms.litellm_proxy.chat.transformation",
    "litellm.llms.openai_like.dynamic_config",
    "litellm.llms.github_copilot.authenticator",
    "litellm.llms.github_copilot.github_host",
    "litellm.llms.github_copilot.per_user_auth",
    "litellm.llms.anthropic.completion.transformation",
    "litellm:logging_callback_manager",
    "litellm:LiteLLMProxyChatConfig",
    "litellm:EdenAIChatConfig",
    "litellm:FalAIChatConfig",
    # In its executor thread, holding the GIL all the same: the look-up of file ids in the
    # messages imports the proxy's types (about 30 modules, 0.2-0.4 s), the parameters and
    # the response are validated by models built on first use (about 40 ms), and the success
    # logging imports its savings tracker.
    "litellm.proxy.openai_files_endpoints.common_utils",
    "litellm.proxy.spend_tracking.savings",
    "litellm.types.router:GenericLiteLLMParams",
    "litellm.types.router:LiteLLM_Params",
    "litellm.types.utils:Message",
    "litellm.types.utils:Choices",
    "litellm.types.utils:ModelResponse",
    "litellm.types.utils:Usage",
    "litellm.types.utils:PromptTokensDetailsWrapper",
    "litellm.types.utils:CompletionTokensDetailsWrapper",
    "litellm.types.services:ServiceLoggerPayload",
)
# What one provider's route loads on its first call, beyond the above. Anthropic's counts
# tokens with litellm's own tokenizer (``cl100k_base``, 0.2-0.3 s to load), which an OpenAI
# judge never loads: so only a verifier with such a judge loads it early.
_FIRST_CALL_BY_ROUTE: dict[str, tuple[str, ...]] = {
    "anthropic": ("litellm.main:encoding",),
    "openai": (
        "litellm.llms.openai.chat.gpt_audio_transformation",
        "openai.types.chat.chat_completion:ChatCompletion",
        "openai.types.chat.chat_completion:Choice",
        "openai.types.chat.chat_completion_message:ChatCompletionMessage",
    ),
}
_importing = threading.Lock()


def first_use(name: str) -> None:
    """Do now what a first use of ``name`` would do (see ``_FIRST_CALL``); a failure is left
    to that first use. A model is built only where pydantic builds models thread-safely (from
    the version with its rebuild lock): otherwise a turn building it at the same time could
    see it half built."""
    module, _, attribute = name.partition(":")
    with contextlib.suppress(Exception):
        value = importlib.import_module(module)
        if attribute:
            value = getattr(value, attribute)
        deferred = isinstance(value, type) and value.__dict__.get("__pydantic_complete__") is False
        if deferred and _rebuilds_are_thread_safe():
            value.__pydantic_validator__.validate_python  # noqa: B018 - its first use builds it


@functools.cache
def _rebuilds_are_thread_safe() -> bool:
    import pydantic.main

    return hasattr(pydantic.main, "_rebuild_lock")


def load_litellm() -> Any:
    """litellm, imported in this thread (blocking: seconds the first time, once per process),
    with what its first call would otherwise load (``_FIRST_CALL``); one thread at a time."""
    # import_module alone would wait for another thread's import of litellm
    with loading(), _importing:
        module: Any = importlib.import_module("litellm")
        if not getattr(module, "suppress_debug_info", False):
            for name in _FIRST_CALL:
                first_use(name)
        # Otherwise litellm prints a "Give Feedback / Get Help" banner to stdout on every
        # provider error, and a library must print nothing. Set last: it marks the load done.
        module.suppress_debug_info = True
    return module


def load_routes(models: Iterable[str]) -> None:
    """What the routes of ``models`` load on their first call, and what the judge's first
    request looks up for them, done now in this thread (litellm imported first if need be)."""
    with loading():
        load_litellm()
        models = tuple(models)
        for route in {_provider(model) for model in models}:
            for name in _FIRST_CALL_BY_ROUTE.get(route or "", ()):
                first_use(name)
        look_up(models)
    _routes_loaded.update(models)


_routes_loaded: set[str] = set()
"""The models whose routes ``load_routes`` has loaded in this process."""


async def warm_routes(models: Iterable[str]) -> None:
    """``load_routes`` off the event loop, for the models not loaded yet (none: no thread)."""
    left = tuple(model for model in models if model not in _routes_loaded)
    if left:
        await asyncio.to_thread(load_routes, left)


def _loaded_litellm() -> Any | None:
    """litellm if its import has finished (not merely started in another thread)."""
    module = sys.modules.get("litellm")
    if module is None or getattr(getattr(module, "__spec__", None), "_initializing", False):
        return None
    return module if getattr(module, "suppress_debug_info", False) else None


async def import_litellm() -> Any:
    """litellm, imported off the event loop the first time (the import takes seconds)."""
    return _loaded_litellm() or await asyncio.to_thread(load_litellm)


async def close_litellm_clients() -> None:
    """Close every one of litellm's cached HTTP clients (everyone's, the process's: for a
    one-shot command, never for a verifier, which closes only its own ``ClientScope``)."""
    module = _loaded_litellm()
    if module is None:
        return
    await module.close_litellm_async_clients()
    await stop_logging_worker()


def _field(obj: Any, name: str) -> Any:
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def read_response(response: Any, model: str, unpriced: set[str] | None = None) -> JudgeReply:
    """The text, tokens and cost of a litellm response, whatever shape it came in.

    ``unpriced``: the caller's record of the models litellm's price map does not know (a
    failed lookup takes over a millisecond): such a model's cost is 0 without asking again,
    and a model whose lookup fails now is added to it.
    """
    choices = _field(response, "choices") or []
    text, note = "", None
    if not choices:
        note = "no choices in the response"
    else:
        message = _field(choices[0], "message")
        content = _field(message, "content") if message is not None else None
        if isinstance(content, str) and content.strip():
            text = content
        elif message is not None and _field(message, "refusal"):
            note = "the judge refused"
        elif message is not None and _field(message, "tool_calls"):
            note = "the judge answered with tool calls only"
        else:
            note = "the judge's message had no content"
    usage = _field(response, "usage")
    hidden = getattr(response, "_hidden_params", None) or {}
    cost = hidden.get("response_cost") if isinstance(hidden, dict) else None
    if cost is None and (unpriced is None or model not in unpriced):
        cost = _completion_cost(response)
        if cost is None and unpriced is not None:
            unpriced.add(model)
    fields = {
        "text": text,
        "model": str(_field(response, "model") or model),
        "prompt_tokens": int(_field(usage, "prompt_tokens") or 0) if usage is not None else 0,
        "completion_tokens": (
            int(_field(usage, "completion_tokens") or 0) if usage is not None else 0
        ),
        "cost_usd": float(cost or 0.0),
        "note": note,
    }
    return _reply(fields)


def _reply(fields: dict[str, Any]) -> JudgeReply:
    """``JudgeReply(**fields)`` of ``read_response``'s fields, without validating them again
    when they are valid as they are (texts of type ``str``, counts and cost not negative);
    anything else (a negative or NaN count, a ``str`` subclass) is validated as before."""
    if (
        type(fields["text"]) is str
        and type(fields["model"]) is str
        and fields["prompt_tokens"] >= 0
        and fields["completion_tokens"] >= 0
        and fields["cost_usd"] >= 0
    ):
        return assembled_from(JudgeReply, fields)
    return JudgeReply(**fields)


def _completion_cost(response: Any) -> float | None:
    """The response's cost from litellm's price map; None when the map cannot price it."""
    litellm = sys.modules.get("litellm")
    if litellm is None:
        return 0.0
    try:
        return float(litellm.completion_cost(completion_response=response))
    except Exception:  # unknown model or price: the cost is unknown, not an error
        return None


def supports_structured_verdict(model: str) -> bool:
    """True when litellm (once imported) says ``model`` accepts a JSON schema response format."""
    litellm = _loaded_litellm()
    if litellm is None:
        return False
    try:
        return bool(litellm.supports_response_schema(model=model))
    except Exception:  # an unknown model or a litellm bug: ask for text
        return False


def native_structured_format(model: str, response_format: dict[str, Any]) -> dict[str, Any] | None:
    """``{"output_format": ...}`` when litellm sends ``response_format`` to ``model`` as that
    alone (Anthropic's Messages API, a model with native structured output), else None.

    Sent so, the request is byte for byte the one litellm makes of ``response_format``, but
    litellm does not map the option again on every call: on Anthropic's route that mapping
    asks its model map about forced tools and thinking (three lookups, about 0.35 ms), then
    about native support, in the worker thread ``acompletion`` builds its request on: about
    0.7 ms of a 4.5 ms loopback call. Asked of litellm once per model; any doubt (another
    route, litellm's JSON tool, another litellm) is None, and ``response_format`` is sent.
    """
    litellm = _loaded_litellm()
    if litellm is None:
        return None
    try:
        name, provider, _, _ = litellm.get_llm_provider(model)
        if provider != "anthropic":
            return None
        from litellm.utils import get_optional_params

        mapped = get_optional_params(
            model=name, custom_llm_provider=provider, response_format=response_format
        )
    except Exception:  # another litellm, an unknown model: litellm maps it on every call
        return None
    if set(mapped) != {"output_format", "json_mode"} or mapped["json_mode"] is not True:
        return None  # the JSON tool, or more than the format: litellm's to build each time
    output_format = mapped["output_format"]
    if not isinstance(output_format, dict):
        return None
    return {"output_format": output_format}


@functools.cache  # a few model names per process, asked on every call
def _provider(model: str) -> str | None:
    """The route of a litellm model name: its prefix, or its family when it has none."""
    if "/" in model:
        return model.split("/", 1)[0].lower()
    return model_family(model)


def classify_failure(exc: BaseException) -> Failure:
    """What a failed judge call means, by its HTTP status (litellm's class names mislead).

    A 4xx status (but 408, 409 and 429) says the request itself is wrong: ``"config"``.
    Everything else (5xx and 529, 408, 409, 429, connection errors, no status at all) is
    ``"timeout"`` when it is a timeout (ours, or litellm's ``Timeout``) and ``"transient"``
    otherwise.
    """
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and 400 <= status < 500 and status not in _BUSY_STATUSES:
        return "config"
    if isinstance(exc, TimeoutError) or "timeout" in type(exc).__name__.lower():
        return "timeout"
    return "transient"


async def one_completion(request: dict[str, Any]) -> JudgeReply:
    """One ``litellm.acompletion`` for a one-shot command, read as a judge's answer; the
    process's litellm clients are closed after it. Raises on any failure."""
    litellm = await import_litellm()
    try:
        response = await litellm.acompletion(**request)
    finally:
        await close_litellm_clients()
    return read_response(response, request["model"])
