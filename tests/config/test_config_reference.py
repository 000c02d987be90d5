"""``docs/config-reference.md`` is generated from the config's JSON Schema and kept current."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest

from replyguard import VerifierConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import config_reference

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "docs" / "config-reference.md"


def test_committed_reference_matches_the_current_schema() -> None:
    committed = COMMITTED.read_text(encoding="utf-8") if COMMITTED.exists() else ""
    generated = config_reference.render(VerifierConfig.json_schema())
    if committed != generated:
        pytest.fail(config_reference.stale_report(committed, generated))
    assert committed.startswith("# Configuration reference\n")


def table_keys(text: str, heading: str) -> list[str]:
    """The keys of the table under ``## heading``, in order."""
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([^`]+)` \|", section, flags=re.MULTILINE)


def test_every_top_level_key_is_listed_in_schema_order() -> None:
    schema = VerifierConfig.json_schema()
    text = config_reference.render(schema)
    expected = [key for key in schema["properties"] if key != "$schema"]
    assert table_keys(text, "Top-level keys") == expected


def test_every_nested_object_gets_a_section_with_all_its_keys() -> None:
    schema = VerifierConfig.json_schema()
    text = config_reference.render(schema)
    objects = {name: d for name, d in schema["$defs"].items() if "properties" in d}
    for section in config_reference.sections(schema):
        heading = section.heading(schema)
        assert table_keys(text, heading) == list(objects.pop(section.name)["properties"])
    assert objects == {}


def test_every_link_points_at_a_heading_of_the_page() -> None:
    text = config_reference.render(VerifierConfig.json_schema())
    headings = {config_reference.anchor(h) for h in re.findall(r"^#+ (.+)$", text, re.MULTILINE)}
    links = set(re.findall(r"\]\(#([^)]+)\)", text))
    assert links
    assert links <= headings


def test_a_row_shows_type_default_constraints_and_description() -> None:
    text = config_reference.render(VerifierConfig.json_schema())
    row = next(line for line in text.splitlines() if line.startswith("| `maxAttempts` |"))
    description = "Attempts per turn, the first reply included."
    assert row == f"| `maxAttempts` | integer | `3` | ≥ 1, ≤ 50 | {description} |"


# A schema shaped like a future config: a nested section reached through an array of objects,
# an enum by reference, a union with null, a required key, and a pipe inside a description.
FUTURE: dict[str, Any] = {
    "description": "A config.",
    "properties": {
        "router": {
            "anyOf": [{"$ref": "#/$defs/Router"}, {"type": "null"}],
            "default": None,
            "description": "Spread judge calls over deployments.",
        },
        "level": {"$ref": "#/$defs/Level", "default": "low", "description": "How | loud."},
    },
    "$defs": {
        "Level": {"enum": ["low", "high"], "type": "string"},
        "Router": {
            "description": "A litellm Router.",
            "properties": {
                "deployments": {
                    "items": {"$ref": "#/$defs/Deployment"},
                    "minItems": 1,
                    "type": "array",
                }
            },
            "required": ["deployments"],
        },
        "Deployment": {
            "properties": {
                "model": {"type": "string", "description": "The deployment's model."},
                "rpm": {"anyOf": [{"minimum": 1, "type": "integer"}, {"type": "null"}]},
            },
            "required": ["model"],
        },
    },
}


def test_a_schema_with_new_nested_sections_renders_each_of_them() -> None:
    text = config_reference.render(FUTURE)
    headings = re.findall(r"^## (.+)$", text, flags=re.MULTILINE)
    assert headings == ["Top-level keys", "`router`", "`router.deployments[]`"]
    assert "| `router` | [`router`](#router) or null | `null` |  |" in text
    assert '| `level` | `"low"` \\| `"high"` | `"low"` |  | How \\| loud. |' in text
    assert "| `deployments` | array of [`router.deployments[]`](#routerdeployments) |" in text
    assert "| *(none)* | required, at least 1 items |" in text
    assert "| `rpm` | integer or null | — | ≥ 1 |  |" in text


def test_check_mode_reports_a_stale_file_and_how_to_regenerate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "config-reference.md"
    output.write_text("# Configuration reference\n\nold\n", encoding="utf-8")
    assert config_reference.main(["--check", "--output", str(output)]) == 1
    error = capsys.readouterr().err
    assert "-old" in error
    assert "out of date: run `python scripts/config_reference.py`" in error


def test_writing_then_checking_passes(tmp_path: Path) -> None:
    output = tmp_path / "docs" / "config-reference.md"
    assert config_reference.main(["--output", str(output)]) == 0
    assert config_reference.main(["--check", "--output", str(output)]) == 0
    assert output.read_text(encoding="utf-8") == config_reference.render(
        VerifierConfig.json_schema()
    )
