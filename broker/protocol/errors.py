"""The codec's error types.

Callers handle exactly one decode error type: anything wrong with bytes from the
network (truncation, bad lengths, invalid UTF-8, oversized counts) surfaces as
:class:`DecodeError`, so a connection handler can drop a bad client without
catching a zoo of low-level exceptions.
"""

from __future__ import annotations

__all__ = ["DecodeError", "EncodeError", "UnsupportedVersionError"]


class DecodeError(ValueError):
    """Bytes that are not a valid encoding of the expected message."""


class UnsupportedVersionError(DecodeError):
    """An api key this codec does not know, or a version outside ``validVersions``.

    A subclass of :class:`DecodeError` so that generic handlers still catch it, while
    the broker can answer it with UNSUPPORTED_VERSION instead of closing the
    connection.
    """


class EncodeError(ValueError):
    """A value that cannot be put on the wire in the requested version."""
