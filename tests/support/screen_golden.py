"""The injection screen's recorded findings on the seeded corpus (``support.screen_corpus``):
the golden file ``tests/context/data/screen_findings.json`` that
``tests/context/test_screen_golden.py`` holds the shipped screen to.

The file stores, per text, a short digest of the text (BLAKE2b, 8 bytes, hex) and the reason
codes found in it; the texts themselves are regenerated from the seeded corpus, and a digest
that no longer matches says the corpus changed.

It was first recorded from the screen as it stood before its anchor search was rewritten
(main 9b983fe6), so it pins that screen's findings. Regenerating it records whatever the
shipped screen finds now: that is a change of the screen's behaviour, to be made deliberately
and reviewed as one (the diff of the file shows each text whose findings changed)::

    PYTHONPATH=src:tests python -m support.screen_golden
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from support import screen_corpus

PATH = Path(__file__).resolve().parent.parent / "context" / "data" / "screen_findings.json"
COMMAND = "PYTHONPATH=src:tests python -m support.screen_golden"
CORPUS_SIZE = 4_000  # texts of ``screen_corpus.texts`` (its default seed)

Screen = Callable[[str], list[str]]
Findings = dict[str, list[tuple[str, list[str]]]]  # per section, (digest, reasons) per text


def digest(text: str) -> str:
    """The text's BLAKE2b digest, 8 bytes in hex."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def example_variants() -> list[str]:
    """Each rule example alone, in upper case, glued to letters, on its own line, twice."""
    return [
        variant
        for text in screen_corpus.RULE_EXAMPLES
        for variant in (text, text.upper(), f"x{text}x", f"\n{text}\n", f"{text} {text}")
    ]


def sections() -> dict[str, list[str]]:
    """The texts recorded, by section, in order."""
    return {
        "corpus": list(screen_corpus.texts(CORPUS_SIZE)),
        "huge": screen_corpus.huge_texts(),
        "examples": example_variants(),
    }


def record(screen: Screen) -> Findings:
    """What ``screen`` finds in each text of each section."""
    return {
        name: [(digest(text), screen(text)) for text in texts] for name, texts in sections().items()
    }


def write(findings: Findings, path: Path = PATH) -> None:
    """The findings as JSON, a text a line (so a diff shows each text whose findings changed)."""
    lines = ["{"]
    for number, (name, rows) in enumerate(findings.items()):
        lines.append(f"  {json.dumps(name)}: [")
        lines += [f"    {json.dumps([key, reasons])}," for key, reasons in rows]
        lines[-1] = lines[-1].rstrip(",")
        lines.append("  ]" + ("," if number < len(findings) - 1 else ""))
    lines.append("}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def load(path: Path = PATH) -> Findings:
    """The recorded findings (``write``'s file)."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    return {name: [(key, list(reasons)) for key, reasons in rows] for name, rows in raw.items()}


def main() -> None:
    """Records the shipped screen's findings: a reviewed change of its behaviour (module doc)."""
    from replyguard.context._injection import suspected_injection

    write(record(suspected_injection))
    print(f"wrote {PATH}")


if __name__ == "__main__":
    main()
