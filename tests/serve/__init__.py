"""Tests of ``replyguard serve`` (a package, so its conftest is not imported as ``conftest``)."""
