"""``BaseJudge``: a judge with a lifecycle, and how a plain ``Judge`` gets one.

The ``Judge`` protocol is one async method, and a custom judge may be just that. A judge that
holds something (clients, a Router, a model in memory) subclasses ``BaseJudge`` and says so:
``warmup()`` loads what a first judgement would (the verifier's ``warmup()`` and a judgement
that finds it not ``ready`` call it), ``aclose()`` closes what it holds on the running loop
(the verifier's ``aclose()`` calls it), ``close()`` what can be closed without a loop. Each
does nothing by default. The verifier holds every judge as a ``BaseJudge``: a plain one is
wrapped (``as_base_judge``), so the runner never asks a judge what it has.
"""

from __future__ import annotations

import abc
from typing import Protocol, runtime_checkable

from replyguard.context._prompt import JudgePrompt
from replyguard.judge._protocol import Judge, JudgeReply


class BaseJudge(abc.ABC):
    """A ``Judge`` the verifier warms up and closes; subclass it for a judge that holds
    anything. Every method but ``judge`` does nothing by default."""

    __slots__ = ()

    @abc.abstractmethod
    async def judge(self, prompt: JudgePrompt, *, time_left: float) -> JudgeReply:
        """Return the judge's answer, or raise; the runner fails open on any exception."""

    @property
    def ready(self) -> bool:
        """True when ``warmup`` has nothing left to do (a judgement then does not call it).
        A subclass whose ``warmup`` does work says here when that work is done."""
        return True

    async def warmup(self) -> None:
        """Load what the first judgement would, so its deadline is not spent on it."""
        return None  # nothing, by default

    async def aclose(self) -> None:
        """Close what this judge holds on the running loop (``Verifier.aclose`` calls it)."""
        return None  # nothing, by default

    def close(self) -> None:
        """Close what this judge holds that needs no event loop (``Verifier.close``)."""
        return None  # nothing, by default

    def member(self, model: str) -> Judge:
        """The judge of the panel member ``model`` (this one, by default)."""
        return self


@runtime_checkable
class _Members(Protocol):
    """A plain judge that gives each panel member a judge of its own (docs/panels.md)."""

    def member(self, model: str) -> Judge: ...


class _PlainJudge(BaseJudge):
    """A plain ``Judge`` (only ``judge``) as a ``BaseJudge``: nothing to warm up or close."""

    __slots__ = ("_judge",)

    def __init__(self, judge: Judge) -> None:
        self._judge = judge

    async def judge(self, prompt: JudgePrompt, *, time_left: float) -> JudgeReply:
        return await self._judge.judge(prompt, time_left=time_left)

    def member(self, model: str) -> Judge:
        return self._judge.member(model) if isinstance(self._judge, _Members) else self


def as_base_judge(judge: Judge) -> BaseJudge:
    """``judge`` itself when it is a ``BaseJudge``, else it wrapped as one."""
    return judge if isinstance(judge, BaseJudge) else _PlainJudge(judge)
