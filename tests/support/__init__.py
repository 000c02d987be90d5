"""What the tests share besides fixtures: the loopback provider, the fault matrix, the host's
faults and the injection corpus (``scripts/`` imports them too, with ``tests/`` on its path)."""
