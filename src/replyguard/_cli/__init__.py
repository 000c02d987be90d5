"""The ``replyguard`` command's subcommands (``verify``, ``heartbeat``, ``demo``) and the turn
file format they and ``eval`` read."""
