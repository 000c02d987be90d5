"""A host that forks after building a verifier, or after using it: a pre-forking server that
loads its app first, a prefork task pool, ``multiprocessing`` with its default start method on
Linux.

Building a verifier starts importing litellm in a background thread, for seconds. A fork in
the middle of that import gave the child a half-imported litellm, locked by a thread the child
does not have: the child's own ``import litellm`` waited for ever. A fork now waits for
replyguard's loads in flight (``replyguard._forks``), at most ``FORK_WAIT_SECONDS``.

A verifier that ran sync code before the fork (a sync agent, a sync hook, ``run_sync``) had
its thread pools and ``run_sync``'s loop thread in the parent: in the child, those pools took
each call and ran none, and the first ``run_sync`` waited for ever. A child starts them afresh.

Each case runs in a fresh interpreter of its own (a fork of the test process would copy
pytest's threads); a child that hangs is ended by an alarm and reported.
"""

from __future__ import annotations

import sys
import textwrap
import threading

import pytest
from test_cold_start import run_script

from replyguard import _forks
from replyguard.runner._preload import wait_for_preload

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="os.fork is POSIX only"),
    pytest.mark.slow,  # forked children importing litellm: `.ci/run` runs these in its slow step
]


FORK_MID_IMPORT = textwrap.dedent(
    """
    import asyncio, os, signal, sys, time
    from support.provider_server import ProviderServer, Step
    from replyguard import Turn, Verifier, VerifierConfig

    def importing_litellm():
        module = sys.modules.get("litellm")
        return module is not None and getattr(module.__spec__, "_initializing", False)

    with ProviderServer(default=Step(text="PASS")) as server:
        config = VerifierConfig(
            enabled=True, verify_all=True, model="openai/gpt-4o-mini", api_base=server.url,
            api_key="sk-test-cold-start-0000000000", agent_model="anthropic/claude-sonnet-4-5",
            timeout_seconds=10.0,
        )
        assert "litellm" not in sys.modules
        verifier = Verifier(config)  # its preload starts importing litellm now
        given_up = time.monotonic() + 60
        while not importing_litellm():  # fork while the import is under way
            assert time.monotonic() < given_up, "the preload never started importing litellm"
            time.sleep(0.001)
        pid = os.fork()
        if pid == 0:
            signal.alarm(60)  # a hung child ends, and says so by its status
            whole = not importing_litellm()
            import litellm  # the host's own import: it waited for ever before
            outcome = asyncio.run(
                verifier.run(lambda messages: "Done: the report.", Turn(user_message="q"))
            )
            print(f"child whole={whole} acompletion={hasattr(litellm, 'acompletion')} "
                  f"status={outcome.status.value}", flush=True)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        hung = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGALRM
        print(f"parent hung={hung} code={os.waitstatus_to_exitcode(status)}", flush=True)
    """
)


def lines_of(script: str) -> list[str]:
    return run_script(script).splitlines()


def test_a_fork_in_the_middle_of_the_preloads_import_gives_the_child_a_whole_litellm() -> None:
    lines = lines_of(FORK_MID_IMPORT)
    assert lines == [
        "child whole=True acompletion=True status=passed",
        "parent hung=False code=0",
    ]


STUCK_LOAD = textwrap.dedent(
    """
    import os, signal, sys, threading, time
    from replyguard import _forks

    _forks.FORK_WAIT_SECONDS = 0.5
    inside, release = threading.Event(), threading.Event()

    def stuck():
        with _forks.loading():
            inside.set()
            release.wait()

    threading.Thread(target=stuck, daemon=True).start()
    inside.wait()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        signal.alarm(30)
        with _forks.loading():  # the parent's stuck load is not the child's
            pass
        os._exit(0 if _forks.in_flight() == 0 else 3)
    waited = time.monotonic() - started
    release.set()
    _, status = os.waitpid(pid, 0)
    print(f"waited={0.4 <= waited < 20} child={os.waitstatus_to_exitcode(status)}")
    """
)


def test_a_fork_waits_for_a_load_that_never_ends_only_so_long_then_goes_ahead() -> None:
    assert lines_of(STUCK_LOAD) == ["waited=True child=0"]


UNFINISHED_PARTS = textwrap.dedent(
    """
    import os, signal, sys, time
    from replyguard import Verifier, VerifierConfig
    from replyguard.context import _tokens as tokens
    from replyguard.runner import _preload
    from replyguard.testing import ScriptedJudge

    config = VerifierConfig(model="openai/gpt-4o-mini", agent_model="anthropic/claude-sonnet-4-5")
    with _preload.judging():  # a judgement in flight: the tokenizer's load waits for its end
        Verifier(config, judge=ScriptedJudge(["PASS"]))
        given_up = time.monotonic() + 60
        while "turn" not in _preload._done:
            assert time.monotonic() < given_up
            time.sleep(0.005)
        pid = os.fork()
        if pid == 0:
            signal.alarm(60)
            assert not tokens.loaded()
            with _preload.judging():  # the child's own judgements are counted afresh
                pass
            Verifier(config, judge=ScriptedJudge(["PASS"]))  # starts the part left undone
            assert _preload.wait_for_preload(50) and tokens.loaded()
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert _preload.wait_for_preload(50) and tokens.loaded()  # the parent's own, meanwhile
    print(f"child={os.waitstatus_to_exitcode(status)}")
    """
)


def test_a_child_starts_the_preload_parts_its_parent_had_not_done() -> None:
    assert lines_of(UNFINISHED_PARTS) == ["child=0"]


def test_a_load_that_would_start_while_a_fork_waits_waits_for_the_fork() -> None:
    assert wait_for_preload(60)  # other tests' preloads: none is loading now
    started, entered = threading.Event(), threading.Event()

    def load() -> None:
        started.set()
        with _forks.loading():
            entered.set()

    _forks._before_fork()  # what os.fork runs first (no fork here: the hooks alone)
    try:
        thread = threading.Thread(target=load, daemon=True)
        thread.start()
        assert started.wait(5)
        assert not entered.wait(0.2)
    finally:
        _forks._after_fork_in_parent()
    assert entered.wait(5)
    thread.join(5)
    assert _forks.in_flight() == 0


def test_a_thread_forking_inside_its_own_loads_does_not_wait_for_them() -> None:
    assert wait_for_preload(60)
    with _forks.loading():
        with _forks.loading():
            assert _forks.in_flight() == 2
        _forks._before_fork()  # a load that forks: its own loads are not waited for
        _forks._after_fork_in_parent()
    assert _forks.in_flight() == 0


USED_BEFORE_THE_FORK = textwrap.dedent(
    """
    import asyncio, os, signal
    from support.provider_server import ProviderServer, Step
    from replyguard import Turn, Verifier, VerifierConfig

    ran = []

    def on_verdict(turn, attempt):  # a sync hook: it runs on the verifier's hook threads
        ran.append(os.getpid())

    def agent(messages):  # a sync agent: it runs on the verifier's agent threads
        return "Done: the report."

    with ProviderServer(default=Step(text="PASS")) as server:
        config = VerifierConfig(
            enabled=True, verify_all=True, model="openai/gpt-4o-mini", api_base=server.url,
            api_key="sk-test-cold-start-0000000000", agent_model="anthropic/claude-sonnet-4-5",
            timeout_seconds=10.0,
        )
        verifier = Verifier(config, on_verdict=on_verdict)
        first = verifier.run_sync(agent, Turn(user_message="q"))  # its loop thread, its pools
        pid = os.fork()
        if pid == 0:
            signal.alarm(60)
            synced = verifier.run_sync(agent, Turn(user_message="q"))
            awaited = asyncio.run(verifier.run(agent, Turn(user_message="q")))
            mine = ran.count(os.getpid())
            print(f"child {synced.status.value} {awaited.status.value} hooks={mine}", flush=True)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        again = verifier.run_sync(agent, Turn(user_message="q"))
        verifier.close()
        print(f"parent {first.status.value} {again.status.value} "
              f"child={os.waitstatus_to_exitcode(status)}", flush=True)
    """
)


def test_a_verifier_used_before_a_fork_runs_sync_agents_hooks_and_run_sync_in_the_child() -> None:
    assert lines_of(USED_BEFORE_THE_FORK) == [
        "child passed passed hooks=2",
        "parent passed passed child=0",
    ]


FORKED_FROM_A_THREAD = textwrap.dedent(
    """
    import asyncio, os, signal, time
    from replyguard import Turn, Verifier, VerifierConfig
    from replyguard.testing import ScriptedJudge

    config = VerifierConfig(enabled=True, verify_all=True, agent_model="openai/gpt-4o")
    verifier = Verifier(config, judge=ScriptedJudge(["PASS"] * 20))

    def agent(messages):
        return "Done: the report."

    def in_a_thread():  # the host's loop runs on in the parent's main thread meanwhile
        pid = os.fork()
        if pid == 0:
            signal.alarm(60)
            started = time.monotonic()
            statuses = {verifier.run_sync(agent, Turn(user_message="q")).status.value
                        for _ in range(8)}
            seconds = time.monotonic() - started
            print(f"child {sorted(statuses)} quick={seconds < 1.5}", flush=True)
            os._exit(0)
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])

    async def main():
        await verifier.run(agent, Turn(user_message="q"))  # the async API ran on this loop
        print(f"parent child={await asyncio.to_thread(in_a_thread)}", flush=True)

    asyncio.run(main())
    """
)


def test_a_child_forked_while_the_hosts_loop_ran_does_not_hand_run_sync_to_that_loop() -> None:
    # Each run_sync offered its turn to the parent's loop, which runs nothing in the child,
    # and waited the handover's 0.25 s for it: 8 turns took over 2 s.
    assert lines_of(FORKED_FROM_A_THREAD) == ["child ['passed'] quick=True", "parent child=0"]
