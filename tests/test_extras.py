"""Every extra the docs name exists, is given in the form that works from a clone, and installs.

replyguard is not on the package registry yet, so a page that names ``pip install
'replyguard[EXTRA]'`` must also give the line that works from a clone (``pip install -c
constraints.txt -e '.[EXTRA]'``). The slow test installs each extra the docs name into a
throwaway virtual environment, from this checkout and under the lock, and imports what the
extra promises (``PROMISES``; the getting-started page's table says the same).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(
    [ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "examples").rglob("*.md")]
)

# What each extra brings: the modules an install of it must be able to import.
PROMISES: dict[str, tuple[str, ...]] = {
    "pydantic-ai": ("replyguard.adapters.pydantic_ai", "pydantic_ai"),
    "openai-agents": ("replyguard.adapters.openai_agents", "agents"),
    "langchain": ("replyguard.adapters.langchain", "langchain_core"),
    "langchain-agents": ("replyguard.adapters.langchain_agents", "langchain", "langchain_core"),
    "otel": ("opentelemetry", "opentelemetry.trace"),
    "redis": ("redis", "redis.asyncio"),
    "fastapi": ("fastapi", "fastapi.sse", "uvicorn"),
    "serve": ("replyguard.serve._app", "starlette", "uvicorn", "prometheus_client"),
    "docs": ("mkdocs", "material", "mkdocstrings"),
    "dev": ("pytest", "respx", "hypothesis", "fastapi", "uvicorn", "redis"),
    "bench": ("matplotlib",),
}
# Installed by .ci/run itself with the very lines the docs give (the README's second command,
# and the docs site's build): not installed again here.
INSTALLED_BY_CI = frozenset({"dev", "docs"})

_REGISTRY = re.compile(r"replyguard\[([a-z0-9,-]+)\]")
_CLONE = re.compile(r"-c constraints\.txt (?:-e )?'\.\[([a-z0-9,-]+)\]'")


def _named(pattern: re.Pattern[str], text: str) -> set[str]:
    return {extra for match in pattern.findall(text) for extra in match.split(",")}


def declared_extras() -> dict[str, list[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras: dict[str, list[str]] = project["optional-dependencies"]
    return extras


_TABLE_ROW = re.compile(r"^\| `([a-z0-9-]+)` \| [^|]+ \| (`[^|]+`) \|$", re.MULTILINE)


def extras_table() -> dict[str, set[str]]:
    """The getting-started page's table of extras: each extra, and the modules it brings."""
    text = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    return {
        extra: set(re.findall(r"`([a-z_.]+)`", brings))
        for extra, brings in _TABLE_ROW.findall(text)
    }


def documented_extras() -> set[str]:
    """Every extra a page names, in either install form, or in the table of extras."""
    found: set[str] = set(extras_table())
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        found |= _named(_REGISTRY, text) | _named(_CLONE, text)
    return found


def test_every_documented_extra_is_declared_and_promises_something() -> None:
    documented = documented_extras()
    assert {"redis", "fastapi", "otel", "pydantic-ai", "langchain-agents"} <= documented
    assert documented <= set(declared_extras())
    assert set(declared_extras()) == set(PROMISES)


def test_the_table_of_extras_promises_what_the_install_test_imports() -> None:
    table = extras_table()
    assert set(table) == set(declared_extras()) - {"bench"}
    for extra, brings in table.items():
        assert brings <= set(PROMISES[extra]), (extra, brings)


def test_a_page_naming_the_registry_form_gives_the_clone_form_too() -> None:
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        missing = _named(_REGISTRY, text) - _named(_CLONE, text)
        assert not missing, f"{page.relative_to(ROOT)}: no from-a-clone line for {missing}"


def test_the_lock_pins_every_extra_within_its_range() -> None:
    pinned = {}
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        name, _, version = line.partition("==")
        if version and not line.startswith("#"):
            pinned[name.strip().lower().replace("_", "-")] = version.strip()
    for extra, requirements in declared_extras().items():
        for requirement in map(Requirement, requirements):
            name = requirement.name.lower().replace("_", "-")
            assert name in pinned, f"{extra}: {name} is not in constraints.txt"
            assert requirement.specifier.contains(pinned[name]), (extra, name, pinned[name])


@pytest.mark.slow
@pytest.mark.parametrize("extra", sorted(documented_extras() - INSTALLED_BY_CI))
def test_an_extra_installs_from_a_clone_and_brings_what_it_promises(
    extra: str, tmp_path: Path
) -> None:
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    install = [str(python), "-m", "pip", "install", "-q", "-c", "constraints.txt", f".[{extra}]"]
    done = subprocess.run(
        install, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    imports = "; ".join(f"import {module}" for module in PROMISES[extra])
    done = subprocess.run(
        [str(python), "-c", f"import replyguard; {imports}"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
