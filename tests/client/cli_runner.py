"""`broker client` run in this process, as a user's shell would run it, but without the
interpreter start and codec import that cost a subprocess ~1.5 s."""

from __future__ import annotations

import contextlib
import io
import sys

import attrs

from broker.client.cli import main


@attrs.frozen
class CliResult:
    code: int
    out: bytes
    err: str


def run_cli(args: list[str], stdin: bytes = b"") -> CliResult:
    """main(args) with stdin given and stdout (bytes) and stderr captured."""
    fake_in = io.TextIOWrapper(io.BytesIO(stdin))
    fake_out = io.TextIOWrapper(io.BytesIO(), write_through=True)
    err = io.StringIO()
    saved = sys.stdin, sys.stdout
    sys.stdin, sys.stdout = fake_in, fake_out
    try:
        with contextlib.redirect_stderr(err):
            code = main(args)
    finally:
        sys.stdin, sys.stdout = saved
    fake_out.flush()
    raw = fake_out.buffer
    assert isinstance(raw, io.BytesIO)
    return CliResult(code, raw.getvalue(), err.getvalue())
