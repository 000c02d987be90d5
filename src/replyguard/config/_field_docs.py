"""The config models' attribute docstrings, read from their source when a schema is made.

Pydantic can read them when each class is created (``use_attribute_docstrings``), but that
parses every model's source on every ``import replyguard`` (about a quarter of its import
time), while only the JSON Schema (and the reference page made from it) shows them.
``DocumentedSchema`` puts each one in as its property's ``description``, as pydantic would.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import inspect
import itertools
import sys
import textwrap
from typing import Any

from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from replyguard._public import defined_in


@functools.cache
def attribute_docs(cls: type) -> dict[str, str]:
    """Each attribute ``cls`` itself declares that is followed by a string: that docstring."""
    # The defining module's source, not ``getsource(cls)``: a public class's ``__module__``
    # names the package's face (``replyguard``), where its source is not.
    try:
        source = textwrap.dedent(inspect.getsource(sys.modules[defined_in(cls)]))
    except (KeyError, OSError, TypeError):  # no source (a frozen build): no docstrings
        return {}
    tree = _parsed(source)
    found = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls.__name__]
    body = found[0].body if found else []
    docs: dict[str, str] = {}
    for node, after in itertools.pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[node.target.id] = inspect.cleandoc(after.value.value)
    return docs


def _parsed(source: str, tries: int = 3) -> ast.Module:
    """``ast.parse(source)``, tried again on CPython 3.11's spurious ``SystemError`` ("AST
    constructor recursion depth mismatch", python/cpython#106905): its AST builder keeps its
    depth count in one place per interpreter, which a parse in another thread (or in a
    finalizer run during this one) overwrites. The next parse starts it afresh."""
    for _ in range(tries - 1):
        with contextlib.suppress(SystemError):
            return ast.parse(source)
    return ast.parse(source)  # the last try's error is not hidden


def field_docs(cls: type) -> dict[str, str]:
    """The attribute docstrings of ``cls`` and of the classes it inherits fields from."""
    docs: dict[str, str] = {}
    for base in reversed(cls.__mro__):
        if defined_in(base).startswith("replyguard."):
            docs.update(attribute_docs(base))
    return docs


class DocumentedSchema(GenerateJsonSchema):
    """JSON Schema generation that describes each field by its attribute docstring (unless the
    field has a description of its own)."""

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        json_schema = super().model_schema(schema)
        properties: dict[str, Any] = json_schema.get("properties", {})
        cls = schema["cls"]
        docs = field_docs(cls)
        for name, field in cls.model_fields.items():
            key = field.alias if self.by_alias and field.alias else name
            prop = properties.get(key)
            if field.description is None and name in docs and isinstance(prop, dict):
                prop.setdefault("description", docs[name])
        return json_schema
