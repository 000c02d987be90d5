"""A fresh process: concurrent first turns all wait for litellm's one import, none fail open;
building a verifier starts that import (and the tokenizer's load) in a background thread; a
first turn waits for the tokenizer only when its prompt needs tokens."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]
# Fresh interpreters, each importing litellm (3-8 s a test): `.ci/run` runs them in its slow step.
pytestmark = pytest.mark.slow

TESTS = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent(
    """
    import asyncio, sys
    from support.provider_server import ProviderServer, Step
    from replyguard import Turn, Verifier, VerifierConfig

    async def main(url):
        assert "litellm" not in sys.modules
        config = VerifierConfig(
            enabled=True, verify_all=True, model="openai/gpt-4o-mini", api_base=url,
            api_key="sk-test-cold-start-0000000000", agent_model="anthropic/claude-sonnet-4-5",
            timeout_seconds=5.0,
        )
        verifier = Verifier(config)
        async def turn(i):
            await asyncio.sleep(i * 0.05)  # staggered: later turns arrive mid-import
            return await verifier.run(lambda m: f"reply {i}", Turn(user_message=f"q{i}"))
        outcomes = await asyncio.gather(*(turn(i) for i in range(10)))
        await verifier.aclose()
        print(sorted({o.status.value for o in outcomes}))

    with ProviderServer(default=Step(text="PASS")) as server:
        asyncio.run(main(server.url))
    """
)


def run_script(script: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=TESTS,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Exception ignored" not in result.stderr, result.stderr[-2000:]
    return result.stdout.strip()


def test_concurrent_first_turns_in_a_fresh_process_all_reach_the_judge() -> None:
    assert run_script(SCRIPT) == "['passed']"


PRELOAD = textwrap.dedent(
    """
    import sys, threading, time
    import importlib.abc
    from replyguard import Verifier, VerifierConfig
    from replyguard.testing import ScriptedJudge

    importers = {{}}

    class Watch(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name in ("litellm", "tiktoken"):
                importers.setdefault(name, threading.current_thread().name)
            return None

    sys.meta_path.insert(0, Watch())
    config = VerifierConfig(model="openai/gpt-4o-mini", agent_model="anthropic/claude-sonnet-4-5")
    {build}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (len(importers) < {expected} or (
        "litellm" in importers and not hasattr(sys.modules.get("litellm"), "acompletion")
    )):
        time.sleep(0.05)
    time.sleep(0.2)
    print(sorted(importers.items()), threading.current_thread().name)
    """
)


def preloaded(build: str, expected: int) -> str:
    return run_script(PRELOAD.format(build=build, expected=expected))


def test_building_a_verifier_loads_litellm_and_the_tokenizer_in_a_background_thread() -> None:
    assert preloaded("Verifier(config); Verifier(config)", 2) == (
        "[('litellm', 'replyguard-preload'), ('tiktoken', 'replyguard-preload')] MainThread"
    )


def test_a_verifier_with_its_own_judge_preloads_the_tokenizer_only() -> None:
    assert preloaded("Verifier(config, judge=ScriptedJudge([]))", 1) == (
        "[('tiktoken', 'replyguard-preload')] MainThread"
    )


JUDGE_SIDE = textwrap.dedent(
    """
    import asyncio, sys, threading
    import importlib.abc
    from replyguard import Verifier, VerifierConfig
    from replyguard.runner._preload import wait_for_preload
    from replyguard.testing import ScriptedJudge

    importers = []

    class Watch(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name == "replyguard.runner._judging":
                importers.append(threading.current_thread().name)
            return None

    sys.meta_path.insert(0, Watch())
    assert "replyguard.runner._judging" not in sys.modules
    verifier = Verifier(VerifierConfig(), judge=ScriptedJudge([]), preload={preload})
    {wait}
    print(importers, "replyguard.runner._judging" in sys.modules)
    """
)


def test_the_preload_imports_the_judge_side_before_the_first_turn() -> None:
    """The first reply its checks do not decide needs ``runner._judging`` (the prompt build,
    the judge call): the preload imports it off the caller's thread, not the turn."""
    out = run_script(JUDGE_SIDE.format(preload=True, wait="wait_for_preload(60)"))
    assert out == "['replyguard-preload'] True"


def test_warmup_imports_the_judge_side_off_the_event_loop() -> None:
    out = run_script(JUDGE_SIDE.format(preload=False, wait="asyncio.run(verifier.warmup())"))
    assert out == "['asyncio_0'] True"


def test_preload_false_loads_nothing_until_asked() -> None:
    assert preloaded("Verifier(config, preload=False)", 0) == "[] MainThread"


def test_the_preload_starts_once_per_process() -> None:
    script = (
        "from replyguard.runner._preload import start_preload as s; "
        "print(s(litellm=False), s(litellm=False), s(litellm=True), s(litellm=True))"
    )
    assert run_script(script).split() == ["True", "False", "True", "False"]


FIRST_CALL = textwrap.dedent(
    """
    import asyncio, importlib.abc, sys, threading
    import jinja2
    import pydantic._internal._model_construction as construction
    from support.provider_server import ANTHROPIC, OPENAI, ProviderServer, Step
    from replyguard import Turn, Verifier, VerifierConfig

    on_the_loop, anywhere, built = [], [], []
    complete_model_class, compile_template = construction.complete_model_class, None

    def watched_build(cls, *args, **kwargs):
        if Watch.watching:
            built.append(cls.__name__)
        return complete_model_class(cls, *args, **kwargs)

    construction.complete_model_class = watched_build
    compile_template = jinja2.Environment.compile

    def watched_compile(self, *args, **kwargs):
        if Watch.watching:
            built.append("template")
        return compile_template(self, *args, **kwargs)

    jinja2.Environment.compile = watched_compile

    class Watch(importlib.abc.MetaPathFinder):
        watching = False

        def find_spec(self, name, path, target=None):
            if Watch.watching and name.startswith("litellm"):
                anywhere.append(name)
                if threading.current_thread() is threading.main_thread():
                    on_the_loop.append(name)
            return None

    sys.meta_path.insert(0, Watch())
    wire = {{"openai": OPENAI, "anthropic": ANTHROPIC}}["{wire}"]

    async def main(url):
        config = VerifierConfig(
            enabled=True, verify_all=True, model=wire.judge_model, api_base=url,
            api_key="sk-test-cold-start-0000000000", agent_model=wire.agent_model,
            timeout_seconds=10.0,
        )
        if {routed}:  # the same judge model as the one deployment of a Router's group
            deployment = {{
                "modelName": "judge", "model": wire.judge_model, "apiBase": url,
                "apiKey": "sk-test-cold-start-0000000000",
            }}
            routing = {{"model": "judge", "router": {{"deployments": [deployment]}}}}
            config = VerifierConfig.from_dict({{
                **config.model_dump(by_alias=True, exclude_none=True), **routing,
                "apiKey": "sk-test-cold-start-0000000000",
            }})
        verifier = Verifier(config)
        await verifier.warmup()
        Watch.watching = True
        outcome = await verifier.run(lambda m: "Done: the reply.", Turn(user_message="q"))
        Watch.watching = False
        await verifier.aclose()
        print(outcome.status.value, sorted(on_the_loop), sorted(anywhere), built)

    with ProviderServer(default=Step(text="PASS")) as server:
        asyncio.run(main(server.url))
    """
)


@pytest.mark.parametrize(
    ("wire", "routed"),
    [("openai", False), ("anthropic", False), ("openai", True)],
    ids=["openai", "anthropic", "openai-router"],
)
def test_the_first_judge_call_after_warmup_imports_nothing_of_litellm(
    wire: str, routed: bool
) -> None:
    """litellm imports parts of itself lazily on its first call: on the thread that calls (the
    event loop, where every turn then stalls and no deadline can fire: its logging callback
    manager alone took 0.4 s), and in its executor thread, holding the GIL all the same (the
    proxy's types for the file-id look-up, and on Anthropic's route its own tokenizer: 0.2-0.4 s
    each). ``warmup()`` (and the background preload) load them first, and build what a turn
    builds on first use (the models' validators, litellm's and replyguard's; the judge prompt's
    templates): the first turn after it imports and builds nothing, on any thread. Through a
    Router too: its first call imported litellm's OpenTelemetry hooks on the loop (0.1-0.15 s
    in the judgement's deadline; a busy machine's first routed request missed a 0.3 s one)."""
    assert run_script(FIRST_CALL.format(wire=wire, routed=routed)) == "passed [] [] []"


FIRST_TURN = """
    import asyncio, sys
    from replyguard import Turn, Verifier, VerifierConfig
    from replyguard.testing import ScriptedJudge

    redacted = []
    def redact(text):
        redacted.append(text)
        return text

    config = VerifierConfig(
        enabled=True, verify_all=True, model="openai/gpt-4o-mini",
        agent_model="anthropic/claude-sonnet-4-5",
    )
    verifier = Verifier(
        config, judge=ScriptedJudge(["PASS", "PASS"]), redact=redact, preload=False
    )
    turn = Turn(user_message={message!r})
    outcome = asyncio.run(verifier.run(lambda m: "the reply", turn))
    first = sorted(redacted)
    print(outcome.status.value, "tiktoken" in sys.modules)
    redacted.clear()
    asyncio.run(verifier.run(lambda m: "the reply", turn))
    print(first == sorted(redacted))
"""


def test_a_first_turn_whose_prompt_fits_by_size_never_loads_the_tokenizer() -> None:
    out = run_script(FIRST_TURN.format(message="Summarise the report."))
    assert out.splitlines() == ["passed False", "True"]


def test_a_first_turn_too_large_to_fit_by_size_loads_the_tokenizer_and_redacts_once() -> None:
    # 40,000 characters: more bytes than the 8,000-token budget, so the prompt is counted.
    # The build that found the tokenizer missing is redone once it is loaded; the host's
    # redact hook still sees each text as often as on a turn with the tokenizer loaded.
    out = run_script(FIRST_TURN.format(message="Summarise the report. " * 1800))
    assert out.splitlines() == ["passed True", "True"]


def test_the_preload_loads_the_tokenizer_only_once_no_turn_is_being_verified() -> None:
    # A verifier built while a judgement is in flight starts its preload (the tokenizer
    # alone: it has its own judge) but the load waits for that judgement and its turn to end
    # (the judge watches for a second: without the wait the load starts within milliseconds).
    out = run_script(
        """
        import asyncio, sys, threading, time
        import importlib.abc
        from replyguard import Turn, Verifier, VerifierConfig
        from replyguard.testing import ScriptedJudge

        importers = {}

        class Watch(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path, target=None):
                if name == "tiktoken":
                    importers.setdefault(name, threading.current_thread().name)
                return None

        sys.meta_path.insert(0, Watch())
        config = VerifierConfig(
            enabled=True, verify_all=True, model="openai/gpt-4o-mini",
            agent_model="anthropic/claude-sonnet-4-5",
        )

        async def judge(prompt):
            Verifier(config, judge=ScriptedJudge([]))  # starts the preload thread
            for _ in range(20):
                await asyncio.sleep(0.05)
                if "tiktoken" in importers:
                    return "FAIL: the tokenizer was loaded during the judgement"
            return "PASS"

        verifier = Verifier(config, judge=ScriptedJudge([judge]), preload=False)
        outcome = asyncio.run(verifier.run(lambda m: "the reply", Turn(user_message="q")))
        deadline = time.monotonic() + 60
        while "tiktoken" not in importers and time.monotonic() < deadline:
            time.sleep(0.05)
        print(outcome.status.value, importers)
        """
    )
    assert out == "passed {'tiktoken': 'replyguard-preload'}"


PYTESTER_AFTER_PRELOAD = """
    import sys, time
    import pytest
    from replyguard import Verifier, VerifierConfig

    pytest_plugins = ["pytester"]

    def test_a_builds_a_verifier_whose_preload_imports_litellm():
        assert "litellm" not in sys.modules
        config = VerifierConfig(
            model="openai/gpt-4o-mini", agent_model="anthropic/claude-sonnet-4-5"
        )
        Verifier(config)
        deadline = time.monotonic() + 60
        while "openai" not in sys.modules and time.monotonic() < deadline:  # SDK import begun
            time.sleep(0.001)

    def test_b_uses_pytester_while_litellm_is_imported(pytester: pytest.Pytester):
        # Without the wait for the preload, the snapshot was taken halfway through the OpenAI
        # SDK's import, and its teardown (once litellm is imported) drops the SDK's client
        # modules while litellm and the SDK's package keep references into them.
        deadline = time.monotonic() + 60
        litellm = sys.modules.get("litellm")
        while time.monotonic() < deadline and not hasattr(litellm, "acompletion"):
            time.sleep(0.01)

    async def test_c_judges_a_turn_through_the_openai_sdk(provider):
        from conftest import API_KEY
        from replyguard import Turn
        from support.provider_server import OPENAI, Step

        provider.push(Step(text="PASS"))
        config = VerifierConfig(
            enabled=True, verify_all=True, model=OPENAI.judge_model, api_base=provider.url,
            api_key=API_KEY, agent_model=OPENAI.agent_model,
        )
        verifier = Verifier(config)
        outcome = await verifier.run(lambda m: "Done.", Turn(user_message="Hi"))
        await verifier.aclose()
        assert outcome.status.value == "passed", outcome.attempts[-1].verdict.error
"""


def test_pytester_after_a_verifier_was_built_leaves_litellm_and_openai_whole(
    pytester: pytest.Pytester,
) -> None:
    # pytester puts back its snapshot of sys.modules at teardown: taken while the preload
    # thread imported litellm, it dropped half of the OpenAI SDK, and the next judge call
    # failed open on a circular import ("cannot import name '_has_header' from partially
    # initialized module"). The suite's pytester waits for the preload.
    # In a folder of its own, as here: the suite's conftest then overrides pytest's fixture.
    inner = pytester.mkdir("tests")
    shutil.copy(TESTS / "conftest.py", inner / "conftest.py")
    shutil.copytree(TESTS / "support", inner / "support")
    (inner / "test_order.py").write_text(textwrap.dedent(PYTESTER_AFTER_PRELOAD))
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:randomly", "-o", "asyncio_mode=auto"
    )
    result.assert_outcomes(passed=3)


def test_structlog_is_imported_for_the_first_event_recorded_not_for_a_verifier() -> None:
    out = run_script(
        """
        import asyncio, logging, sys
        from replyguard import Turn, Verifier, VerifierConfig
        from replyguard.testing import ScriptedJudge

        config = VerifierConfig(
            enabled=True, verify_all=True, model="openai/gpt-4o-mini",
            agent_model="anthropic/claude-sonnet-4-5",
        )
        verifier = Verifier(config, judge=ScriptedJudge(["PASS", "PASS"]), preload=False)
        turn = Turn(user_message="q")
        asyncio.run(verifier.run(lambda m: "the reply", turn))
        print("structlog" in sys.modules)
        records = []
        handler = logging.Handler(logging.INFO)
        handler.emit = records.append
        logging.getLogger("replyguard").addHandler(handler)
        logging.getLogger("replyguard").setLevel(logging.INFO)
        asyncio.run(verifier.run(lambda m: "the reply", turn))
        print("structlog" in sys.modules, "verdict" in {r.replyguard["event"] for r in records})
        """
    )
    assert out.splitlines() == ["False", "True True"]


def test_a_verifier_loads_only_what_its_config_asks_for() -> None:
    """Built-in checks, a panel, shared state, router groups and streaming load on first use:
    a plain verifier (whose default checks are the heartbeat one) and its turn import none of
    them; each name still resolves, reporting
    ``replyguard`` as its module, and a config that lists a check loads that one."""
    out = run_script(
        """
        import asyncio, sys
        import replyguard
        from replyguard import Turn, Verifier, VerifierConfig
        from replyguard.testing import ScriptedJudge

        LAZY = (
            "replyguard.checks.claims", "replyguard.checks.command",
            "replyguard.checks.http_request",
            "replyguard.checks.json_check", "replyguard.checks.json_repair",
            "replyguard.checks.rules", "replyguard.checks.incremental",
            "replyguard.judge._panel", "replyguard.judge._router",
            "replyguard.judge._fleet_breaker", "replyguard.state", "replyguard.runner._stream",
        )
        config = VerifierConfig(
            enabled=True, verify_all=True, model="openai/gpt-4o-mini",
            agent_model="anthropic/claude-sonnet-4-5",
        )
        verifier = Verifier(config, judge=ScriptedJudge(["PASS"]), preload=False)
        outcome = asyncio.run(verifier.run(lambda m: "the reply", Turn(user_message="q")))
        print(outcome.status.value, [name for name in LAZY if name in sys.modules])
        print(replyguard.RuleCheck.__module__, replyguard.repair_json.__module__,
              "JsonCheck" in dir(replyguard), "replyguard.checks.json_check" in sys.modules)
        with_claims = VerifierConfig(
            enabled=True, model="openai/gpt-4o-mini", agent_model="anthropic/claude-sonnet-4-5",
            checks=[{"type": "claims"}],
        )
        Verifier(with_claims, judge=ScriptedJudge([]), preload=False)
        print("replyguard.checks.claims" in sys.modules, sys.modules[
            "replyguard.checks.claims"
        ].ClaimCheck.__module__)
        try:
            replyguard.NoSuchName
        except AttributeError as exc:
            print(exc)
        """
    )
    assert out.splitlines() == [
        "passed []",
        "replyguard replyguard True False",
        "True replyguard",
        "module 'replyguard' has no attribute 'NoSuchName'",
    ]


NO_THREAD = textwrap.dedent(
    """
    import asyncio, threading
    from replyguard import Turn, Verifier, VerifierConfig
    from replyguard.runner._preload import wait_for_preload
    from replyguard.context import _tokens as tokens
    from replyguard.testing import ScriptedJudge

    config = VerifierConfig(
        enabled=True, verify_all=True, model="openai/gpt-4o-mini",
        agent_model="anthropic/claude-sonnet-4-5",
    )
    start = threading.Thread.start

    def no_thread(self):
        raise RuntimeError("can't start new thread")

    threading.Thread.start = no_thread  # a process at its thread limit
    verifier = Verifier(config, judge=ScriptedJudge(["PASS"]))
    threading.Thread.start = start
    outcome = asyncio.run(verifier.run(lambda messages: "Done.", Turn(user_message="q")))
    Verifier(config, judge=ScriptedJudge([]))  # the parts not started are started now
    assert wait_for_preload(60)
    print(outcome.status.value, tokens.loaded())
    """
)


def test_a_verifier_is_built_when_no_thread_can_be_started_for_its_preload() -> None:
    assert run_script(NO_THREAD) == "passed True"


EXIT_AT_ONCE = """
import time
from replyguard import Verifier, VerifierConfig
config = VerifierConfig(model="openai/gpt-4o-mini", agent_model="anthropic/claude-sonnet-4-5")
for pause in (0.0, 0.05, 0.2, 0.5):  # exits land in and between the preload's parts
    Verifier(config)
    time.sleep(pause)
print("built")
"""


def test_a_script_that_ends_while_the_preload_imports_exits() -> None:
    """The interpreter halts a daemon thread wherever it is at exit: the preload halted inside
    an import kept that module's lock, and the first import made during shutdown (litellm's
    HTTP handler's ``__del__``) waited for it for ever. The exit now lets the part in progress
    finish and starts no other."""
    assert run_script(EXIT_AT_ONCE) == "built"
