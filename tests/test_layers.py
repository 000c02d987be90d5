"""The package's imports run one way: from the loop down to the stages, from the stages down to
``config``, ``types`` and ``errors``; and litellm is reached inside ``replyguard.judge`` only
(imported, ``importlib.import_module``-ed, or looked up in ``sys.modules``).

Read from the source with ``ast`` (nothing is imported): an import inside a function or under
``TYPE_CHECKING`` counts the same as one at the top of a module.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "replyguard"

LEVELS: tuple[tuple[str, ...], ...] = (
    ("__main__",),  # python -m replyguard: the command line
    ("cli",),
    ("evaluation", "review", "serve"),
    ("__init__", "adapters", "_cli"),
    ("_commands",),  # what the commands share (usage errors, the config, stdin)
    ("_records", "insights", "runner", "testing"),
    ("checks", "gate", "judge"),
    ("state", "_credentials"),
    ("config", "_workspace"),
    ("context", "errors", "telemetry"),
    (
        "_deadlines",
        "_env",
        "_families",
        "_forks",
        "_intervals",
        "_loop_ends",
        "_public",
        "_quoting",
        "_randomness",
        "_templates",
        "_version",
        "types",
    ),
    ("_frozen",),  # the frozen-model base of types
)
"""Top down: a unit (a top-level module or folder of ``replyguard``) imports only units on
lower levels (and its own modules). ``__init__`` is the face, ``replyguard`` itself."""

LEVEL = {unit: depth for depth, units in enumerate(LEVELS) for unit in units}
LITELLM_HOME = "judge"


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = modules()


def unit(module: str) -> str:
    """The top-level module or folder a module belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports(module: str, path: Path) -> Iterator[tuple[str, int]]:
    """Each module this one imports (litellm's too), with the line: ``from a import b`` is an
    import of ``a.b`` when ``a.b`` is a module."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                yield (sub if sub in MODULES else target), node.lineno
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.args[0].value, node.lineno
        elif (name := _module_looked_up(node)) is not None:
            yield name, node.lineno


def _is_sys_modules(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "modules"
        and isinstance(node.value, ast.Name)
        and node.value.id == "sys"
    )


def _module_looked_up(node: ast.AST) -> str | None:
    """The module a ``sys.modules[name]`` or ``sys.modules.get(name)`` with a literal name
    reaches (reaching a module so is using it, as an import would), else None."""
    if isinstance(node, ast.Subscript) and _is_sys_modules(node.value):
        key = node.slice
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and _is_sys_modules(node.func.value)
        and node.args
    ):
        key = node.args[0]
    else:
        return None
    return key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None


def package_imports() -> Iterator[tuple[str, str, int]]:
    for module, path in MODULES.items():
        for target, line in imports(module, path):
            yield module, target, line


def test_every_unit_of_the_package_has_a_level() -> None:
    assert {unit(m) for m in MODULES} == set(LEVEL)


def test_no_import_runs_back_up_the_levels() -> None:
    upward = [
        f"{module}:{line} imports {target} ({unit(module)} -> {unit(target)})"
        for module, target, line in package_imports()
        if target in MODULES
        and unit(module) != unit(target)
        and LEVEL[unit(target)] <= LEVEL[unit(module)]
    ]
    assert upward == []


def test_the_modules_of_a_folder_import_each_other_without_a_circle() -> None:
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    for module, target, _ in package_imports():
        # A folder's face counts: a module that imports the face its folder's face imports it
        # from closes a circle.
        if target in MODULES and target != module and unit(target) == unit(module):
            edges[module].add(target)
    circles = []
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                circles.append(" -> ".join([*trail[trail.index(nxt) :], nxt]))
            elif nxt not in state:
                visit(nxt, [*trail, nxt])
        state[node] = 2

    for start in sorted(edges):
        if start not in state:
            visit(start, [start])
    assert circles == []


def test_litellm_is_reached_inside_the_judge_folder_only() -> None:
    """By ``import``, by ``importlib.import_module`` or through ``sys.modules``."""
    outside = [
        f"{module}:{line} imports {target}"
        for module, target, line in package_imports()
        if (target == "litellm" or target.startswith("litellm.")) and unit(module) != LITELLM_HOME
    ]
    assert outside == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import litellm\n", ["litellm"]),
        ("from litellm.router import Router\n", ["litellm.router"]),
        ("def f():\n    import importlib\n    importlib.import_module('litellm')\n", None),
        (
            "import importlib\nimportlib.import_module('litellm.router')\n",
            ["importlib", "litellm.router"],
        ),
        ("import sys\nsys.modules['litellm']\n", ["sys", "litellm"]),
        (
            "import sys\nw = sys.modules.get('litellm.litellm_core_utils.logging_worker')\n",
            ["sys", "litellm.litellm_core_utils.logging_worker"],
        ),
        ("import sys\nsys.modules.get(name)\n", ["sys"]),
        ("from replyguard import _quoting as quoting\n", ["replyguard._quoting"]),
        ("from . import _quoting\n", ["replyguard._quoting"]),
    ],
)
def test_the_reader_sees_every_form_of_import(
    tmp_path: Path, source: str, expected: list[str] | None
) -> None:
    path = tmp_path / "probe.py"
    path.write_text(source)
    found = [target for target, _ in imports("replyguard.probe", path)]
    assert found == (expected or ["importlib", "litellm"])
