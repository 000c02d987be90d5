"""The judge requests of one judgement that were sent and never answered: what they are
charged.

A provider bills a request once it has it: a panel member cancelled once the panel decided, a
call cut by its share of the time or the turn's deadline, a streamed answer cut mid-way, were
billed their prompt, and whatever was generated before the cut, though no answer (no usage) was
read. So each request a judge sends is noted here (``sending``), with its answer once read
(``Request.replied``: an answer prices itself), or dropped when the provider refuses it with
an error status (nothing billed). When the judgement ends, ``Unanswered.charge`` charges each
request without an answer at least its prompt's tokens and the tokens of the text it streamed
before the cut, at litellm's prices (the cheapest deployment of a router group); and, when the
judge's reply never reached the caller (it was cancelled, or raised), each answer read before
it at its own cost. What the provider generated but never sent is not known here: it may bill
more.

The runner opens one ``Unanswered`` per seat's judgement (``watching``: a context variable the
judge's tasks inherit); a judge that notes nothing (a custom one) is charged nothing.
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from dataclasses import dataclass, field

from replyguard.context import _tokens as tokens
from replyguard.context._prompt import JudgePrompt
from replyguard.judge._prices import surely_billed
from replyguard.judge._protocol import JudgeReply

__all__ = ["Charge", "Request", "Unanswered", "sending"]


@dataclass(frozen=True)
class Charge:
    """What a judgement's unanswered requests are charged: tokens in and out, and USD."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0


NO_CHARGE = Charge()


@dataclass(eq=False)
class Request:
    """One request sent and not answered yet."""

    models: tuple[str, ...]
    """The models that may have served it (a router group's deployments, or the model)."""
    added: str = ""
    """Text the request added to the prompt (the verdict-first notes)."""
    received: list[str] = field(default_factory=list)
    """The text of a streamed answer received so far."""
    reply: JudgeReply | None = None
    """Its answer, once read (priced by itself)."""
    owner: Unanswered | None = None

    def replied(self, reply: JudgeReply) -> None:
        """Its answer was read: it is priced by ``reply``."""
        self.reply = reply

    def forget(self) -> None:
        """The provider refused it with an error status: nothing to charge."""
        if self.owner is not None:
            self.owner.requests.discard(self)


class Unanswered:
    """The requests of one judgement sent and not answered (see module doc)."""

    def __init__(self) -> None:
        self.requests: set[Request] = set()
        self._token: Token[Unanswered | None] | None = None

    def watching(self) -> Unanswered:
        """Note the requests judges send within (their tasks inherit it) here: a context
        manager, itself (no object of its own for a judge call to hold while in flight; one
        block at a time)."""
        return self

    def __enter__(self) -> Unanswered:
        self._token = _CURRENT.set(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        assert self._token is not None  # entered
        _CURRENT.reset(self._token)
        self._token = None

    def charge(self, prompt: JudgePrompt, *, replied: bool = False) -> Charge:
        """What the requests are charged: each one without an answer its prompt's tokens (the
        prompt's own count, and what the request added to it) and the tokens of the text it
        received, at the cheapest price of the models that may have served it; each one
        answered, its answer's tokens and cost, unless the judge ``replied`` (its reply
        carries them)."""
        total_in, total_out, usd = 0, 0, 0.0
        for request in self.requests:
            if request.reply is not None:
                if not replied:
                    answer = request.reply
                    total_in, total_out = (
                        total_in + answer.prompt_tokens,
                        total_out + answer.completion_tokens,
                    )
                    usd += answer.cost_usd
                continue
            tokens_in = prompt.tokens + (tokens.count(request.added) if request.added else 0)
            tokens_out = tokens.count("".join(request.received)) if request.received else 0
            total_in, total_out = total_in + tokens_in, total_out + tokens_out
            usd += surely_billed(request.models, tokens_in, tokens_out)
        if not (total_in or total_out or usd):
            return NO_CHARGE
        return Charge(total_in, total_out, usd)


_CURRENT: ContextVar[Unanswered | None] = ContextVar("replyguard_unanswered", default=None)


def sending(models: tuple[str, ...], added: str = "") -> Request:
    """Note a request about to be sent to one of ``models`` (in the judgement's
    ``Unanswered``, if one watches); ``added``: the text it adds to the prompt."""
    owner = _CURRENT.get()
    request = Request(models, added, owner=owner)
    if owner is not None:
        owner.requests.add(request)
    return request
