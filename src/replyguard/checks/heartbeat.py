"""``HeartbeatCheck``: a HEARTBEAT_OK reply while HEARTBEAT.md still lists open tasks fails.

A heartbeat agent wakes up, reads ``HEARTBEAT.md`` and should work through it; answering
``HEARTBEAT_OK`` means "nothing needs attention". The check only looks at heartbeat turns
(``turn.heartbeat``); on any other turn it passes without an opinion. On a heartbeat turn:

- the reply is not an acknowledgement → pass, not decisive (the judge decides);
- the reply is an acknowledgement and the file lists open tasks → ``GOAL_MISSED``, with the
  tasks (up to ``MAX_LISTED``) in the feedback;
- the reply is an acknowledgement and no task is open → a *decisive* pass (no judge call);
- no workspace, or the file is missing or unreadable → pass, not decisive.

**Acknowledgement.** After stripping whitespace, markdown emphasis (``*``, ``_``, ``~``),
backticks, quotes and punctuation from both ends, the reply is the case-sensitive token
``HEARTBEAT_OK``, or starts or ends with it (as a whole word) with at most ``ACK_MAX_CHARS``
characters beside it: heartbeat runtimes drop such a reply as an acknowledgement, so
"HEARTBEAT_OK - all quiet" is the same lazy answer as the bare token. Anything longer is a
report, and the judge reads it. ``heartbeat_ok`` or ``HEARTBEAT_OKAY`` are not the token.

**Open tasks** (``open_tasks``). List items (``-``, ``*``, ``+``, ``1.``, ``1)``, at any
indentation, so nested items count) that are not ticked: ``- [ ] task`` and plain ``- task``
are open; ``- [x]``, ``- [X]``, ``- [✓]`` and ``- [✔]`` are done, with or without spaces
inside the box or text right after it (``- [ x ]``, ``- [x]done``); ``- [-]`` and ``- [~]``
are cancelled or skipped, so not open either. Any other mark (``[/]``, ``[>]``, ``[?]``) is
not a box this check knows: the item is open, mark and all, since a missed open task would
pass HEARTBEAT_OK without the judge. Headings, paragraphs, thematic breaks (``* * *``), blank
lines, fenced code blocks, HTML comments (also spanning lines), a YAML front matter block
(``---`` on the very first line, up to the next ``---`` or ``...`` line) and indented code
blocks are ignored, and so is an item with no text (``- [ ]``). An indented code block is a
run of lines indented by four spaces or a tab that starts after a blank line outside a list
(inside a list such lines continue an item, as nested items do; at the top of the file they
are read as tasks, to be safe). Block quotes are not task lists.

``prose_lines`` (the markdown outside code fences and comments) and ``bulleted`` are shared
with the claims check. The file is read through ``Workspace``: confined to the workspace,
size-capped, and cached by mtime; the read runs in a worker thread, and only for
acknowledgements.
"""

from __future__ import annotations

import re

from replyguard._workspace import Workspace
from replyguard.checks.base import CheckResult, failed, passed
from replyguard.checks.markdown import bulleted, prose_lines
from replyguard.telemetry._events import Events
from replyguard.types import FailCategory, Reply, Turn

TOKEN = "HEARTBEAT_OK"
ACK_MAX_CHARS = 300
"""The most characters an acknowledgement may carry beside the token."""
MAX_LISTED = 10
"""The most open tasks quoted in the feedback."""

_EDGE_CHARS = " \t\r\n*_~`'\"\u2018\u2019\u201c\u201d.,;:!?-\u2013\u2014()[]"
_ITEM = re.compile(
    r"[ \t]*(?:[-*+]|\d{1,9}[.)])"
    r"(?:[ \t]+\[[ \t]*(?P<box>[xX\u2713\u2714~-]?)[ \t]*\][ \t]*|[ \t]+|$)(?P<text>.*)"
)
_NOT_OPEN = frozenset("xX\u2713\u2714~-")  # done: x X ✓ ✔; cancelled or skipped: ~ -
_THEMATIC_BREAK = re.compile(r"[ \t]*([-*_])(?:[ \t]*\1){2,}[ \t]*")
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(?:.*\n)*?(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)")
_INDENTED = re.compile(r" {4}| {0,3}\t")


def open_tasks(markdown: str) -> list[str]:
    """The texts of the list items in ``markdown`` that are not ticked, in order."""
    tasks: list[str] = []
    in_list = in_code = blank_before = False
    for line in prose_lines(_FRONT_MATTER.sub("", markdown, count=1)):
        if not line.strip():
            blank_before = True
            continue
        indented = _INDENTED.match(line) is not None
        in_code = indented and (in_code or (blank_before and not in_list))
        item = None if in_code or _THEMATIC_BREAK.fullmatch(line) else _ITEM.fullmatch(line)
        if item is not None:
            in_list = True
            text = item["text"].strip()
            if text and item["box"] not in _NOT_OPEN:
                tasks.append(text)
        elif not indented and blank_before:
            in_list = False  # a paragraph, heading or break after a blank line ends the list
        blank_before = False
    return tasks


def is_acknowledgement(reply: str) -> bool:
    """Whether ``reply`` is a HEARTBEAT_OK acknowledgement (see the module docstring)."""
    core = reply.strip(_EDGE_CHARS)
    if core == TOKEN:
        return True
    if core.startswith(TOKEN) and not _is_word_char(core[len(TOKEN)]):
        rest = core[len(TOKEN) :]
    elif core.endswith(TOKEN) and not _is_word_char(core[-len(TOKEN) - 1]):
        rest = core[: -len(TOKEN)]
    else:
        return False
    return len(rest.strip(_EDGE_CHARS)) <= ACK_MAX_CHARS


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


def _feedback(tasks: list[str], file_name: str) -> str:
    listed = bulleted(tasks, MAX_LISTED)
    count = "1 open task" if len(tasks) == 1 else f"{len(tasks)} open tasks"
    return (
        f"The reply is {TOKEN}, but {file_name} still lists {count}:\n{listed}\n"
        f"Work through them now and report what you did; answer {TOKEN} only when nothing "
        "in the list needs attention."
    )


class HeartbeatCheck:
    """Fails a HEARTBEAT_OK reply while the heartbeat file lists open tasks."""

    def __init__(
        self,
        *,
        workspace_dir: str | None,
        heartbeat_file: str = "HEARTBEAT.md",
        name: str = "heartbeat",
        required: bool = False,
        events: Events | None = None,
    ) -> None:
        self.name = name
        self.required = required
        self._file = heartbeat_file
        self._workspace = Workspace(workspace_dir, events or Events())

    def applies(self, turn: Turn, reply: Reply) -> bool:
        """Only a heartbeat turn's acknowledgement is this check's business."""
        return turn.heartbeat and is_acknowledgement(reply.text)

    async def check(self, turn: Turn, reply: Reply) -> CheckResult:
        """Judge a heartbeat turn's acknowledgement against the open tasks."""
        if not self.applies(turn, reply):
            return passed(self.name)
        reading = self._workspace.read_later((self._file,))
        if reading is None:  # no workspace
            return passed(self.name)
        (markdown,) = await reading
        if markdown is None:
            return passed(self.name)
        tasks = open_tasks(markdown)
        if not tasks:
            return passed(self.name, decisive=True)
        return failed(self.name, FailCategory.GOAL_MISSED, _feedback(tasks, self._file))
