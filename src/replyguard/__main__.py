"""``python -m replyguard``: the ``replyguard`` command, for a venv whose scripts are not on
PATH."""

import sys

from replyguard.cli import main

sys.exit(main())
