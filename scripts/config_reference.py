"""Render ``docs/config-reference.md`` from the config's JSON Schema.

    python scripts/config_reference.py           # rewrite docs/config-reference.md
    python scripts/config_reference.py --check   # exit 1 when the committed file is stale

The page is built from ``VerifierConfig.json_schema()`` alone: one table of the top-level keys,
then one section per nested object (run kinds, the circuit breaker, each check type, ...),
each followed by the objects nested in it. Each key gets its type, default, constraints and
description. A key whose default is computed in code (``default_factory``) has none in the
schema and shows ``—``. Keys of ``RunKind`` carry no description of their own: each overrides
the top-level key of the same name, and the page says so with a link.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "docs" / "config-reference.md"
REGENERATE = "python scripts/config_reference.py"
# Objects whose keys override the top-level key of the same name (described there).
OVERRIDES_TOP_LEVEL = frozenset({"RunKind"})
_BOUNDS = (
    ("minimum", "≥ {}"),
    ("exclusiveMinimum", "> {}"),
    ("maximum", "≤ {}"),
    ("exclusiveMaximum", "< {}"),
    ("minLength", "length ≥ {}"),
    ("maxLength", "length ≤ {}"),
    ("minItems", "at least {} items"),
    ("maxItems", "at most {} items"),
    ("pattern", "matches `{}`"),
)


@dataclass
class Section:
    """One object of the schema with its own table: a ``$defs`` entry, or the root."""

    name: str
    """The ``$defs`` name ("" for the root)."""
    paths: list[str] = field(default_factory=list)
    """Where it sits in a config file (``runKinds.<name>``, ``checks[]``), first one first."""

    def heading(self, schema: dict[str, Any]) -> str:
        node = schema["$defs"][self.name]
        tag = _const_tag(node)
        return f"`{self.paths[0]}` ({tag})" if tag else f"`{self.paths[0]}`"


def _const_tag(node: dict[str, Any]) -> str | None:
    """``type: "json"`` for an object told apart from its siblings by a constant key."""
    for key, prop in node.get("properties", {}).items():
        if "const" in prop:
            return f"{key}: {json.dumps(prop['const'])}"
    return None


def anchor(heading: str) -> str:
    """The fragment a markdown renderer (GitHub's rule) gives a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _def_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _refs(node: dict[str, Any], path: str) -> Iterator[tuple[str, str]]:
    """``(def name, config path)`` for every ``$ref`` reachable from ``node`` without passing
    through another definition."""
    if "$ref" in node:
        yield _def_name(node["$ref"]), path
    for member in (*node.get("anyOf", ()), *node.get("oneOf", ()), *node.get("allOf", ())):
        yield from _refs(member, path)
    if isinstance(node.get("items"), dict):
        yield from _refs(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _refs(node["additionalProperties"], f"{path}.<name>")


def sections(schema: dict[str, Any]) -> list[Section]:
    """The nested objects, each followed by its own nested ones, in schema order."""
    found: dict[str, Section] = {}

    def visit(node: dict[str, Any], prefix: str) -> None:
        for key, prop in node.get("properties", {}).items():
            for name, path in _refs(prop, prefix + key):
                target = schema["$defs"][name]
                if "properties" not in target:
                    continue  # an enum or a scalar: shown inline where it is used
                if name in found:
                    if path not in found[name].paths:
                        found[name].paths.append(path)
                    continue
                found[name] = Section(name, [path])
                visit(target, path + ".")

    visit(schema, "")
    return list(found.values())


class Renderer:
    """Turns the schema's nodes into the cells of the reference tables."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema
        self.sections = sections(schema)
        self.anchors = {s.name: anchor(s.heading(schema)) for s in self.sections}

    def _link(self, name: str) -> str:
        target = self.schema["$defs"][name]
        if "properties" not in target:
            return self.type_of(target)
        section = next(s for s in self.sections if s.name == name)
        tag = _const_tag(target)
        label = tag.split(": ", 1)[1] if tag else section.paths[0]
        return f"[`{label}`](#{self.anchors[name]})"

    def type_of(self, node: dict[str, Any]) -> str:
        """A short type: ``integer``, ``string or null``, ``"a" \\| "b"``, ``array of …``."""
        if "$ref" in node:
            return self._link(_def_name(node["$ref"]))
        if "const" in node:
            return f"`{json.dumps(node['const'])}`"
        if "enum" in node:
            return " \\| ".join(f"`{json.dumps(v)}`" for v in node["enum"])
        members = node.get("anyOf") or node.get("oneOf")
        if members:
            joiner = ", " if all("$ref" in m for m in members) else " or "
            return joiner.join(self.type_of(m) for m in members)
        kind = node.get("type")
        if isinstance(kind, list):
            return " or ".join(kind)
        if kind == "array":
            items = node.get("items")
            return f"array of {self.type_of(items)}" if isinstance(items, dict) else "array"
        if kind == "object":
            values = node.get("additionalProperties")
            return (
                f"object of name → {self.type_of(values)}"
                if isinstance(values, dict)
                else ("object")
            )
        if kind == "string" and node.get("format") == "password":
            return "string (secret)"
        return str(kind) if kind else "any"

    def constraints(self, node: dict[str, Any], *, required: bool) -> str:
        found = ["required"] if required else []
        for member in (node, *node.get("anyOf", ()), *node.get("oneOf", ())):
            found += [text.format(member[key]) for key, text in _BOUNDS if key in member]
        return ", ".join(found)

    def default(self, node: dict[str, Any], *, required: bool) -> str:
        if "default" in node:
            return f"`{json.dumps(node['default'], ensure_ascii=False)}`"
        return "*(none)*" if required else "—"

    def description(self, owner: str, key: str, node: dict[str, Any]) -> str:
        text = node.get("description")
        if text is None and "const" in node:
            return "Says which kind of entry this is."
        overrides = owner in OVERRIDES_TOP_LEVEL and key in self.schema.get("properties", {})
        if text is None and overrides:
            return f"Overrides the [top-level](#top-level-keys) `{key}` for these turns."
        return _inline(text or "")

    def rows(self, owner: str, node: dict[str, Any]) -> list[str]:
        required = set(node.get("required", ()))
        lines = [
            "| key | type | default | constraints | description |",
            "| --- | --- | --- | --- | --- |",
        ]
        for key, prop in node.get("properties", {}).items():
            need = key in required
            cells = (
                f"`{key}`",
                self.type_of(prop),
                self.default(prop, required=need),
                self.constraints(prop, required=need),
                self.description(owner, key, prop),
            )
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
        return lines


def _inline(text: str) -> str:
    """A schema description as one markdown line (reST ````code```` becomes ``code``)."""
    return " ".join(text.replace("``", "`").split())


def _cell(text: str) -> str:
    """Escape the pipes a table cell would take as column breaks (already escaped ones stay)."""
    return re.sub(r"(?<!\\)\|", r"\\|", text)


def render(schema: dict[str, Any]) -> str:
    """The whole reference page for ``schema``."""
    renderer = Renderer(schema)
    root = {**schema, "properties": dict(schema.get("properties", {}))}
    root["properties"].pop("$schema", None)
    out = [
        "# Configuration reference",
        "",
        f"<!-- Generated by `{REGENERATE}` from `VerifierConfig.json_schema()`;"
        " do not edit by hand. -->",
        "",
        _inline(schema.get("description", "")),
        "",
        "A config file holds this object, either on its own or at `agents.defaults.verifier` of",
        "a larger document. Keys are camelCase; an unknown key is an error that names it. A",
        'top-level `"$schema"` key is allowed and ignored, so editors can validate the file',
        "against `replyguard.schema.json` (`replyguard schema` prints it).",
        "`replyguard check-config FILE` checks a file as the verifier would (`--show` prints",
        "the effective config).",
        "",
        "`—` in the default column: the schema carries no default for the key (it is computed",
        "in code); leaving the key out keeps that default.",
        "",
        "## Top-level keys",
        "",
        *renderer.rows("", root),
    ]
    for section in renderer.sections:
        node = schema["$defs"][section.name]
        out += ["", f"## {section.heading(schema)}", ""]
        if node.get("description"):
            out += [_inline(node["description"]), ""]
        if len(section.paths) > 1:
            also = ", ".join(f"`{p}`" for p in section.paths[1:])
            out += [f"Also at {also}.", ""]
        out += renderer.rows(section.name, node)
    return "\n".join(out) + "\n"


def current_schema() -> dict[str, Any]:
    from replyguard import VerifierConfig

    return VerifierConfig.json_schema()


def stale_report(committed: str, generated: str, *, limit: int = 40) -> str:
    """What differs (a unified diff, cut at ``limit`` lines) and how to regenerate."""
    diff = list(
        difflib.unified_diff(
            committed.splitlines(), generated.splitlines(), "committed", "generated", lineterm=""
        )
    )
    shown = diff[:limit] + ([f"... {len(diff) - limit} more lines"] if len(diff) > limit else [])
    return "\n".join([*shown, f"the config reference is out of date: run `{REGENERATE}`"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the file is stale")
    parser.add_argument("--output", type=Path, default=OUTPUT, help="the markdown file")
    args = parser.parse_args(argv)
    output: Path = args.output
    text = render(current_schema())
    if args.check:
        committed = output.read_text(encoding="utf-8") if output.exists() else ""
        if committed == text:
            return 0
        print(stale_report(committed, text), file=sys.stderr)
        return 1
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
    print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
