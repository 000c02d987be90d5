"""``replyguard review``: a local page that walks a human through the ledger's turns worth a
look, one at a time, and saves each label as an eval record as it goes.

``_queue`` picks and orders the turns, ``_labels`` turns a label into an eval record and
appends it, ``_page`` is the page, ``_server`` serves it, ``command`` runs the command line.
"""

from replyguard.review.command import add_arguments, main

__all__ = ["add_arguments", "main"]
