"""Instructions per injection screen (``suspected_injection``) and for importing it, counted
by callgrind.

    python benchmarks/screen_instructions.py [--screens N] [--needles]

Rows: importing the screen (``replyguard.context._injection`` after ``replyguard.context``,
once, in a fresh interpreter: its patterns and tables), then the screen of the in-process
verified turn's 1 KB reply (``scenarios.typical_turn``), of a 1 KB reply of ordinary prose
whose words hold some of the phrase rules' anchor words in innocent use ("they", "system",
"ignore", "note", "model"), of 32K characters of prose, of a short code reply (backticks,
colons, brackets: common needs), of 40K characters of prose crowded with the leads "the "
and "any " of a rule its needs and anchors let in, and of varied 1 KB replies (a different
chunk of docs/ each screen: the needles present vary, as across real replies). Each row's
work runs inside one ``functools.reduce`` call, and callgrind counts only inside it
(``--toggle-collect=functools_reduce``) and writes one dump as it leaves (``--dump-after``):
no warm-up counted. The import row counts compiling the modules' sources too unless their
bytecode is cached: run once first without ``PYTHONDONTWRITEBYTECODE`` (``PYTHONPYCACHEPREFIX``
keeps the cache out of the tree). ``--needles`` adds rows for the screen's needle search
beside the alternatives measured against it (``_needle_cases``). Needs valgrind; under a
minute.
"""

from __future__ import annotations

import functools
import importlib
import itertools
import os
import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
IMPORT = "import the screen (once)"
# An everyday reply: the words a phrase rule's anchors share with plain English, none of
# them aimed at a reviewer.
ORDINARY = (
    "Thanks for the detailed note. I looked at the logs they sent over, and the model of the "
    "failure is simpler than it first seemed: the backup system restarts the worker whenever "
    "the disk fills, so the job never reaches the step that writes its report.\n\n"
    "Here is what I would do next. First, ignore the warnings about the cache for now; they "
    "are noisy but harmless, and the team already has a ticket for them. Second, give the "
    "worker a larger scratch volume and check whether the message about the full disk goes "
    "away. Third, if the job still stops early, send me the exact time it happened and the "
    "name of the host, and I will compare it with the system's own records.\n\n"
    "A few things to keep in mind while you test this. The prompt you see at login is set by "
    "the shell profile, not by the service, so changing it will not affect the job. Reading "
    "the configuration back after each change is the quickest way to be sure it was saved. "
    "And if they ask about the correct retention period, the current policy says thirty days "
    "for logs and a year for reports.\n\n"
    "Let me know how it goes, and I am happy to hop on a call tomorrow if that helps."
)
# A short code reply: backticks, colons and brackets, "model" in a key (common needs).
CODE_REPLY = (
    "Use `dict.get` with a default:\n\n```python\nconfig = load(path)\n"
    'name = config.get("model", ["default"])[0]\nprint(f"model: {name}")\n```\n\n'
    'The `[0]` picks the first entry; for nested keys see `config["judge"]["model"]` '
    "and the docs: https://docs.python.org/3/library/stdtypes.html#dict.get"
)


def _cases() -> list[tuple[str, Callable[[], object]]]:
    import scenarios as sc

    from replyguard.context._injection import suspected_injection

    _, reply = sc.typical_turn()
    return [
        ("the in-process turn's 1 KB reply", functools.partial(suspected_injection, reply.text)),
        ("1 KB of ordinary prose (they, system, ignore)", lambda: suspected_injection(ORDINARY)),
        ("32K characters of prose", functools.partial(suspected_injection, sc.prose(32_000, 7))),
        (f"a {len(CODE_REPLY)}-character code reply", lambda: suspected_injection(CODE_REPLY)),
        ("40K of prose, 'the ' every ~50 characters, one 'any model checking'", _the_heavy()),
        ("varied 1 KB replies: a new chunk of the docs each screen", _varied()),
    ]


def _needle_cases() -> list[tuple[str, Callable[[], object]]]:
    """``--needles``: the screen's needle search (``_present``: one ``in`` a needle) on the turn's
    1 KB reply, beside what the alternatives tried cost before any needle is reported: one
    regex alternation of the needles (which would still miss overlapped ones) and the set of
    the text's characters."""
    import re

    import scenarios as sc

    from replyguard.context._screen_gate import _needles, _present

    _, reply = sc.typical_turn()
    flat = reply.text.lower()
    longest_first = sorted(_needles(), key=len, reverse=True)
    alternation = re.compile("|".join(map(re.escape, longest_first)))
    return [
        ("needles: one `in` each (_present), the 1 KB reply", lambda: _present(flat)),
        ("needles: one regex alternation, findall", lambda: alternation.findall(flat)),
        ("needles: the set of the text's characters alone", lambda: set(flat)),
    ]


def _the_heavy() -> Callable[[], object]:
    """40K characters of prose whose 'the ' and 'any ' lead a phrase rule that one of its
    needs and anchors lets in (no match)."""
    import scenarios as sc

    from replyguard.context._injection import suspected_injection

    text = sc.prose(40_000, 7) + " Any model checking the logs reads them twice."
    return functools.partial(suspected_injection, text)


def _varied() -> Callable[[], object]:
    """1 KB chunks of the project's documentation, a different one each screen: the needles
    present vary from text to text, as across real replies (a cache keyed on them misses)."""
    from replyguard.context._injection import suspected_injection

    pages = [path.read_text(encoding="utf-8") for path in sorted(HERE.parent.glob("docs/*.md"))]
    chunks = [page[i : i + 1000] for page in pages for i in range(0, len(page) - 1000, 700)]
    texts = itertools.cycle(chunks)
    return lambda: suspected_injection(next(texts))


def _child(screens: int, names_file: Path, needles: bool) -> None:
    """Under callgrind: the import counted once, then each case warmed and its screens
    inside one ``reduce``."""
    sys.path.insert(0, str(HERE))
    importlib.import_module("replyguard.context")
    functools.reduce(
        lambda _, __: importlib.import_module("replyguard.context._injection"), range(1), None
    )
    cases = _cases() + (_needle_cases() if needles else [])
    names_file.write_text("\n".join([IMPORT, *(name for name, _ in cases)]))
    for _, screen in cases:
        for _ in range(3):
            screen()
        functools.reduce(lambda _, __: screen(), range(screens), None)


def main() -> int:
    sys.path.insert(0, str(HERE))
    from prompt_instructions import counted_args

    needles = "--needles" in sys.argv  # the needle search's rows too (``_needle_cases``)
    if needles:
        sys.argv.remove("--needles")
    args = counted_args(__doc__, "--screens", 50, "screens counted per case")
    if args.child:
        _child(args.screens, args.child, needles)
        return 0
    from prompt_instructions import reduce_counts  # the parent's only: the child counts imports

    env = {**os.environ, "PYTHONHASHSEED": "0"}
    flags = ["--screens", str(args.screens), *(["--needles"] if needles else [])]
    labels, counts = reduce_counts(__file__, flags, env)
    print(f"\n== instructions per injection screen ({args.screens} screens a case)")
    for label, total in zip(labels, counts[-len(labels) :], strict=True):
        per = total if label == IMPORT else total / args.screens
        print(f"  {per / 1000:12,.1f}K  {label}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
