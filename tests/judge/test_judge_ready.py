"""``LiteLLMJudge.ready``: whether its one-time warm-up still has work to do."""

from __future__ import annotations

from typing import Any

from replyguard.judge import LiteLLMJudge
from replyguard.telemetry import Events


async def test_a_plain_judge_is_ready_after_its_warmup(make_config: Any) -> None:
    judge = LiteLLMJudge(make_config(), Events())
    assert not judge.ready
    await judge.warmup()
    assert judge.ready
