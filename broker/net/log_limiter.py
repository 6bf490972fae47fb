"""Rate-limited logging of per-connection events that a client can trigger at will.

A hostile client can have a connection closed for a bad frame thousands of
times a second; a log line for each costs the broker more than rejecting the
frame does (formatting, the handler's lock, the write) and floods the log.
Kafka logs every one; here the first `burst` lines of each interval are
written as they come, the rest are only counted, and the count is reported
with the first line of the next interval, so nothing goes unnoticed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable


class LogLimiter:
    """At most `burst` lines per `interval_s` through one logger; the rest counted."""

    __slots__ = (
        "_burst",
        "_clock",
        "_interval_s",
        "_logger",
        "_suppressed",
        "_what",
        "_window_end",
        "_written",
    )

    def __init__(
        self,
        logger: logging.Logger,
        burst: int = 20,
        interval_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        what: str = "connection messages",
    ) -> None:
        self._logger = logger
        self._what = what
        self._burst = burst
        self._interval_s = interval_s
        self._clock = clock
        self._window_end = float("-inf")
        self._written = 0
        self._suppressed = 0

    @property
    def suppressed(self) -> int:
        """Lines counted but not written in the current interval."""
        return self._suppressed

    def log(self, level: int, message: str, *args: object) -> None:
        if not self._logger.isEnabledFor(level):
            return
        now = self._clock()
        if now >= self._window_end:
            if self._suppressed:
                self._logger.log(
                    level,
                    "%d similar %s were not logged in the last %.0f s",
                    self._suppressed,
                    self._what,
                    self._interval_s,
                )
            self._window_end = now + self._interval_s
            self._written = 0
            self._suppressed = 0
        if self._written < self._burst:
            self._written += 1
            self._logger.log(level, message, *args)
        else:
            self._suppressed += 1
