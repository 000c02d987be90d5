"""The turn ``Verifier.stream`` plays: ``Verifier.run``'s, with replies that may be cut short.

An incremental check's violation may close an agent's stream before its reply is complete
(``StreamRun.may_cut`` says when: only where a retry follows). A reply cut short is never
delivered: its text is a fragment, whose meaning may be the opposite of the whole reply's
("as an AI I can" of "as an AI I cannot book tables"). Wherever the turn would deliver one (a
retry that fails or runs out of time after the cut, ``deliver: "first"``, the deadline), it
delivers the latest complete reply instead (``StreamRun.whole``): one that passed every check
if there is one, else the latest judged; when the turn has no complete reply at all, the
response is empty.
"""

from __future__ import annotations

from typing import Any

from replyguard.checks.running import checks_verdict
from replyguard.gate._prechecks import skip_reason
from replyguard.runner._policy import exhausted_ending, normal
from replyguard.runner._run import _Run
from replyguard.types import Attempt, Outcome, Reason, Reply, Status


class StreamRun(_Run):
    """A ``_Run`` whose attempts may be cut short; a cut reply is never the one delivered."""

    def __init__(self, *args: Any, **keys: Any) -> None:
        super().__init__(*args, **keys)
        self.truncated: list[Reply] = []
        """The replies whose streams were cut short (compared by identity)."""

    def cut_short(self, reply: Reply) -> Reply:
        """Note ``reply`` as a fragment: never to be delivered."""
        self.truncated.append(reply)
        return reply

    def is_truncated(self, reply: Reply) -> bool:
        return any(reply is cut for cut in self.truncated)

    def may_cut(self, number: int, found: Any, text: str) -> bool:
        """Whether attempt ``number``, with ``text`` so far, may be cut short for the failing
        check result ``found``: only when a retry would follow the cut (attempts, money, time
        and a reply that changed are left), as ``settle`` would decide on that verdict. An
        attempt no retry can follow is read whole and judged whole, as ``run`` judges it."""
        left = self.time_left()
        if left is not None and left <= 0:
            return False
        verdict = checks_verdict((found,))
        if verdict is None:
            return False
        attempt = Attempt(number=number, reply=Reply(text=text), verdict=verdict, checks=(found,))
        previous = self.attempts[-1] if self.attempts else None
        return self.ending(attempt, previous) is None

    def whole(self) -> Reply:
        """What stands in for a cut reply: the latest complete, judged reply that passed every
        check, else the latest complete, judged one, else an empty reply."""
        judged = [
            a for a in self.attempts if a.verdict is not None and not self.is_truncated(a.reply)
        ]
        clean = [a for a in judged if all(r.passed for r in a.checks)]
        chosen = clean or judged
        return chosen[-1].reply if chosen else Reply(text="")

    async def accept(self, retry: Reply, number: int, previous: Reply) -> Reply | Outcome:
        """``_Run.accept``; a complete retry that repeats a cut reply (it begins with the whole
        fragment, the violation included) is the previous reply again, as ``run`` finds it."""
        if (
            self.is_truncated(previous)
            and skip_reason(retry) is None
            and normal(retry.text).startswith(normal(previous.text))
        ):
            self.attempts.append(Attempt(number=number, reply=retry))
            ending = exhausted_ending(self.config, self.attempts, retry, Reason.STAGNANT)
            return await self.finish(ending.status, ending.delivered, ending.reason)
        return await super().accept(retry, number, previous)

    async def finish(self, status: Status, delivered: Reply, *args: Any, **keys: Any) -> Outcome:
        if self.is_truncated(delivered):
            delivered = self.whole()
            self.v.events.info(
                "cut_reply_not_delivered",
                turn_id=self.turn.id,
                status=status,
                empty=not delivered.text,
            )
        return await super().finish(status, delivered, *args, **keys)
