"""The judge call: one ``litellm.acompletion`` per model, fallbacks in order, cost and tokens.

The ``Judge`` protocol is what the runner needs: given a prompt and the time left, return the
judge's raw text and what it cost. ``LiteLLMJudge`` is the real one; ``replyguard.testing``
ships scripted ones. The runner owns the deadline (``asyncio.timeout``); this module passes the
time left to each provider call and turns off every hidden retry (``max_retries=0``), so the
deadline is the only clock.

An answer that carries no text (empty ``choices``, ``content: null``, tool calls only, a
refusal) is returned as empty text: the verdict parser then reads it as unreadable.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
import time
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from replyguard.config import VerifierConfig
from replyguard.context import JudgePrompt
from replyguard.errors import JudgeError
from replyguard.families import model_family
from replyguard.telemetry import Events, describe_error


class JudgeReply(BaseModel):
    """What one judgement returned (validated: a custom judge cannot smuggle in bad types)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str
    """The judge's raw text ("" when the answer carried none)."""
    model: str
    """The model that answered."""
    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)
    cost_usd: float = Field(default=0.0, ge=0)
    note: str | None = None
    """Why the text is empty, when the provider said (a refusal, tool calls only)."""


class Judge(Protocol):
    """Anything that can judge a prompt within ``time_left`` seconds."""

    async def judge(self, prompt: JudgePrompt, *, time_left: float) -> JudgeReply:
        """Return the judge's answer, or raise; the runner fails open on any exception."""
        ...


def _load_litellm() -> Any:
    # import_module waits on the import lock while another thread is importing litellm.
    module: Any = importlib.import_module("litellm")
    # Otherwise litellm prints a "Give Feedback / Get Help" banner to stdout on every provider
    # error, and a library must print nothing.
    module.suppress_debug_info = True
    return module


def _loaded_litellm() -> Any | None:
    """litellm if its import has finished (not merely started in another thread)."""
    module = sys.modules.get("litellm")
    if module is None or getattr(getattr(module, "__spec__", None), "_initializing", False):
        return None
    return module if getattr(module, "suppress_debug_info", False) else None


async def import_litellm() -> Any:
    """litellm, imported off the event loop the first time (the import takes seconds)."""
    return _loaded_litellm() or await asyncio.to_thread(_load_litellm)


async def close_litellm_clients() -> None:
    """Close litellm's cached HTTP clients of the running loop, if litellm was ever loaded."""
    module = sys.modules.get("litellm")
    if module is not None:
        await module.close_litellm_async_clients()


def _field(obj: Any, name: str) -> Any:
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def read_response(response: Any, model: str) -> JudgeReply:
    """The text, tokens and cost of a litellm response, whatever shape it came in."""
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
    if cost is None:
        cost = _completion_cost(response)
    return JudgeReply(
        text=text,
        model=str(_field(response, "model") or model),
        prompt_tokens=int(_field(usage, "prompt_tokens") or 0) if usage is not None else 0,
        completion_tokens=int(_field(usage, "completion_tokens") or 0) if usage is not None else 0,
        cost_usd=float(cost or 0.0),
        note=note,
    )


def _completion_cost(response: Any) -> float:
    litellm = sys.modules.get("litellm")
    if litellm is None:
        return 0.0
    try:
        return float(litellm.completion_cost(completion_response=response))
    except Exception:  # unknown model or price: the cost is unknown, not an error
        return 0.0


def _provider(model: str) -> str | None:
    """The route of a litellm model name: its prefix, or its family when it has none."""
    if "/" in model:
        return model.split("/", 1)[0].lower()
    return model_family(model)


class LiteLLMJudge:
    """The judge through litellm: the configured model, then each fallback on error.

    ``apiKey`` (and ``apiBase``) belong to the primary model's provider: a fallback on another
    provider gets them only when ``apiBase`` is set (a proxy serving every model); otherwise
    litellm reads that provider's own environment variables, and the key never leaves for a
    provider it was not issued by.
    """

    def __init__(self, config: VerifierConfig, events: Events) -> None:
        self._config = config
        self._events = events
        self._models = config.judge_models
        primary = _provider(config.model)
        self._own_credentials = {
            model: config.api_base is not None or _provider(model) == primary
            for model in self._models
        }

    async def warmup(self) -> None:
        """Import litellm (off the loop) so the first judgement's deadline is not spent on it."""
        await import_litellm()

    def request(
        self, model: str, prompt: JudgePrompt, *, timeout: float, api_key: str | None
    ) -> dict[str, Any]:
        """The keyword arguments of one ``litellm.acompletion`` call.

        A subclass may add litellm options here (the demo adds ``mock_response``).
        """
        params: dict[str, Any] = {
            "model": model,
            "messages": prompt.messages,
            "temperature": 0,
            "max_tokens": self._config.judge_max_tokens_for(model),
            "drop_params": True,
            "timeout": timeout,
            "max_retries": 0,
            "num_retries": 0,
        }
        if self._own_credentials.get(model, False):
            params["api_base"] = self._config.api_base
            params["api_key"] = api_key
        return params

    async def judge(self, prompt: JudgePrompt, *, time_left: float) -> JudgeReply:
        """Ask each model in turn until one answers; raise ``JudgeError`` if none does."""
        litellm = await import_litellm()
        api_key = self._config.resolve_api_key()
        secrets = (*self._events.secrets, *((api_key,) if api_key else ()))
        deadline = time.monotonic() + time_left
        failures: list[str] = []
        last: BaseException | None = None
        for model in self._models:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("the judgement's deadline passed before a model answered")
            try:
                response = await litellm.acompletion(
                    **self.request(model, prompt, timeout=remaining, api_key=api_key)
                )
            except Exception as exc:
                last = exc
                failures.append(f"{model}: {describe_error(exc, secrets)}")
                self._events.warning(
                    "judge_model_failed",
                    model=model,
                    error_class=type(exc).__name__,
                    status_code=getattr(exc, "status_code", None),
                    error=describe_error(exc, secrets),
                )
                continue
            return read_response(response, model)
        raise JudgeError(
            "; ".join(failures), last_error_class=type(last).__name__ if last else None
        )
