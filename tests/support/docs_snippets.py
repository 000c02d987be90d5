"""Run the fenced code blocks of a markdown page (README.md, docs/*.md), in order.

    python tests/support/docs_snippets.py docs/getting-started.md

The conventions, for whoever writes a page:

- On a *script page* (``SCRIPT_PAGES``: the README and Getting started, the pages a newcomer
  copies from first), each ```` ```python ```` block is a whole program, run as a reader runs
  it: saved to a file (its ``title="NAME.py"``, or one named after its line) and run with
  ``python FILE`` in a subprocess, in the page's working directory, with no API key. So a
  top-level ``await`` fails there as it would for the reader, no name carries over from an
  earlier block, and a hidden ``snippet-setup`` block is an error. The script must exit 0,
  print its ``#>`` lines, and print nothing on stderr (where its ``logging.basicConfig``
  shows replyguard's warnings) unless preceded by ``<!-- expect-warnings -->``.
- Elsewhere, ```` ```python ```` blocks run, in order, in one namespace per page (so a later
  block may use what an earlier one defined), with top-level ``await`` allowed. A block may
  say what it prints: each ``#> text`` comment is one expected line of its output (``...``
  inside a line matches any text). Any WARNING or ERROR on the ``replyguard`` logger fails
  the block, so a judge call that silently failed open (no key, no network) cannot pass; a
  block preceded by ``<!-- expect-warnings -->`` may log them.
- A block preceded by ``<!-- no-run: why -->`` is not run; the reason is required.
- ``<!-- snippet-setup`` ... ``-->`` is a python block hidden from readers (a fake the visible
  blocks use in place of a real provider); it runs where it stands.
- ```` ```json ```` blocks must parse, and are verifier configs (``VerifierConfig.from_dict``)
  unless preceded by ``<!-- not-a-config: what it is -->``.
- A block of any language with ``title="NAME"`` (``HEARTBEAT.md``, ``verifier.json``) is also
  written to ``NAME`` in the page's working directory, for the blocks after it to read.
- ```` ```console ```` blocks are run: each ``$ command`` line runs in bash, and its output
  (standard output and error together) must be the lines below it (``...`` inside a line
  matches any text; a line that is only ``...`` matches any number of lines); ``python`` there is
  the interpreter running the page.
- ```` ```sh ```` blocks are syntax-checked with ``bash -n``, not run: they install packages or
  call what a test cannot (the README's two commands run in CI as they are).

Every page runs in a fresh temporary working directory holding copies of
``config.example.json``, ``replyguard.schema.json`` and ``examples/``, with no API key in the
environment: snippets run against the shipped fakes (``replyguard.testing``) or litellm's
``mock_response``.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import inspect
import io
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path


def find_root() -> Path:
    here = Path(__file__).resolve().parent
    for folder in (here, *here.parents):
        if (folder / "pyproject.toml").exists():
            return folder
    raise RuntimeError("no pyproject.toml above " + str(here))


ROOT = find_root()
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
TITLE = re.compile(r'title="([^"]+)"')
MARKER = re.compile(r"^\s*<!--\s*(no-run|not-a-config|expect-warnings)\s*:?\s*(.*?)\s*-->\s*$")
RUN = ("python", "py", "json", "console", "sh", "bash", "shell")
# The pages whose python blocks are whole programs, each run as ``python FILE`` (module doc).
SCRIPT_PAGES = ("README.md", "docs/getting-started.md")
# Provider keys a developer may have set: a snippet must never reach a real provider.
KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "AZURE_API_KEY")


@dataclass
class Block:
    lang: str
    code: str
    line: int
    title: str | None = None
    markers: dict[str, str] = field(default_factory=dict)
    hidden: bool = False

    @property
    def where(self) -> str:
        return f"line {self.line}"


def blocks(text: str) -> list[Block]:
    """The page's fenced blocks and hidden setup blocks, in order, with their markers."""
    lines = text.splitlines()
    found: list[Block] = []
    markers: dict[str, str] = {}
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.strip().startswith("<!-- snippet-setup"):
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "-->")
            code = "\n".join(lines[i + 1 : end]) + "\n"
            found.append(Block("python", code, i + 2, hidden=True))
            i = end + 1
            continue
        marker = MARKER.match(line)
        if marker:
            markers[marker.group(1)] = marker.group(2)
            i += 1
            continue
        fence = FENCE.match(line)
        if fence:
            indent, mark, info = fence.group("indent"), fence.group("fence"), fence.group("info")
            end = i + 1
            while end < len(lines) and not (
                lines[end].strip().startswith(mark) and lines[end].strip() == mark[0] * len(mark)
            ):
                end += 1
            body = [ln[len(indent) :] if ln.startswith(indent) else ln for ln in lines[i + 1 : end]]
            title = TITLE.search(info)
            found.append(
                Block(
                    lang=info.split()[0] if info.split() else "",
                    code="\n".join(body) + "\n",
                    line=i + 1,
                    title=title.group(1) if title else None,
                    markers=markers,
                )
            )
            markers = {}
            i = end + 1
            continue
        if line.strip():
            markers = {}
        i += 1
    return found


def matches(expected: list[str], actual: list[str]) -> bool:
    """``expected`` lines against ``actual`` ones; ``...`` is a wildcard (see the module doc)."""
    if not expected:
        return not actual
    head, rest = expected[0], expected[1:]
    if head.strip() == "...":
        return any(matches(rest, actual[k:]) for k in range(len(actual) + 1))
    if not actual:
        return False
    pattern = ".*".join(re.escape(part) for part in head.rstrip().split("..."))
    return re.fullmatch(pattern, actual[0].rstrip()) is not None and matches(rest, actual[1:])


def expected_output(code: str) -> list[str] | None:
    lines = [m.group(1) for m in re.finditer(r"#> ?(.*)$", code, flags=re.MULTILINE)]
    return lines or None


class Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


class Page:
    """Runs one page's blocks in a working directory; ``failures`` says what went wrong."""

    def __init__(self, path: Path, workdir: Path, scripts: bool | None = None) -> None:
        self.path = path
        self.workdir = workdir
        self.scripts = is_script_page(path) if scripts is None else scripts
        self.namespace: dict[str, object] = {"__name__": "__main__"}
        self.failures: list[str] = []
        self.runner = asyncio.Runner()
        self.log = Captured()
        logging.getLogger("replyguard").addHandler(self.log)

    def fail(self, block: Block, message: str) -> None:
        self.failures.append(f"{self.path.name} {block.where} ({block.lang}): {message}")

    def run(self) -> list[str]:
        try:
            for block in blocks(self.path.read_text(encoding="utf-8")):
                if block.title:
                    target = self.workdir / block.title
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_text(block.code, encoding="utf-8")
                if block.lang not in RUN:
                    continue
                if "no-run" in block.markers:
                    if not block.markers["no-run"]:
                        self.fail(block, "<!-- no-run: ... --> needs a reason")
                    continue
                getattr(
                    self,
                    "run_"
                    + {"py": "python", "bash": "sh", "shell": "sh"}.get(block.lang, block.lang),
                )(block)
        finally:
            self.runner.close()
            logging.getLogger("replyguard").removeHandler(self.log)
        return self.failures

    def run_python(self, block: Block) -> None:
        if self.scripts:
            self.run_script(block)
            return
        self.log.records.clear()
        stdout = io.StringIO()
        try:
            code = compile(
                block.code,
                f"{self.path.name}:{block.line}",
                "exec",
                flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT,
            )
            with contextlib.redirect_stdout(stdout):
                if code.co_flags & inspect.CO_COROUTINE:
                    self.runner.run(eval(code, self.namespace))
                else:
                    exec(code, self.namespace)
        except BaseException as exc:
            import traceback

            self.fail(block, "raised\n" + "".join(traceback.format_exception(exc)))
            return
        sys.stdout.write(stdout.getvalue())
        expected = expected_output(block.code)
        actual = stdout.getvalue().splitlines()
        if expected is not None and not matches(expected, actual):
            self.fail(block, f"printed {actual!r}, the block says {expected!r}")
        if self.log.records and "expect-warnings" not in block.markers:
            logged = [f"{r.levelname} {r.getMessage()}" for r in self.log.records]
            self.fail(block, f"logged {logged!r}")

    def run_script(self, block: Block) -> None:
        """The block as a reader runs it: ``python FILE`` in the page's directory, no key."""
        if block.hidden:
            self.fail(block, "a script page shows all it runs: no snippet-setup")
            return
        name = block.title if (block.title or "").endswith(".py") else f"line_{block.line}.py"
        (self.workdir / str(name)).write_text(block.code, encoding="utf-8")
        result = subprocess.run(
            [sys.executable, str(name)],
            cwd=self.workdir,
            env=reader_env(),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        sys.stdout.write(f"$ python {name}\n{result.stdout}{result.stderr}")
        if result.returncode:
            self.fail(block, f"python {name} exited {result.returncode}:\n{result.stderr}")
            return
        expected = expected_output(block.code)
        actual = result.stdout.splitlines()
        if expected is not None and not matches(expected, actual):
            self.fail(block, f"printed {actual!r}, the block says {expected!r}")
        if result.stderr.strip() and "expect-warnings" not in block.markers:
            self.fail(block, f"python {name} printed on stderr:\n{result.stderr}")

    def run_json(self, block: Block) -> None:
        try:
            value = json.loads(block.code)
        except ValueError as exc:
            self.fail(block, f"is not JSON: {exc}")
            return
        if "not-a-config" in block.markers:
            return
        from replyguard import VerifierConfig

        try:
            VerifierConfig.from_dict(value)
        except Exception as exc:
            self.fail(block, f"is not a valid config: {exc}")

    def run_sh(self, block: Block) -> None:
        result = subprocess.run(
            ["bash", "-n"], input=block.code, capture_output=True, text=True, check=False
        )
        if result.returncode:
            self.fail(block, "bash -n: " + result.stderr)

    def run_console(self, block: Block) -> None:
        lines = block.code.splitlines()
        i = 0
        while i < len(lines):
            if not lines[i].startswith("$ "):
                self.fail(block, f"expected a '$ command' line, got {lines[i]!r}")
                return
            command = lines[i][2:]
            i += 1
            while command.endswith("\\") and i < len(lines):
                command = command[:-1] + "\n" + lines[i]
                i += 1
            expected = []
            while i < len(lines) and not lines[i].startswith("$ "):
                expected.append(lines[i])
                i += 1
            env = reader_env()
            env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
            result = subprocess.run(
                ["bash", "-c", command],
                cwd=self.workdir,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=120,
                check=False,
            )
            sys.stdout.write(f"$ {command}\n{result.stdout}")
            actual = result.stdout.splitlines()
            if not matches(expected, actual):
                self.fail(
                    block,
                    f"`{command}` printed\n{result.stdout}\nthe page says\n" + "\n".join(expected),
                )


def is_script_page(path: Path) -> bool:
    """Whether ``path`` is one of ``SCRIPT_PAGES``."""
    return path.resolve() in {(ROOT / name).resolve() for name in SCRIPT_PAGES}


def reader_env() -> dict[str, str]:
    """This environment without the provider keys (a reader's machine may have none)."""
    return {k: v for k, v in os.environ.items() if k not in KEYS}


def workdir(base: Path) -> Path:
    for name in ("config.example.json", "replyguard.schema.json"):
        shutil.copy(ROOT / name, base / name)
    shutil.copytree(ROOT / "examples", base / "examples")
    return base


def main(argv: list[str]) -> int:
    warnings.simplefilter("error")
    # As in pyproject.toml's pytest filters: litellm's own modules, not ours to fix.
    warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"litellm\..*")
    warnings.filterwarnings("ignore", message=r".*`ReadOnly` qualifier")
    with contextlib.suppress(ImportError):
        from pydantic.warnings import PydanticDeprecatedSince20

        warnings.filterwarnings("ignore", category=PydanticDeprecatedSince20)
    failures: list[str] = []
    for name in argv:
        path = (ROOT / name).resolve()
        with tempfile.TemporaryDirectory() as tmp:
            base = workdir(Path(tmp))
            previous = Path.cwd()
            os.chdir(base)
            try:
                failures += Page(path, base).run()
            finally:
                os.chdir(previous)
    for failure in failures:
        print("FAILED " + failure, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
