"""Configuration from environment variables, for containers.

`KAFKA_CFG_<KEY>` becomes the config key `<key>` lower-cased with `_` read as
`.` (and `__` as a literal `_`): `KAFKA_CFG_ADVERTISED_LISTENERS` ->
`advertised.listeners`. `python -m broker.env_overrides COMMAND...` is the
containers' entrypoint: when COMMAND is `broker serve`, it appends one
`--override key=value` per variable (after any given, so the environment
wins) and then replaces itself with COMMAND; any other command runs as is.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping, Sequence

PREFIX = "KAFKA_CFG_"


def config_key(variable: str, prefix: str = PREFIX) -> str:
    """The config key an environment variable names (prefix removed)."""
    name = variable[len(prefix) :].lower()
    return ".".join(part.replace("\0", "_") for part in name.replace("__", "\0").split("_"))


def overrides_from_environment(environ: Mapping[str, str], prefix: str = PREFIX) -> list[str]:
    """`key=value` strings for every `<prefix>*` variable, sorted by key."""
    pairs = {
        config_key(name, prefix): value
        for name, value in environ.items()
        if name.startswith(prefix) and len(name) > len(prefix)
    }
    return [f"{key}={value}" for key, value in sorted(pairs.items())]


def command_with_overrides(
    command: Sequence[str], environ: Mapping[str, str], prefix: str = PREFIX
) -> list[str]:
    argv = list(command)
    if argv[:2] == ["broker", "serve"]:
        for override in overrides_from_environment(environ, prefix):
            argv += ["--override", override]
    return argv


def main(argv: Sequence[str] | None = None) -> int:
    command = list(sys.argv[1:] if argv is None else argv)
    if not command:
        command = ["broker", "serve"]
    full = command_with_overrides(command, os.environ)
    executable = shutil.which(full[0])
    if executable is None:
        print(f"error: command not found: {full[0]}", file=sys.stderr)
        return 127
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(executable, full)


if __name__ == "__main__":
    sys.exit(main())
