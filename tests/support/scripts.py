"""A Python script run in a fresh interpreter, as a host's process would run it: the JSON
value it prints last (``script_json``)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def script_json(script: str, *, env: Mapping[str, str], cwd: Path) -> Any:
    """Run ``script`` with ``python -c`` (its exit must be 0) and read its last stdout line
    as JSON."""
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=dict(env),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])
