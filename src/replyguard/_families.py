"""Model-family detection from litellm model names, whatever the provider prefix.

A judge of the agent's own family shares its blind spots, so replyguard wants another family.
The family comes from the model's own name, not from the route: ``azure/gpt-4o`` is OpenAI and
``openai/claude-sonnet-4-5`` (through an OpenAI-compatible proxy) is Anthropic. Only when the
name says nothing is the provider prefix used (``anthropic/my-fine-tune``).
"""

from __future__ import annotations

import re

# Name tokens → family. Checked in order; the first family with a matching token wins.
_NAME_TOKENS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("anthropic", ("claude",)),
    ("openai", ("gpt", "chatgpt", "o1", "o3", "o4", "davinci", "babbage", "codex")),
    ("google", ("gemini", "gemma", "palm", "bison")),
    (
        "mistral",
        ("mistral", "mixtral", "codestral", "ministral", "pixtral", "magistral", "devstral"),
    ),
    ("meta", ("llama",)),
    ("deepseek", ("deepseek",)),
    ("qwen", ("qwen", "qwq")),
    ("xai", ("grok",)),
    ("cohere", ("command", "cohere", "aya")),
    ("amazon", ("nova", "titan")),
    ("microsoft", ("phi",)),
    ("ai21", ("jamba", "jurassic")),
    ("zhipu", ("glm",)),
    ("moonshot", ("kimi", "moonshot")),
    ("ibm", ("granite",)),
    ("nvidia", ("nemotron",)),
)

# Provider prefixes that imply a family when the name itself is not recognised.
_PROVIDER_FAMILIES: dict[str, str] = {
    "anthropic": "anthropic",
    "openai": "openai",
    "azure": "openai",
    "gemini": "google",
    "vertex_ai": "google",
    "mistral": "mistral",
    "deepseek": "deepseek",
    "xai": "xai",
    "cohere": "cohere",
    "cohere_chat": "cohere",
    "dashscope": "qwen",
    "ai21": "ai21",
    "moonshot": "moonshot",
}

_TOKEN_SPLIT = re.compile(r"[^a-z0-9]+")
_REASONING = re.compile(
    r"(?:^|[/:.\-_])(?:o[134](?:$|[\-_.])|gpt-5|gpt-oss|deepseek[.\-_]r1|deepseek-reasoner|"
    r"qwq|magistral|gemini-2\.5|gemini-3|grok-3-mini|grok-4|.*thinking)"
)


def _name_tokens(name: str) -> list[str]:
    return [t for t in _TOKEN_SPLIT.split(name.lower()) if t]


def _marks(token: str, marker: str) -> bool:
    # "llama3" and "gpt4o" carry their marker followed by a version number.
    if token == marker:
        return True
    return token.startswith(marker) and token[len(marker)].isdigit()


def model_family(model: str) -> str | None:
    """The family of a litellm model name, or None when it cannot be told."""
    lowered = model.strip().lower()
    if not lowered:
        return None
    provider, _, name = lowered.rpartition("/") if "/" in lowered else ("", "", lowered)
    tokens = _name_tokens(name)
    for family, markers in _NAME_TOKENS:
        if any(_marks(token, marker) for token in tokens for marker in markers):
            return family
    first = provider.split("/", 1)[0] if provider else ""
    return _PROVIDER_FAMILIES.get(first)


def is_reasoning_model(model: str) -> bool:
    """True for models that always think before answering (they need a larger token limit)."""
    name = model.strip().lower().rpartition("/")[2]
    return _REASONING.search(name) is not None
