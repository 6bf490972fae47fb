"""Compile the per-record hot loop (broker/protocol/record_batch/walk.py) with mypyc, if possible.

The result is `broker/protocol/record_batch/walk_native.<abi>.so`, stamped with the SHA-256
of the source it was built from; the broker uses it only while that matches (see
broker/protocol/native.py) and runs the pure module otherwise. Without a C compiler or
mypyc this says so in one line and exits 0, since the pure module is a complete
fallback; `--require` makes that an error instead.

Usage: python tools/build_native.py [--out DIR] [--require]
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from broker.protocol import native
from broker.protocol.record_batch import walk as record_walk

PACKAGE_DIR = Path(record_walk.__file__).resolve().parent


def compiler_available() -> bool:
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    return shutil.which(compiler) is not None


def mypyc_available() -> bool:
    return importlib.util.find_spec("mypyc") is not None


def build(out: Path) -> Path:
    """Build `walk_native` into `out`; returns the extension's path."""
    source = Path(record_walk.__file__)
    digest = native.source_digest(source)
    with tempfile.TemporaryDirectory(prefix="build-native-") as scratch:
        package = Path(scratch)
        name = native.native_name(record_walk).rsplit(".", 1)[1]
        (package / f"{name}.py").write_text(
            source.read_text() + f"\n{native.DIGEST_NAME} = {digest!r}\n"
        )
        # Compiled as a top-level module: mypyc then makes one self-contained extension,
        # which imports as well from inside the package.
        result = subprocess.run(
            [sys.executable, "-m", "mypyc", f"{name}.py"],
            cwd=package,
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(f"mypyc failed:\n{(result.stdout + result.stderr)[-3000:]}")
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        built = package / f"{name}{suffix}"
        if not built.exists():
            raise RuntimeError(f"mypyc left no {built.name}:\n{result.stdout[-3000:]}")
        out.mkdir(parents=True, exist_ok=True)
        target = out / built.name
        # Replace, not overwrite: a running broker may have the old file mapped.
        partial = target.with_name(target.name + ".partial")
        shutil.copyfile(built, partial)
        partial.replace(target)
        return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=PACKAGE_DIR)
    parser.add_argument("--require", action="store_true", help="fail when it cannot build")
    args = parser.parse_args(argv)
    missing = [
        what
        for what, present in (("C compiler", compiler_available()), ("mypyc", mypyc_available()))
        if not present
    ]
    try:
        if missing:
            raise RuntimeError(f"no {' and no '.join(missing)}")
        target = build(args.out)
    except RuntimeError as exc:
        print(f"record walk: not compiled ({exc}); the broker runs the pure-Python module")
        return 1 if args.require else 0
    print(f"record walk: compiled to {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
