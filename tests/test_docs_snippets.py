"""Every code block of README.md and docs/ runs (conventions: tests/support/docs_snippets.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from support import docs_snippets

# One fresh interpreter a page, most importing litellm (about a minute in all): `.ci/run` runs
# these in its slow step, `pytest -m slow tests/test_docs_snippets.py` when editing the docs.
pytestmark = pytest.mark.slow

ROOT = docs_snippets.ROOT
RUNNER = Path(docs_snippets.__file__)

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def page_id(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_block_of_the_page_runs(page: Path) -> None:
    env = docs_snippets.reader_env()
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    result = subprocess.run(
        [sys.executable, str(RUNNER), page_id(page)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr + result.stdout[-4000:]


def test_the_readme_example_is_a_complete_program() -> None:
    """The README's example runs as pasted: imports, asyncio.run, no names from elsewhere."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    python = [b for b in docs_snippets.blocks(readme) if b.lang == "python"]
    assert len(python) == 1
    assert "asyncio.run(main())" in python[0].code
    assert not python[0].markers


def test_the_docs_use_each_convention_as_documented() -> None:
    """A no-run block says why, and every python block of the docs is runnable or says why."""
    for page in PAGES:
        for block in docs_snippets.blocks(page.read_text(encoding="utf-8")):
            if "no-run" in block.markers:
                assert block.markers["no-run"], f"{page_id(page)} {block.where}"


@pytest.mark.parametrize(
    ("expected", "actual", "ok"),
    [
        (["passed 2"], ["passed 2"], True),
        (["latency ... ms"], ["latency 0.4 ms"], True),
        (["a", "...", "z"], ["a", "b", "c", "z"], True),
        (["a", "..."], ["a"], True),
        (["passed"], ["failed"], False),
        (["a"], ["a", "b"], False),
    ],
)
def test_expected_output_matching(expected: list[str], actual: list[str], ok: bool) -> None:
    assert docs_snippets.matches(expected, actual) is ok


def test_a_failing_snippet_fails_its_page(tmp_path: Path) -> None:
    """The runner is not a test that cannot fail: a wrong #> line, a bad config, a failing
    command and an exception are each reported."""
    page = tmp_path / "page.md"
    page.write_text(
        "```python\nprint(1 + 1)\n#> 3\n```\n\n"
        '```json\n{"maxAttempts": 0}\n```\n\n'
        "```console\n$ echo hello\nbye\n```\n\n"
        "```python\nraise ValueError('boom')\n```\n\n"
        "<!-- no-run: needs a real model -->\n```python\nraise SystemExit(3)\n```\n",
        encoding="utf-8",
    )
    failures = docs_snippets.Page(page, tmp_path).run()
    assert [f.split(":", 1)[0] for f in failures] == [
        "page.md line 1 (python)",
        "page.md line 6 (json)",
        "page.md line 10 (console)",
        "page.md line 15 (python)",
    ]


def test_the_newcomers_pages_are_script_pages() -> None:
    assert {"README.md", "docs/getting-started.md"} <= set(docs_snippets.SCRIPT_PAGES)
    assert all((ROOT / name).is_file() for name in docs_snippets.SCRIPT_PAGES)
    assert docs_snippets.is_script_page(ROOT / "docs" / "getting-started.md")
    assert not docs_snippets.is_script_page(ROOT / "docs" / "adapters.md")


def test_a_script_page_runs_each_block_as_a_reader_would(tmp_path: Path) -> None:
    """``python FILE``: a top-level await is a SyntaxError, no name carries over from the
    block before, hidden setup is refused, and a warning on stderr fails the block."""
    page = tmp_path / "page.md"
    page.write_text(
        '```python title="ok.py"\nanswer = 42\nprint(answer)\n#> 42\n```\n\n'
        "```python\nimport asyncio\nawait asyncio.sleep(0)\n```\n\n"
        "```python\nprint(answer)\n```\n\n"
        "<!-- snippet-setup\nimport os\n-->\n\n"
        "```python\nimport sys\nprint('careful', file=sys.stderr)\n```\n\n"
        "<!-- expect-warnings -->\n```python\nimport sys\nprint('said', file=sys.stderr)\n```\n",
        encoding="utf-8",
    )
    failures = docs_snippets.Page(page, tmp_path, scripts=True).run()
    assert [f.split(":", 1)[0] for f in failures] == [
        "page.md line 7 (python)",
        "page.md line 12 (python)",
        "page.md line 17 (python)",
        "page.md line 20 (python)",
    ]
    assert "SyntaxError" in failures[0] and "NameError" in failures[1]
    assert "no snippet-setup" in failures[2] and "careful" in failures[3]
    assert (tmp_path / "ok.py").read_text(encoding="utf-8").startswith("answer = 42")
