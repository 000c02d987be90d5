"""Claims made without "I" and a past tense, for ``ClaimCheck``: terse, passive and announced.

**Terse and passive** ("Email sent.", "Done. Note posted.", "PDF saved to reports/q3.pdf.",
"Deployed.", "All set: invoice emailed to Ada.", "Sent the invoice to Ada."): at the start of
a sentence (after a bullet, an emoji or a "Done", "All set", "OK" of its own; not at the
start of a hard-wrapped line that goes on with a sentence), up to four words
of subject and a claimed participle. The subject must hold no pronoun, auxiliary, negation,
hedge or subordinating word ("Not sent yet.", "If it's sent", "Maybe it was sent", "Emails
you sent"). What follows the participle must be what follows a passive: the end, a
preposition ("to", "for", "via", …), an adverb ("successfully") or punctuation; with no
subject at all, also an object ("Sent the invoice", "Emailed Ada", "Uploaded v2.1"). So "Bob
sent the invoice" (an active verb of someone else) and "Saved searches appear in the sidebar"
(an adjective) are no claims. Nor is a participle whose clause goes on with a finite verb, a
subordinating word, "yet" or "by" someone else ("Emails sent after 5pm are queued", "Files
uploaded to S3 are public", "Posted by admin").

**Announced as under way** ("Sending the report now.", "I'm sending it to Ada.", "I'll send it
right away.", "Let me deploy the fix.", "The email is being sent now."): the turn ends with the
reply, so an action said to be happening needs its call in this turn's ledger too. "I'll",
"I'm going to" and a sentence that starts with "Sending" need a word of immediacy ("now",
"right away", "immediately", …): "I'll send it tomorrow" is a plan, not an action under way.
A sentence holding a subordinating word ("if", "once", "unless", "after"), a negation or a
time to come ("tomorrow", "next week", "on Friday") announces nothing.

Every regular expression here is anchored or built of bounded pieces; the rest of a sentence
is read once, word by word.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

_PREFIX = r"(?:[^\w\s\u2026]{1,4}\s*|\d{1,3}[.)]\s+)?"  # a bullet, an emoji, "1."
_INTERJECTION = (
    r"(?P<interjection>(?:(?:quick\s+|status\s+)?update|all\s+done|all\s+set|done|right|cool|"
    r"will\s+do|understood|okay|ok|great\s+news|good\s+news|great|sure\s+thing|sure|perfect|"
    r"yes|yep|alright|all\s+right|on\s+it|got\s+it|thank\s+you|thanks)"
    r"[\s,:;!.\u2013\u2014-]{1,4})?"
)
_TOKEN = r"[^\s,;:!?()\[\]]{1,60}"
_LEADING_ADVERBS = r"(?:(?:just|already|now|successfully|all|both|also|finally)\s+){0,2}"
_STATE = r"(?:(?P<state>is|are)\s+(?P<now>now\s+)?)?"  # "Done, the doc is saved."
# "Created at: 2024-05-01", "Filed under: misc": a field's label, not a claim
_LABEL = re.compile(r"\s+(?:at|on|in|under|by|to|from|for)(?:\s+[^\W\d]+)?\s*:")
# "Say the word and I'll send it now": an offer that waits for the user
_WAITS_FOR_USER = re.compile(
    r"\b(?:say\s+the\s+word|let\s+me\s+know|tell\s+me|just\s+ask|give\s+me\s+the\s+go)\b",
    re.IGNORECASE,
)
_WORD = re.compile(r"[\w'-]+")
_BREAK = re.compile(r"[,;()\[\]\u2013\u2014]|:(?!\d)|\s-\s|\bbut\b", re.IGNORECASE)  # not 9:40
_BY_OTHERS = re.compile(
    r"\bby\s+(?!(?:me|us|myself|ourselves|e-?mail|mail|post|text|sms|message|phone|hand)\b)\w",
    re.IGNORECASE,
)
_IMMEDIATE = re.compile(
    r"\b(?:now|right\s+away|straight\s*away|immediately|at\s+once|asap|shortly|"
    r"in\s+a\s+(?:moment|sec|second|minute|jiffy))\b",
    re.IGNORECASE,
)

_NOT_SUBJECT = frozenset(
    {"i", "you", "he", "she", "we", "they", "it", "this", "that", "which", "who", "what"}
    | {"there", "here", "me", "him", "her", "us", "them", "someone", "somebody", "anyone"}
    | {"is", "are", "was", "were", "be", "been", "being", "am", "has", "have", "had", "do"}
    | {"does", "did", "will", "would", "can", "could", "should", "may", "might", "must"}
    | {"shall", "to", "get", "gets", "got", "getting", "not", "no", "never", "nothing"}
    | {"none", "nobody", "neither", "nor", "zero", "0", "maybe", "perhaps", "probably"}
    | {"possibly", "likely", "apparently", "supposedly", "hopefully", "time", "money"}
    | {"last", "first", "recently", "previously", "i'm", "i've", "it's", "that's", "you're"}
    | {"we're", "they're", "you've", "we've", "they've", "let", "please", "well", "nicely"}
)
"""Words that make the words before a participle no subject of a terse claim."""

_BLOCKERS = frozenset(
    {"if", "once", "when", "whenever", "after", "before", "until", "till", "unless"}
    | {"whether", "soon", "suppose", "assuming", "though", "although", "because", "since"}
)
_NEGATIONS = frozenset({"not", "never", "no", "nothing", "none", "nobody", "yet"})
_FUTURE = frozenset(
    {"tomorrow", "tonight", "later", "next", "monday", "tuesday", "wednesday", "thursday"}
    | {"friday", "saturday", "sunday", "weekend", "afternoon", "evening"}
)
_FINITE = frozenset(
    {"is", "are", "was", "were", "be", "been", "will", "would", "can", "cannot", "could"}
    | {"should", "shall", "may", "might", "must", "get", "gets", "go", "goes", "need", "needs"}
    | {"has", "have", "had", "do", "does", "wait", "waits", "appear", "appears", "keep"}
    | {"keeps", "take", "takes", "cost", "costs", "require", "requires", "stay", "stays"}
    | {"remain", "remains", "show", "shows", "sync", "syncs", "look", "looks", "seem"}
    | {"seems", "include", "includes", "mean", "means", "bounce", "bounces", "expire"}
    | {"expires", "apply", "applies", "work", "works", "fail", "fails", "happen", "happens"}
    | {"deploys", "sends", "runs", "saves", "lands", "land", "live", "lives", "that's"}
    | {"it's", "there's", "here's", "itself", "themselves", "own", "or"}
)
"""Finite verbs: a clause that goes on with one used the participle as an adjective."""

_AFTER_PASSIVE = frozenset(
    {"to", "for", "in", "on", "at", "via", "with", "into", "onto", "from", "as", "through"}
    | {"successfully", "just", "now", "already", "and", "too", "again", "correctly", "fine"}
    | {"ok", "okay", "without", "over", "right", "immediately", "across", "under", "by"}
    | {"cleanly", "smoothly", "properly", "perfectly"}
)
"""Words that may follow a terse passive: "Email sent to Ada", "Deployed successfully"."""

_OBJECT_START = frozenset(
    {"the", "a", "an", "it", "them", "him", "her", "me", "us", "you", "your", "my", "our"}
    | {"his", "their", "this", "that", "these", "those", "all", "both", "every", "each"}
    | {"some", "another", "more", "one", "two", "three", "four", "five", "six", "ten"}
    | {"several", "out", "up"}
)
"""Words that start the object of a subject-less claim: "Sent the invoice", "Merged it"."""


class PlainClaims:
    """Finds terse, passive and announced claims in one sentence (see the module docstring).

    Each alternation is a regular expression source of verb forms, each a whole word and
    guarded against its idioms: ``bare`` the past forms and participles, ``participle`` the
    participles, ``lemma`` the plain forms ("send"), ``ing`` the -ing forms ("sending").
    """

    def __init__(self, *, bare: str, participle: str, lemma: str, ing: str) -> None:
        start = rf"^{_PREFIX}{_INTERJECTION}"
        self._terse = re.compile(
            rf"{start}(?P<subject>(?:{_TOKEN}\s+){{0,4}}?){_STATE}{_LEADING_ADVERBS}"
            rf"(?P<verb>{bare})",
            re.IGNORECASE,
        )
        self._ing_start = re.compile(rf"{start}(?:(?:now|just)\s+)?(?P<verb>{ing})", re.IGNORECASE)
        self._announced = re.compile(
            r"\b(?:I|we)(?:'m|\s+am|'re|\s+are)(?:\s+(?:now|just|currently|already))?\s+"
            rf"(?:(?P<about>about\s+to\s+)|(?P<going>going\s+to\s+))?(?P<progressive>{ing}|"
            rf"(?<=to\s){lemma})"
            rf"|\b(?:I|we)(?:'ll|\s+will|\s+shall)(?:\s+(?:now|just|immediately|go\s+ahead\s+and))"
            rf"{{0,2}}\s+(?P<will>{lemma})"
            rf"|\blet\s+me\s+(?:(?:now|just)\s+|go\s+ahead\s+and\s+)?(?P<let>{lemma})"
            rf"|\b(?:is|are)\s+(?:now\s+)?being\s+(?P<being>{participle})",
            re.IGNORECASE,
        )

    def find(self, sentence: str, *, starts: bool = True) -> Iterator[tuple[str, int, int]]:
        """Each claim in ``sentence``: the verb as written, and the span of the claim. Unless
        ``sentence`` ``starts`` a sentence, the forms that open one are not looked for."""
        terse = self._terse.match(sentence) if starts else None
        if terse is not None and _terse_ok(terse, sentence):
            yield _verb(terse)
        words = [word.lower() for word in _WORD.findall(sentence)]
        if _WAITS_FOR_USER.search(sentence) or any(
            w in _BLOCKERS or w in _NEGATIONS or w in _FUTURE or w.endswith("n't") for w in words
        ):
            return
        started = self._ing_start.match(sentence) if starts else None
        if started is not None and _ing_start_ok(started, sentence):
            yield _verb(started)
        # Where the last "now" and the last "by someone" end: each is looked for once.
        last_now = max((m.end() for m in _IMMEDIATE.finditer(sentence)), default=-1)
        last_by = max((m.end() for m in _BY_OTHERS.finditer(sentence)), default=-1)
        for found in self._announced.finditer(sentence):
            group = next(g for g in ("progressive", "will", "let", "being") if found[g])
            needs_now = group == "will" or found["going"] is not None
            if needs_now and last_now <= found.start():
                continue
            if group == "being" and last_by > found.end():
                continue
            yield " ".join(found[group].lower().split()), found.start(), found.end()


def _verb(found: re.Match[str]) -> tuple[str, int, int]:
    return " ".join(found["verb"].lower().split()), found.start("verb"), found.end()


def _terse_ok(found: re.Match[str], sentence: str) -> bool:
    subject = [w.lower().strip(".'\"") for w in found["subject"].split()]
    if any(w in _NOT_SUBJECT or w in _BLOCKERS or w.endswith("n't") for w in subject):
        return False
    if found["state"] and not (found["interjection"] or found["now"]):
        return False  # "The file is saved in UTF-8" describes; "Done, the file is saved" claims
    rest = sentence[found.end() :]
    heading = not (found["state"] or found["interjection"]) and subject[:1] in (["the"], ["a"])
    if heading and not _WORD.search(rest):
        return False  # "The options sent.": a noun phrase, a heading
    if not _follows_claim(rest, with_object=not subject) or _LABEL.match(rest):
        return False
    # "Booked, pending or cancelled: the statuses": a list of states goes on past the comma
    clause = rest if rest.startswith(",") else _BREAK.split(rest, maxsplit=1)[0]
    if _BY_OTHERS.search(clause):
        return False
    return not any(_ends_claim(w.lower()) for w in _WORD.findall(clause))


def _ing_start_ok(found: re.Match[str], sentence: str) -> bool:
    rest = sentence[found.end() :]
    clause = _BREAK.split(rest, maxsplit=1)[0]  # "Sending it now; it should arrive soon."
    if not _follows_claim(rest, with_object=True) or not _IMMEDIATE.search(clause):
        return False
    # "Sending large files now would fail": the -ing form is the subject of a finite verb
    return not any(w.lower() in _FINITE for w in _WORD.findall(clause))


def _follows_claim(rest: str, *, with_object: bool) -> bool:
    """Whether ``rest`` may follow a claimed verb: the end, punctuation, a word that follows a
    passive, or (``with_object``) the start of an object."""
    text = rest.lstrip()
    if text[:1] in ("'", "-") and text[1:2].isalnum():
        return False  # "the run's input", "run-to-run": the verb was part of a longer word
    if not text or not (text[0].isalnum() or text[0] == "_"):
        return True
    word = _WORD.match(text)
    if word is None:
        return True
    lowered = word.group().lower()
    if lowered in _AFTER_PASSIVE:
        return True
    if not with_object:
        return False
    written = word.group()
    return lowered in _OBJECT_START or written[0].isupper() or any(c.isdigit() for c in written)


def _ends_claim(word: str) -> bool:
    return word in _FINITE or word in _BLOCKERS or word == "yet" or word.endswith("n't")
