"""Client-supplied text made safe to log: printable, one line, bounded.

A client chooses mechanism names, user names and SCRAM messages; logged whole, a
10 KB mechanism name makes a 10 KB log line, and control characters can forge
lines or escape sequences on an operator's terminal.
"""

from __future__ import annotations

MAX_LOGGED_CHARS = 120


def printable(text: str, limit: int = MAX_LOGGED_CHARS) -> str:
    """`text` with non-printable characters escaped, cut to about `limit` characters."""
    head = text[: limit + 1]
    if not head.isprintable():
        head = head.encode("unicode_escape").decode("ascii")
    if len(head) > limit or len(text) > limit + 1:
        return f"{head[:limit]}...({len(text)} chars)"
    return head
