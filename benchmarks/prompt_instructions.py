"""Instructions per judge prompt build (``build_judge_prompt``), counted by callgrind.

    python benchmarks/prompt_instructions.py [--builds N]

Counts the build of the in-process verified turn (``scenarios.typical_turn``, with the same
arguments the turn passes: its rules, run metadata and the screen's cutter of the reply) and
of the ``sized_turn`` prose turns of 8K, 32K, 128K and 1M characters (128K also CJK and JSON).
Each case's builds run inside one ``functools.reduce`` call, and callgrind counts only inside
it (``--toggle-collect=functools_reduce``) and writes one dump as it leaves
(``--dump-after``): no controller, no import or warm-up counted. The section code is fixed so
every build does the same work. Needs valgrind; about a minute.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
NONCE = "0123456789ab"
SIZED = [
    (8000, "prose"),
    (32000, "prose"),
    (128_000, "prose"),
    (128_000, "cjk"),
    (128_000, "json"),
    (1_000_000, "prose"),
]


async def _turn_arguments() -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The arguments the in-process verified turn builds its prompt with."""
    import in_process

    from replyguard.context import _build
    from replyguard.runner import _prompting

    seen: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    real = _build.build_judge_prompt

    def recording(*args: Any, **kwargs: Any) -> Any:
        seen.append((args, kwargs))
        return real(*args, **kwargs)

    prompting: Any = _prompting  # the turn's own look-up of the builder, recorded
    prompting.build_judge_prompt = recording
    try:
        verified_turn, _ = await in_process.instant_sides()
        await verified_turn()
    finally:
        prompting.build_judge_prompt = real
    return seen[-1]


def _cases() -> list[tuple[str, Callable[[], Any]]]:
    import scenarios as sc

    from replyguard.context import ContextLimits, build_judge_prompt

    args, kwargs = asyncio.run(_turn_arguments())
    kwargs = {**kwargs, "nonce": NONCE}
    turn_build = functools.partial(build_judge_prompt, *args, **kwargs)
    cases: list[tuple[str, Callable[[], Any]]] = [("in-process verified turn", turn_build)]
    for chars, kind in SIZED:
        turn, reply, rules = sc.sized_turn(chars, kind)
        label = "1M" if chars >= 1_000_000 else f"{chars // 1000}K"
        build = functools.partial(
            build_judge_prompt, turn, reply, limits=ContextLimits(), rules=rules, nonce=NONCE
        )
        cases.append((f"sized turn, {label} characters of {kind}", build))
    return cases


def _child(builds: int, names_file: Path) -> None:
    """Under callgrind: each case warmed, then its builds inside one ``reduce``."""
    sys.path.insert(0, str(HERE))
    cases = _cases()
    names_file.write_text("\n".join(name for name, _ in cases))
    for _, build in cases:
        for _ in range(3):
            build()
        functools.reduce(lambda _, __: build(), range(builds), None)


def reduce_counts(
    script: str, arguments: list[str], env: dict[str, str] | None = None
) -> tuple[list[str], list[int]]:
    """Run ``script arguments --child NAMES`` under callgrind, counting only inside
    ``functools.reduce`` calls, one dump each: the names the child wrote to NAMES (one a line)
    and each dump's instruction count."""
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        names = folder / "names"
        command = [
            "valgrind",
            "--tool=callgrind",
            "--collect-atstart=no",
            "--toggle-collect=functools_reduce",
            "--dump-after=functools_reduce",
            f"--callgrind-out-file={folder / 'cg.out'}",
            sys.executable,
            script,
            *arguments,
            "--child",
            str(names),
        ]
        subprocess.run(command, check=True, capture_output=True, env=env or dict(os.environ))
        counts = []
        dumps = sorted(folder.glob("cg.out.*"), key=lambda path: int(path.suffix[1:]))
        for dump in dumps:
            found = re.search(r"^summary: (\d+)", dump.read_text(errors="replace"), re.M)
            counts.append(int(found.group(1)) if found else 0)
        return names.read_text().split("\n"), counts


def counted_args(doc: str, flag: str, default: int, help_text: str) -> argparse.Namespace:
    """The command line of a script counted by ``reduce_counts``: how many calls a case
    (``flag``) and the hidden ``--child NAMES`` the counted run gets."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument(flag, type=int, default=default, help=help_text)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args()


def main() -> int:
    args = counted_args(__doc__, "--builds", 20, "builds counted per case")
    if args.child:
        _child(args.builds, args.child)
        return 0
    labels, counts = reduce_counts(__file__, ["--builds", str(args.builds)])
    print(f"\n== instructions per judge prompt build ({args.builds} builds a case)")
    for label, total in zip(labels, counts[-len(labels) :], strict=True):
        print(f"  {total / args.builds / 1000:10,.1f}K  {label}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
