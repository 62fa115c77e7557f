"""The ``spyre-emu`` console script: the CLI, loaded inside the interrupt handling.

Loading the CLI imports numpy and the modules of every command (about a third of a second; numba loads
later, with the first simulation); a Ctrl-C in that time would otherwise end in Python's traceback instead
of the CLI's one line.
"""

from __future__ import annotations

import sys

EXIT_INTERRUPTED = 130


def main(argv: list[str] | None = None) -> int:
    try:
        from .cli import main as cli_main  # noqa: PLC0415 -- loaded here, inside the handler, on purpose
    except KeyboardInterrupt:
        print("spyre-emu: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
