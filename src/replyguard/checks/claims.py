"""``ClaimCheck``: "I sent it" needs a successful call of a matching tool in this turn.

When the reply claims an action it took ("I sent the invoice", "I've deployed the fix", "the
invitations have been sent") and the turn's tool ledger (``reply.meta.tool_calls``) holds no
*successful* call of a tool mapped to that verb, the check fails as ``INCOMPLETE`` without
asking the judge. Opt-in: it only runs when configured.

The ledger covers this turn only, so a claim about an earlier turn ("we sent the contract in
May", "I sent 3 emails last week") fails too unless this turn repeated the call: the agent is
asked to say plainly what it did now. Replies over ``INLINE_CHARS`` are scanned in a worker
thread.

**The map.** ``claims`` maps a claimed verb to tool-name glob patterns, matched against the
tool's name and each of its words; tools that only read (``read_email``, ``get_order_status``)
back up no action (see ``replyguard.checks.claim_tools``). A verb may be given as a past
form (``"sent"``, ``"deployed"``, ``"backed up"``) or as a lemma (``"send"``, ``"deploy"``):
a small table knows irregular verbs (``run`` → "ran", "have run"), regular ones get "-ed".
``DEFAULT_CLAIMS`` holds the defaults; ``claims=`` replaces them. A verb mapped to no
patterns is a claim no tool call can back up. Shell-like tools
(``bash``, ``*shell``, ``exec*``, ``terminal*``, ``command*``) back up the workspace and
deployment verbs by default, but not messages or payments.

**What counts as a claim** (precision first: a missed claim still reaches the judge, a false
one fails a good reply):

- first person, ``I`` or ``we``, past tense: "I sent", "we pushed"; perfect: "I've saved",
  "I have deployed", "I had sent", "I'd sent"; with up to three adverbs from a fixed list
  between: "I just emailed", "I've successfully created", "I only ran", "I went ahead and
  booked". Markdown emphasis is read through: "I've **sent**", "I *just* sent";
- passive present perfect: "has been deployed", "have all been sent", "the sheet's been
  updated" (not "she's been sent", where she receives), unless another agent is
  named ("has been sent by the customer"; "by me", "by email" do not count as another agent),
  the subject is negative ("no emails have been sent", "nothing has been deleted", "none of
  the files have been uploaded"; a ``no``, ``nothing``, ``none``, ``neither``, ``nor`` or
  ``nobody`` earlier in the clause) or "yet" follows ("have been uploaded yet");
- passive simple past only with "successfully" or "just": "was successfully sent", "was sent
  successfully", "were just deployed". A bare "was sent" usually reports history ("it was
  sent by the customer", "the order was placed last week"), so it is not a claim.
- ``is now live`` and other states are not actions; they are left to the judge.
- terse and passive claims without "I" ("Email sent.", "Done. Note posted.", "Deployed.",
  "Sent the invoice to Ada.") and actions announced as under way at the end of the turn
  ("Sending the report now.", "I'll send it right away.", "Let me deploy the fix."): see
  ``replyguard.checks.claim_plain``. Their plain and -ing forms ("send", "sending") come from
  the map's verbs, and back up with the same tools.

**What never counts:** negations and modals ("I haven't sent", "I have not deployed", "I
didn't send", "I will send", "I can send", "I'd send"; only the fixed adverbs may stand between
subject and verb, so "never", "not" and "yet" break the pattern); questions (a sentence ending
in "?", or an inverted "Have I sent"); subordinate and hypothetical clauses, where ``once``,
``after``, ``when``, ``if``, ``before``, ``until``, ``unless``, ``whether``, ``as soon as``,
``suppose``, ``imagine``, ``wish``, ``sure`` ("not sure I sent") appear earlier in the same
clause (clauses end at ``, ; : ( ) [ ]``, dashes and "but"); passives after a modal or "to"
("should have been sent", "seems to have been deleted") or with I/we as the receiver ("I have
been sent"); other subjects ("you sent me", "they deployed", "Sent from my iPhone"); idioms
("saved you time", "saved you a seat", "saved the day", "ran into", "ran the numbers" (a
sum worked out, not a program run), "paid attention", "pushed back", "ordered them by date");
claims that introduce content shown in the reply itself, i.e. followed on their line by
"below", "above", "the following" or a line-ending colon ("I've updated the code below", "I
created a plan:"); and anything inside fenced code, inline code, HTML comments, block quotes
(``>``) or quotation marks (straight or curly, so "you wrote: 'I sent it'" is a quote).
Curly apostrophes count as straight ones (I\u2019ve).

Chat agents that edit text in the reply itself ("I've updated the draft.") should drop
``created``/``updated``/``deleted`` from their map: those claims need no tool there.

Every pattern is compiled once, at construction; one pass of a few regular expressions per
line keeps the check linear in the reply's length (lookarounds are bounded, and the sentence
splitter never backtracks, even over a long run of dots).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import NamedTuple

from replyguard.checks.base import CheckResult, failed, passed
from replyguard.checks.claim_plain import PlainClaims
from replyguard.checks.claim_tools import DEFAULT_CLAIMS, ToolMatcher
from replyguard.checks.markdown import bulleted, prose_lines
from replyguard.types import FailCategory, Reply, ToolCallRecord, Turn

MAX_LISTED = 5
"""The most unsupported claims quoted in the feedback."""
INLINE_CHARS = 20_000
"""Longer replies are scanned in a worker thread, so the event loop keeps running."""

# lemma: (simple past, past participle)
_IRREGULAR = {
    "send": ("sent", "sent"),
    "run": ("ran", "run"),
    "pay": ("paid", "paid"),
    "buy": ("bought", "bought"),
    "build": ("built", "built"),
    "write": ("wrote", "written"),
    "make": ("made", "made"),
    "sell": ("sold", "sold"),
    "spend": ("spent", "spent"),
    "tell": ("told", "told"),
    "set": ("set", "set"),
    "put": ("put", "put"),
}
_LEMMA_OF = {form: lemma for lemma, forms in _IRREGULAR.items() for form in (lemma, *forms)}
_VOWELS = frozenset("aeiou")

_ADVERB = (
    r"(?:\s+(?:just|already|also|now|then|finally|successfully|both|all|again|quickly|only|"
    r"manually|automatically|personally|actually|(?:gone|went)\s+ahead\s+and))"
)
_INVERTED = r"(?<!\bhave\s)(?<!\bhas\s)(?<!\bhad\s)(?<!\bdid\s)"  # "Have I sent it"
_SUBJECT = rf"{_INVERTED}\b(?:I|we)"
_MODAL_OR_RECEIVER = (
    *("will", "would", "should", "could", "might", "must", "may", "can", "shall", "to"),
    *("I", "we"),  # "I have been sent a file": I received it
)
_NOT_HYPOTHETICAL = "".join(rf"(?<!\b{word}\s)" for word in _MODAL_OR_RECEIVER) + (
    r"(?<!'ll\s)(?<!'d\s)(?<!n't\s)"
)
_NOT_BY_OTHERS = (
    r"(?!(?:\s+[\w'-]+){0,4}?\s+by\s+"
    r"(?!(?:me|us|myself|ourselves|e-?mail|mail|post|text|sms|message|phone|hand|courier)\b)\w)"
)
_BENEFIT = (
    r"\s+(?:you|yourself|us|me|everyone)\s+(?:(?:a|an|the|some|much|so\s+much|a\s+bit\s+of|"
    r"(?:a\s+)?(?:lots?|tons?|loads?|bunch|heaps?|plenty|great\s+deal)\s+of|\d+)\s+)?"
    r"(?:time|trips?|trouble|hassle|effort|money|headaches?|steps?|work|clicks?|minutes?|hours?|"
    r"days?|seats?|spots?|places?)\b"
)
_RUN_IDIOM = r"\s+(?:into|out|across|away|off|late|short|low|behind|the\s+numbers)\b"
_IDIOMS = {  # verb form: what makes it no claim when it follows
    "saved": rf"(?:{_BENEFIT}|\s+the\s+day\b)",
    "spared": _BENEFIT,
    "ran": _RUN_IDIOM,
    "run": _RUN_IDIOM,
    "paid": r"\s+(?:\w+\s+)?(?:attention|heed|tribute|respects?|compliments?|a\s+visit)\b",
    "pushed": r"\s+back\b",
    "ordered": r"(?:\s+\S+){0,3}?\s+(?:by|alphabetically|chronologically|numerically)\b",
    "sent": (  # "Sent from my iPhone", "Sent with love"
        r"\s+(?:from\s+(?:my|outlook|gmail|yahoo|mail|proton\w*)\b|with\s+(?:love|thanks|care)\b)"
    ),
    "filed": r"\s+under\s*:",
}
_IDIOMS |= {  # the same idioms, said of an action under way ("saving you time", "running late")
    **dict.fromkeys(("save", "saving"), _IDIOMS["saved"]),
    **dict.fromkeys(("spare", "sparing"), _BENEFIT),
    **dict.fromkeys(("pay", "paying"), _IDIOMS["paid"]),
    **dict.fromkeys(("push", "pushing"), _IDIOMS["pushed"]),
    **dict.fromkeys(("order", "ordering"), _IDIOMS["ordered"]),
    "running": _RUN_IDIOM,
}
_BLOCKER = (
    r"\b(?:once|after|when|whenever|if|before|until|till|unless|whether|soon|suppose|"
    r"supposing|imagine|assuming|wish|sure|unsure|doubt)\b"
)
_NEGATIVE_SUBJECT = r"\b(?:no|nothing|none|neither|nor|nobody)\b"  # "no one" starts with "no"
_NOT_YET = r"(?!(?:\s+[\w'-]+){0,4}?\s+yet\b)"  # "not all have been uploaded yet"
_BREAK = r"[,;:()\[\]\u2013\u2014]|\s-\s|\bbut\b"
_PASSIVE = ("passive", "passive_past", "passive_past_late")
_VERB_GROUPS = ("past", "perfect", *_PASSIVE)

# A sentence runs to a run of . ! ? before whitespace or the end of the line. Each character is
# read once (possessive runs, a one-character lookahead), so no input makes it backtrack.
_SENTENCE = re.compile(r"\S(?:[^.!?]++|[.!?]++(?=\S))*+[.!?]*+")
# Markdown emphasis (``**sent**``, ``*just*``, ``_now_``), dropped before reading; an underscore
# inside a word (send_email) is kept.
_EMPHASIS = re.compile(r"\*+|(?<!\w)_+|_+(?!\w)")
_POINTS_AT_REPLY = re.compile(r"\b(?:below|above|the\s+following)\b|:\s*$", re.IGNORECASE)
_BLOCK_QUOTE = re.compile(r"\s*>")
_LIST_ITEM = re.compile(r"[-*+#|>]|\d{1,3}[.)]\s")
# Inline code, "double" and 'single' quotations. Inside single quotes an apostrophe between
# letters (I've) is text; any other one ends the quotation, so each scan stops at the next one.
_QUOTED = re.compile(r"`[^`]*`|\"[^\"]*\"|(?<!\w)'(?=\S)(?:[^']|\b'\b)*(?<=\S)'(?!\w)")
_QUOTE_MARKS = str.maketrans(
    {"\u2018": "'", "\u2019": "'", "\u02bc": "'", "\u201c": '"', "\u201d": '"', "\u201e": '"'}
)
_PLACEHOLDER = "\u2026"  # stands in for quoted text: not a clause break, not a word
_QUOTE_CHARS = 100


class Claim(NamedTuple):
    """One claimed action found in a reply."""

    verb: str
    """The claimed verb as written, lower-cased, spaces collapsed ("sent", "backed up",
    "sending", "send")."""
    quote: str
    """The sentence making the claim (a window of it when long)."""


class ClaimCheck:
    """Fails a reply that claims an action no successful tool call of this turn backs up."""

    def __init__(
        self,
        *,
        claims: Mapping[str, Sequence[str]] | None = None,
        name: str = "claims",
        required: bool = False,
    ) -> None:
        self.name = name
        self.required = required
        tools: dict[str, list[str]] = {}
        past: set[str] = set()
        participles: set[str] = set()
        lemmas: set[str] = set()
        ings: set[str] = set()
        for verb, patterns in (DEFAULT_CLAIMS if claims is None else claims).items():
            verb_past, verb_participles = _forms(verb)
            verb_lemmas, verb_ings = _present_forms(verb)
            past |= verb_past
            participles |= verb_participles
            lemmas |= verb_lemmas
            ings |= verb_ings
            for form in verb_past | verb_participles | verb_lemmas | verb_ings:
                tools.setdefault(form, []).extend(patterns)
        self._tools = {form: ToolMatcher(patterns) for form, patterns in tools.items()}
        self._any_verb = re.compile(r"\b" + _verbs(tools), re.IGNORECASE)
        self._events = _events_pattern(past, participles)
        self._plain = PlainClaims(
            bare=_verbs((past | participles) - lemmas),  # "Run the tests" is no claim
            participle=_verbs(participles),
            lemma=_verbs(lemmas),
            ing=_verbs(ings),
        )

    def find_claims(self, text: str) -> list[Claim]:
        """Every claimed action in ``text``, in order."""
        return [
            claim
            for line, continues in _claim_lines(text)
            for claim in self._in_line(line, continues)
        ]

    def _in_line(self, line: str, continues: bool = False) -> Iterator[Claim]:
        # A claim made before "below", "the following" or a colon ending the line introduces
        # content shown in the reply itself ("I've updated the code below").
        pointers = [found.start() for found in _POINTS_AT_REPLY.finditer(line)]
        last_pointer = pointers[-1] if pointers else -1
        for sentence in _SENTENCE.finditer(line):
            text = sentence.group()
            # A cheap search first: most sentences hold no claimed verb at all.
            if "?" in text.rstrip()[-3:] or not self._any_verb.search(text):
                continue
            offset = sentence.start()
            # A hard-wrapped line does not start a sentence: "sent again (the reservation"
            starts = not (continues and offset == 0)
            plain = self._plain.find(text, starts=starts)
            found = {(start, end): verb for verb, start, end in plain}
            blocked = False  # a subordinating word came earlier in this clause
            negated = False  # so did a negative subject ("no emails", "nothing")
            for event in self._events.finditer(text):
                if event["brk"] is not None:
                    blocked = negated = False
                elif event["blk"] is not None:
                    blocked = True
                elif event["neg"] is not None:
                    negated = True
                elif not blocked:
                    group = next(g for g in _VERB_GROUPS if event[g] is not None)
                    if not (negated and group in _PASSIVE):
                        found[event.span()] = " ".join(event[group].lower().split())
            for (start, end), verb in sorted(found.items()):
                if offset + start > last_pointer:
                    yield Claim(verb, _excerpt(text, (start, end)))

    async def check(self, turn: Turn, reply: Reply) -> CheckResult:
        """Fail ``reply`` when one of its claims has no successful matching tool call."""
        if len(reply.text) > INLINE_CHARS:
            claims = await asyncio.to_thread(self.find_claims, reply.text)
        else:
            claims = self.find_claims(reply.text)
        problems: dict[str, str] = {}
        for claim in claims:
            matching = [c for c in reply.meta.tool_calls if self._tools[claim.verb].backs(c.name)]
            if claim.quote not in problems and not any(c.succeeded for c in matching):
                problems[claim.quote] = _problem(claim, matching)
        if not problems:
            return passed(self.name)
        return failed(self.name, FailCategory.INCOMPLETE, _feedback(list(problems.values())))


def _forms(verb: str) -> tuple[set[str], set[str]]:
    """The simple past forms and the participles of ``verb`` (a lemma or a past form)."""
    if not verb.split():
        raise ValueError("a claimed verb must not be empty")
    head, *rest = verb.lower().split()
    lemma = _LEMMA_OF.get(head)
    if lemma is not None:
        past, participle = ({form} for form in _IRREGULAR[lemma])
    elif head.endswith("ed"):
        past = participle = {head}
    else:
        past = participle = _regular_past(head)
    tail = "".join(f" {word}" for word in rest)
    return {form + tail for form in past}, {form + tail for form in participle}


def _present_forms(verb: str) -> tuple[set[str], set[str]]:
    """The plain forms ("send") and the -ing forms ("sending") of ``verb``. A past form's
    stem is ambiguous ("saved": "save"; "posted": "post"), so every candidate is kept: the
    wrong ones ("sav", "poste") are not words a reply holds."""
    head, *rest = verb.lower().split()
    lemma = _LEMMA_OF.get(head)
    if lemma is not None:
        lemmas = {lemma}
    elif head.endswith("ied"):
        lemmas = {head[:-3] + "y"}
    elif head.endswith("ed"):
        stem = head[:-2]
        lemmas = {stem, stem + "e"} | ({stem[:-1]} if stem[-1:] == stem[-2:-1] else set())
    else:
        lemmas = {head}
    ings = {_ing(form) for form in lemmas}
    if lemma is not None or not head.endswith("ed"):
        ings |= {form + form[-1] + "ing" for form in lemmas if _regular_past(form) != {form + "ed"}}
    tail = "".join(f" {word}" for word in rest)
    return {form + tail for form in lemmas}, {form + tail for form in ings}


def _ing(lemma: str) -> str:
    if lemma.endswith("e") and not lemma.endswith("ee"):
        return lemma[:-1] + "ing"
    return lemma + "ing"


def _regular_past(lemma: str) -> set[str]:
    if lemma.endswith("e"):
        return {lemma + "d"}
    if lemma.endswith("y") and lemma[-2:-1] not in _VOWELS:
        return {lemma[:-1] + "ied"}
    forms = {lemma + "ed"}
    consonant_vowel_consonant = (
        len(lemma) >= 3
        and lemma[-1] not in _VOWELS | {"w", "x", "y"}
        and lemma[-2] in _VOWELS
        and lemma[-3] not in _VOWELS
    )
    if consonant_vowel_consonant:  # "commit" → "committed", but "visit" → "visited": keep both
        forms.add(lemma + lemma[-1] + "ed")
    return forms


def _verbs(forms: Iterable[str]) -> str:
    """An alternation of verb forms, each a whole word, each followed by its idiom guard."""
    pieces = ["(?!)"]  # matches nothing: an empty map has no claims
    for form in sorted(forms, key=len, reverse=True):
        words = form.split()
        idiom = _IDIOMS.get(words[0])
        guard = f"(?!{idiom})" if len(words) == 1 and idiom else ""
        pieces.append(r"\s+".join(re.escape(w) for w in words) + r"\b" + guard)
    return "(?:" + "|".join(pieces) + ")"


def _events_pattern(past: Iterable[str], participles: Iterable[str]) -> re.Pattern[str]:
    """Clause breaks, blocking words and claims, found in one left-to-right pass."""
    simple, perfect = _verbs(past), _verbs(participles)
    claim = "|".join(
        (
            rf"{_SUBJECT}{_ADVERB}{{0,3}}\s+(?P<past>{simple})",
            rf"{_SUBJECT}(?:'ve|'d|\s+have|\s+had){_ADVERB}{{0,3}}\s+(?P<perfect>{perfect})",
            rf"(?:{_NOT_HYPOTHETICAL}\b(?:has|have)|(?<=\w)(?<!\bhe)(?<!\bshe)(?<!\bwho)'s)"
            rf"(?:\s+(?:all|both|just|already|now|also|finally|successfully)){{0,2}}"
            rf"\s+been{_ADVERB}{{0,2}}\s+(?P<passive>{perfect}){_NOT_BY_OTHERS}{_NOT_YET}",
            rf"\b(?:was|were)\s+(?:successfully|just)(?:\s+(?:now|already))?"
            rf"\s+(?P<passive_past>{perfect}){_NOT_BY_OTHERS}{_NOT_YET}",
            rf"\b(?:was|were)\s+(?P<passive_past_late>{perfect})\s+successfully\b"
            rf"{_NOT_BY_OTHERS}{_NOT_YET}",
        )
    )
    # Every claim starts with I, we, has, have, 's, was or were: the lookahead spares all other
    # positions the claim's lookbehinds.
    return re.compile(
        rf"(?P<brk>{_BREAK})|(?P<blk>{_BLOCKER})|(?P<neg>{_NEGATIVE_SUBJECT})"
        rf"|(?P<claim>(?=[hiw']){claim})",
        re.IGNORECASE,
    )


def _claim_lines(text: str) -> Iterator[tuple[str, bool]]:
    """The reply's own prose, line by line: no code, comments, block quotes, quotations or
    emphasis marks; with each line, whether it goes on with the sentence of the line before
    (hard-wrapped prose: that line is long or this one starts in lower case, and that line
    ends with no stop, colon or heading mark)."""
    before = ""
    for line in prose_lines(text):
        if not _BLOCK_QUOTE.match(line):
            plain = _EMPHASIS.sub("", line.translate(_QUOTE_MARKS))
            yield _QUOTED.sub(_PLACEHOLDER, plain), _continues(before, line.strip())
        before = line.strip()


def _continues(before: str, line: str) -> bool:
    if not before or not line or before[-1] in ".!?:\u2026" or before[0] in "#|":
        return False
    return not _LIST_ITEM.match(line) and (len(before) >= 60 or line[0].islower())


def _excerpt(sentence: str, span: tuple[int, int]) -> str:
    quote = sentence.strip()
    if len(quote) <= _QUOTE_CHARS:
        return quote
    start, end = max(0, span[0] - 30), span[1] + _QUOTE_CHARS - 30
    head = "…" if start > 0 else ""
    tail = "…" if end < len(sentence) else ""
    return f"{head}{sentence[start:end].strip()}{tail}"


def _problem(claim: Claim, matching: Sequence[ToolCallRecord]) -> str:
    said = f'"{claim.quote}" claims "{claim.verb}"'
    if not matching:
        return f"{said}, but no matching tool call was made this turn."
    names = ", ".join(dict.fromkeys(f"'{call.name}'" for call in matching))
    calls = "call" if len(matching) == 1 else "calls"
    return f"{said}, but the matching tool {calls} ({names}) failed."


def _feedback(problems: list[str]) -> str:
    listed = bulleted(problems, MAX_LISTED)
    what = "an action" if len(problems) == 1 else f"{len(problems)} actions"
    return (
        f"The reply claims {what} that no successful tool call this turn backs up:\n{listed}\n"
        "Either do it now with the right tool, or do not claim it: say plainly what was done "
        "and what was not."
    )
