"""The ``streaming`` key: how ``Verifier.stream`` delivers a reply while it is generated."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from replyguard.config._checks import FILE_MODEL

StreamingMode = Literal["buffer", "release"]
DEFAULT_HOLD_BACK_CHARS = 64


class StreamingConfig(BaseModel):
    """How ``Verifier.stream`` hands a reply to the user while the agent generates it."""

    model_config = FILE_MODEL

    mode: StreamingMode = "buffer"
    """``"buffer"``: nothing reaches the user until the reply passed (or failed open), then it
    is released at once. ``"release"``: text reaches the user as it comes, minus the last
    ``holdBackChars`` characters, which incremental checks see first; the judge runs at the
    end, and a FAIL retracts the text shown."""
    hold_back_chars: int = Field(default=DEFAULT_HOLD_BACK_CHARS, ge=0, le=100_000)
    """In ``"release"`` mode, how many of the latest characters are held back so that an
    incremental check (a forbidden phrase, a bounded pattern) can stop a violation before any
    of it is shown. ``0`` shows every delta at once."""
