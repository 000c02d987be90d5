"""The tests' kit: what they share besides fixtures (``scripts/`` imports it too, with
``tests/`` on its path). One module for each part, used everywhere; a new test reaches for
these before writing its own:

- ``ports``: ``free_port()`` (nothing listens: a server's port, or a refused connection) and
  ``listening_socket()`` (handed to a server, or left unanswered).
- ``provider_server``: the loopback provider (``ProviderServer``: OpenAI and Anthropic wires,
  scripted ``Step``s, hangs, drops, huge answers; ``provider_process`` in a process of its own).
- ``redis_server``: a real ``redis-server`` on 127.0.0.1 (``RedisServer``, ``redis_server()``:
  start, pause with SIGSTOP, resume, kill); ``fleet`` runs instances of a fleet in processes.
- ``serve_process``: ``replyguard serve`` as a real process (``serving()``: started, its ready
  line read, stopped with SIGTERM and its exit 0 checked) and one loopback provider playing both
  the upstream and the judge from two scripts (``provider()``, ``TwoScripts``).
- ``chromium``: headless Chromium for pages (screenshots, the DOM after scripts ran).
- ``scripts``: ``script_json()``, a Python script in a fresh interpreter and the JSON it
  printed last.
- ``timing``: clocks a busy machine cannot fail (``Ticker``: the loop's longest hold in its
  thread's CPU time; ``Witness``/``Timed``: a deadline's bound plus the machine's own delay).
- ``fault_matrix``, ``host_faults``, ``stream_cuts``, ``stream_agents``: the fault scenarios;
  ``injection_corpus``: hostile and benign texts; ``example_app``, ``docs_snippets``: the
  examples and the docs' code blocks, run as a reader would.
"""
