"""``replyguard serve``: an OpenAI-compatible endpoint that verifies (the ``serve`` extra).

One more door into a verified turn: ``POST /v1/chat/completions`` makes the upstream model the
agent of a turn that ``Verifier.run`` (or ``Verifier.stream``, buffered) drives;
``POST /v1/verify`` is the ``verify`` command's one judgement over HTTP. The modules, by job:
``_wire`` (the OpenAI wire and a ``Turn``), ``_agent`` (the upstream calls of one turn),
``_turns`` (the two doors as values), ``_app`` (routes, keys, limits), ``_auth``, ``_metrics``,
``_runner`` (the command) and ``_worker`` (a worker process's app). docs/serve.md documents it.
"""

from replyguard.serve._runner import add_arguments, main

__all__ = ["add_arguments", "main"]
