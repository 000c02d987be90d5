"""Model families and reasoning models, told from litellm model names."""

from __future__ import annotations

import pytest

from replyguard._families import is_reasoning_model, model_family


@pytest.mark.parametrize(
    ("model", "family"),
    [
        # OpenAI, whatever the route
        ("gpt-4o", "openai"),
        ("openai/gpt-4o-mini", "openai"),
        ("azure/gpt-4o", "openai"),
        ("azure/o1-preview", "openai"),
        ("openai/o3", "openai"),
        ("o4-mini", "openai"),
        ("gpt-5", "openai"),
        ("chatgpt-4o-latest", "openai"),
        ("openrouter/openai/o3-mini", "openai"),
        # Anthropic, also through an OpenAI-compatible proxy and on cloud platforms
        ("anthropic/claude-sonnet-4-5", "anthropic"),
        ("claude-3-5-haiku-20241022", "anthropic"),
        ("openai/claude-sonnet-4-5", "anthropic"),
        ("bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0", "anthropic"),
        ("bedrock/us.anthropic.claude-3-7-sonnet-20250219-v1:0", "anthropic"),
        ("vertex_ai/claude-3-5-sonnet@20240620", "anthropic"),
        # Google
        ("gemini/gemini-2.5-pro", "google"),
        ("vertex_ai/gemini-1.5-flash", "google"),
        ("gemini-2.0-flash", "google"),
        # Meta
        ("groq/llama3-70b-8192", "meta"),
        ("groq/llama-3.1-8b-instant", "meta"),
        ("together_ai/meta-llama/Llama-3-70b-chat-hf", "meta"),
        ("ollama/llama3", "meta"),
        # Mistral
        ("mistral/mistral-large-latest", "mistral"),
        ("mistral/codestral-latest", "mistral"),
        ("groq/mixtral-8x7b-32768", "mistral"),
        # DeepSeek
        ("deepseek/deepseek-chat", "deepseek"),
        ("openrouter/deepseek/deepseek-r1", "deepseek"),
        # Qwen
        ("dashscope/qwen-max", "qwen"),
        ("openrouter/qwen/qwen-2.5-72b-instruct", "qwen"),
        # xAI
        ("xai/grok-2", "xai"),
        ("xai/grok-4", "xai"),
        # Cohere
        ("cohere/command-r", "cohere"),
        ("cohere/command-r-plus", "cohere"),
        # the name says nothing: the provider prefix decides
        ("openai/my-fine-tune", "openai"),
        ("anthropic/my-fine-tune", "anthropic"),
        # unknown
        ("my-custom-model", None),
        ("huggingface/bigscience/bloom", None),
        ("omni-moderation-latest", None),
        ("", None),
        ("   ", None),
    ],
)
def test_model_family(model: str, family: str | None) -> None:
    assert model_family(model) == family


@pytest.mark.parametrize("model", ["Azure/GPT-4o", "  azure/gpt-4o  ", "AZURE/GPT-4O"], ids=repr)
def test_model_family_ignores_case_and_surrounding_space(model: str) -> None:
    assert model_family(model) == "openai"


@pytest.mark.parametrize(
    ("model", "reasoning"),
    [
        ("o1", True),
        ("o1-mini", True),
        ("azure/o1-preview", True),
        ("o3-mini", True),
        ("openai/o3", True),
        ("openrouter/openai/o3-mini", True),
        ("o4-mini", True),
        ("gpt-5", True),
        ("openai/gpt-5-mini", True),
        ("deepseek/deepseek-reasoner", True),
        ("openrouter/deepseek/deepseek-r1", True),
        ("bedrock/us.deepseek.r1-v1:0", True),
        ("groq/openai/gpt-oss-120b", True),
        ("groq/qwen-qwq-32b", True),
        ("mistral/magistral-medium-2506", True),
        ("gemini/gemini-2.5-pro", True),
        ("gemini/gemini-2.5-flash", True),
        ("xai/grok-3-mini", True),
        ("xai/grok-4", True),
        ("claude-3-7-sonnet-thinking", True),
        ("gpt-4o", False),
        ("azure/gpt-4o", False),
        ("gpt-4.1", False),
        ("anthropic/claude-sonnet-4-5", False),
        ("gemini/gemini-2.0-flash", False),
        ("deepseek/deepseek-chat", False),
        ("xai/grok-3", False),
        ("groq/llama3-70b-8192", False),
        ("mistral/mistral-large-latest", False),
        ("my-custom-model", False),
        ("", False),
    ],
)
def test_is_reasoning_model(model: str, reasoning: bool) -> None:
    assert is_reasoning_model(model) is reasoning
