"""Our table of each provider's key variables (``replyguard._credentials``) agrees with what
litellm knows: its ``validate_environment`` names our variable when none is set and is
satisfied by each alternative of ours, the providers we call keyless ask for no key, a bare
model name gets litellm's provider, and the routes we say need a key even with an ``apiBase``
are the ones litellm refuses to send without one. (litellm is imported here, in the test only:
the check itself never imports it.)"""

from __future__ import annotations

from typing import Any

import pytest

from replyguard._credentials import KEY_ALWAYS, KEYLESS, PROVIDER_KEYS, provider

# What litellm's own check asks for beyond a key, which its call defaults when unset.
LITELLM_DEFAULTS = frozenset({"AZURE_API_VERSION"})
DEAD_ENDPOINT = "http://127.0.0.1:9"


@pytest.fixture(scope="module")
def litellm() -> Any:
    import litellm

    return litellm


@pytest.fixture
def no_keys(monkeypatch: pytest.MonkeyPatch, litellm: Any) -> pytest.MonkeyPatch:
    """An environment without any variable our table or litellm's check names."""
    names = {name for alternatives in PROVIDER_KEYS.values() for a in alternatives for name in a}
    for route in (*PROVIDER_KEYS, *KEYLESS):
        names |= set(litellm.validate_environment(f"{route}/judge")["missing_keys"])
    for name in names | LITELLM_DEFAULTS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize("route", sorted(PROVIDER_KEYS))
def test_each_providers_variables_are_litellms(
    route: str, litellm: Any, no_keys: pytest.MonkeyPatch
) -> None:
    model = f"{route}/judge-model"
    assert litellm.get_llm_provider(model)[1] == route == provider(model)
    checked = litellm.validate_environment(model)
    assert checked["keys_in_environment"] is False
    first = PROVIDER_KEYS[route][0]
    assert set(first) <= set(checked["missing_keys"]), checked["missing_keys"]
    for alternative in PROVIDER_KEYS[route]:
        with pytest.MonkeyPatch.context() as env:
            for name in (*alternative, *(LITELLM_DEFAULTS & set(checked["missing_keys"]))):
                env.setenv(name, "placeholder")
            assert litellm.validate_environment(model)["keys_in_environment"], alternative


@pytest.mark.parametrize("route", sorted(KEYLESS))
def test_keyless_providers_ask_for_no_key(
    route: str, litellm: Any, no_keys: pytest.MonkeyPatch
) -> None:
    asked = litellm.validate_environment(f"{route}/llama")["missing_keys"]
    assert not [name for name in asked if name.endswith(("_KEY", "_TOKEN"))]


@pytest.mark.parametrize(
    "model", ["gpt-4o", "gpt-4o-mini", "o3-mini", "gpt-5", "claude-sonnet-4-5", "gemini-2.5-pro"]
)
def test_a_bare_name_gets_litellms_provider_or_none(model: str, litellm: Any) -> None:
    ours = provider(model)
    assert ours is None or ours == litellm.get_llm_provider(model)[1]
    assert ours is not None or litellm.get_llm_provider(model)[1] not in PROVIDER_KEYS


@pytest.mark.parametrize(
    "route", sorted({*KEY_ALWAYS, "mistral", "groq", "deepseek", "xai", "openrouter"})
)
def test_an_api_base_replaces_a_key_only_where_litellm_sends_without_one(
    route: str, litellm: Any, no_keys: pytest.MonkeyPatch
) -> None:
    with pytest.raises(Exception) as raised:  # noqa: PT011 - each provider raises its own class
        litellm.completion(
            model=f"{route}/judge-model",
            messages=[{"role": "user", "content": "hi"}],
            api_base=DEAD_ENDPOINT,
            max_retries=0,
            timeout=10,
        )
    text = str(raised.value).lower()
    refused = "missing" in text and ("key" in text or "credentials" in text)
    assert refused == (route in KEY_ALWAYS), text[:300]
