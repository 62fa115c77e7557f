"""`spyre-emu`: argument parsing and output files only; the work is in pipeline.run.

Every user error is one line on stderr and exit status 2; output files are written only
after the run succeeded, each through a temporary file renamed into place.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from .config import load_machine
from .errors import SpyreEmuError
from .pipeline import load_program, run
from .results import chrome_trace

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not usage + message
        raise SpyreEmuError(message, "spyre-emu")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="spyre-emu", description="Cycle-accurate simulator of the IBM Spyre card.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run_cmd = sub.add_parser("run", help="simulate a program and print its report")
    run_cmd.add_argument("program", help="unit program JSON")
    run_cmd.add_argument("--config", help="machine TOML (default: configs/spyre.toml)")
    run_cmd.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                         help="override a config value, e.g. ring.hop_latency_cycles=3")
    run_cmd.add_argument("--functional", action="store_true", help="move real bytes and compute values")
    run_cmd.add_argument("--input", action="append", default=[], metavar="BUFFER=FILE.npy",
                         help="functional input for a buffer (overrides the program's)")
    run_cmd.add_argument("--output-dir", default=".", metavar="DIR",
                         help="where functional outputs (.npy) are written (default: .)")
    run_cmd.add_argument("--json", metavar="OUT", help="write the report as JSON")
    run_cmd.add_argument("--trace", metavar="OUT", help="write a Chrome trace JSON")
    run_cmd.add_argument("--max-cycles", type=int, metavar="N", help="stop with an error after N cycles")
    run_cmd.add_argument("--quiet", action="store_true", help="do not print the report")
    return parser


def _inputs(items: list[str]) -> dict[str, Path]:
    out = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise SpyreEmuError("expected BUFFER=FILE.npy", f"--input {item}")
        out[name] = Path(path)
    return out


def _write_atomic(path: str | Path, write) -> None:
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent if str(path.parent) else ".", prefix=f".{path.name}.")
    except OSError as exc:
        raise SpyreEmuError(f"cannot write: {exc.strerror}", str(path)) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _run(args: argparse.Namespace) -> None:
    if args.max_cycles is not None and args.max_cycles <= 0:
        raise SpyreEmuError("must be a positive number of cycles", "--max-cycles")
    machine = load_machine(args.config, args.set)
    program = load_program(args.program, machine)
    kwargs = {"max_cycles": args.max_cycles} if args.max_cycles else {}
    result = run(program, machine, functional=args.functional, inputs=_inputs(args.input), **kwargs)
    outputs: list[tuple[Path, object]] = []
    if args.json:
        outputs.append((Path(args.json), result.report.to_json().encode()))
    if args.trace:
        outputs.append((Path(args.trace), chrome_trace(result.log, machine).encode()))
    for name, array in result.outputs.items():
        outputs.append((Path(args.output_dir) / program.buffers[name].output, array))
    for path, payload in outputs:
        if isinstance(payload, bytes):
            _write_atomic(path, lambda h, p=payload: h.write(p))
        else:
            _write_atomic(path, lambda h, a=payload: np.save(h, a, allow_pickle=False))
    if not args.quiet:
        sys.stdout.write(result.report.to_text())


def main(argv: list[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
        _run(args)
    except SpyreEmuError as exc:
        print(f"spyre-emu: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("spyre-emu: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
