"""What every stage reports: structlog events, OpenTelemetry spans and the JSONL ledger."""

from replyguard.telemetry._events import LOGGER_NAME, REDACTED, Events, describe_error, redact

__all__ = ["LOGGER_NAME", "REDACTED", "Events", "describe_error", "redact"]
