"""The docs site's pages say what the code does: facts a page states are checked here."""

from __future__ import annotations

import json
import re
from pathlib import Path

from replyguard import VerifierConfig

HERE = Path(__file__).resolve().parent
ROOT = next(p for p in (HERE, *HERE.parents) if (p / "pyproject.toml").exists())
DOCS = ROOT / "docs"


def page(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def mkdocs_yml() -> str:
    return (ROOT / "mkdocs.yml").read_text(encoding="utf-8")


def test_the_nav_lists_every_page_and_only_pages_that_exist() -> None:
    nav_section = mkdocs_yml().split("\nnav:\n", 1)[1].split("\n\n", 1)[0]
    nav = re.findall(r"^\s+- (?:[^:\n]+: )?(\S+\.md)$", nav_section, flags=re.M)
    on_disk = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    assert sorted(nav) == on_disk
    assert len(nav) == len(set(nav))


def test_the_site_needs_no_network_for_fonts() -> None:
    assert re.search(r"^  font: false\b", mkdocs_yml(), flags=re.M)


def test_the_checks_page_example_is_a_valid_config_with_every_check_type() -> None:
    block = page("checks.md").split("```json\n", 1)[1].split("\n```", 1)[0]
    config = VerifierConfig.from_dict(json.loads(block))
    assert [spec.type for spec in config.checks] == [
        "heartbeat",
        "rules",
        "json",
        "http_request",
        "command",
        "claims",
    ]


def test_the_configuration_summary_names_real_keys_with_their_defaults() -> None:
    properties = VerifierConfig.json_schema()["properties"]
    rows = re.findall(r"^\| `([^`]+)` \| `(.*?)` \|", page("configuration.md"), flags=re.M)
    assert len(rows) > 30
    for key, default in rows:
        assert key in properties, key
        if "default" in properties[key] and key != "checks":  # checks: the schema adds nulls
            assert json.loads(default) == properties[key]["default"], key


def test_getting_started_names_every_extra() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    text = page("getting-started.md")
    extras = text[text.index("Extras add optional parts") :].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([a-z-]+)` \|", extras, re.MULTILINE)  # the table of extras
    named = set(rows) | set(re.findall(r"One more, `([a-z-]+)`", extras))
    assert named == set(project["optional-dependencies"])


def test_no_page_cites_a_document_that_is_not_there() -> None:
    """The eval report's page once sent readers to "design notes" that never existed."""
    pages = [ROOT / "README.md", *DOCS.rglob("*.md")]
    assert [p.name for p in pages if "design notes" in p.read_text(encoding="utf-8")] == []


def test_the_adapters_page_hides_no_setup() -> None:
    """Its Agents SDK example once needed a hidden client: copied, it said "Missing
    credentials". Every model it uses is now on the page."""
    assert "snippet-setup" not in page("adapters.md")


def test_code_blocks_wrap_and_end_clear_of_the_copy_button() -> None:
    """The built site clipped a long command under the copy button (checked by eye in
    headless Chromium at 1280 and 700 pixels wide: the README's commands wrap, nothing under
    the button); this holds the rule that does it."""
    css = (DOCS / "stylesheets" / "extra.css").read_text(encoding="utf-8")
    rule = css.split(".md-typeset pre > code {", 1)[1].split("}", 1)[0]
    assert "white-space: pre-wrap;" in rule and "overflow-wrap: anywhere;" in rule
    assert re.search(r"padding-right: [2-9](\.\d+)?em;", rule)
    assert "content.code.copy" in mkdocs_yml()
