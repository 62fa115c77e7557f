"""`spyre-emu`: argument parsing and output files only; the work is in pipeline.run (``run``),
kernel_program.import_sdsc (``import-sdsc``) and results.compare (``compare``, ``check``).

Every user error is one line on stderr and exit status 2; output files are written only
after the run succeeded: all to temporary files first, then each renamed into place.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from . import pool
from .config import load_machine
from .engine import DEFAULT_MAX_CYCLES
from .errors import ConfigError, SpyreEmuError
from .files import distinct_outputs, write_all
from .gemm import run_gemm
from .host import load_host
from .host.drawer import run_on_cards, trace_events
from .host.drawer import text as drawer_text
from .kernel_program import import_sdsc
from .pipeline import load, run
from .results import chrome_trace, ideal_cycles_files
from .results.compare import compare, failures, read_report, render, threshold
from .results.progress import ProgressBar
from .serving import command as serve_command
from .unit_program.load import read_json
from .validation.calibration import DEFAULT_DATA, data_files, load_cases
from .validation.cases import counted, plot_calibration, render_calibration, run_cases, timed
from .validation.host import host_cases, render_host
from .validation.measurements import MEASUREMENTS, PROGRAMS, render_overall, validate
from .validation.measurements import render as render_validation

EXIT_USAGE = 2
EXIT_SLOWER = 1  # compare, check: a row is slower than allowed
LINE_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"  # every character str.splitlines breaks at


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not usage + message
        raise SpyreEmuError(message)  # main() adds the "spyre-emu: error:" prefix


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
                         help="where functional outputs (.npy) are written, created if missing (default: .)")
    run_cmd.add_argument("--json", metavar="OUT", help="write the report as JSON")
    run_cmd.add_argument("--trace", metavar="OUT", help="write a Chrome trace JSON (acelyzer dialect; Perfetto) "
                         "and the folder OUT_ideal_cycles/ that acelyzer -c reads")
    run_cmd.add_argument("--max-cycles", type=int, metavar="N", help="stop with an error after N cycles")
    run_cmd.add_argument("--quiet", action="store_true", help="do not print the report")
    run_cmd.add_argument("--cards", type=int, metavar="N", help="run the program on N cards of a drawer, one host "
                         "process each, all-reducing a kernel program's outputs (docs/host.md)")
    _gemm_parser(sub)
    _validate_parser(sub)
    _sweep_parser(sub)
    serve_command.add_parser(sub)
    _ci_parsers(sub)
    imp = sub.add_parser("import-sdsc", help="convert torch-spyre compiler output to a kernel program")
    imp.add_argument("directory", help="folder with sdsc_*.json (and bundle.mlir, if torch-spyre wrote one)")
    imp.add_argument("-o", "--output", required=True, metavar="OUT", help="kernel program JSON to write")
    plot = sub.add_parser("plot", help="draw a report (spyre-emu run --json) as an image")
    plot.add_argument("report", help="report JSON")
    plot.add_argument("--kind", required=True, help="gantt, heatmap, roofline or ring")
    plot.add_argument("-o", "--output", required=True, metavar="OUT", help="image to write (.png, .svg, .pdf)")
    return parser


def _gemm_parser(sub: argparse._SubParsersAction) -> None:
    gemm = sub.add_parser("gemm", help="simulate one GEMM (M x K) @ (K x N) and print its report")
    for dim in ("m", "n", "k"):
        gemm.add_argument(f"--{dim}", type=int, required=True, help=f"GEMM size {dim.upper()}")
    gemm.add_argument("--dtype", default="fp16", help="element type of A and B (default fp16)")
    gemm.add_argument("--cores", type=int, default=1, help="cores to split M and N over (default 1)")
    gemm.add_argument("--config", help="machine TOML (configs/plain-systolic.toml: a textbook array)")
    gemm.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a config value")
    gemm.add_argument("--json", metavar="OUT", help="write the report as JSON")
    gemm.add_argument("--max-cycles", type=int, metavar="N", help="stop with an error after N cycles")
    gemm.add_argument("--quiet", action="store_true", help="do not print the report")


def _ci_parsers(sub: argparse._SubParsersAction) -> None:
    cmp = sub.add_parser("compare", help="per-kernel cycles of two reports; exit 1 if slower than allowed")
    cmp.add_argument("base", help="baseline report JSON (spyre-emu run --json)")
    cmp.add_argument("new", help="new report JSON")
    cmp.add_argument("--fail-if-slower", type=float, metavar="PCT", help="exit 1 if a row is slower by more")
    check = sub.add_parser("check", help="run a program and compare it with a baseline report")
    check.add_argument("program", help="unit or kernel program JSON")
    check.add_argument("--baseline", required=True, metavar="REPORT", help="baseline report JSON")
    check.add_argument("--tolerance", type=float, default=0.0, metavar="PCT",
                       help="exit 1 if a row is slower than the baseline by more (default 0)")
    check.add_argument("--config", help="machine TOML (default: configs/spyre.toml)")
    check.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a config value")
    check.add_argument("--json", metavar="OUT", help="write the new report as JSON (the next baseline)")


def _validate_parser(sub: argparse._SubParsersAction) -> None:
    val = sub.add_parser("validate", help="run the calibration programs against the silicon measurements")
    val.add_argument("--config", help="machine TOML (default: configs/spyre.toml)")
    val.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a config value")
    val.add_argument("--out", default="docs/validation.md", help="markdown to write (default: docs/validation.md)")
    val.add_argument("--only", action="append", default=[], metavar="NAME",
                     help=f"run only this measurement (repeatable): {', '.join(m.name for m in MEASUREMENTS)}, "
                     "a whole call of measurements.json, or the start of a calibration case's name")
    val.add_argument("--programs", default=str(PROGRAMS), metavar="DIR", help="the calibration programs")
    val.add_argument("--data", metavar="PATH", help="silicon measurements: a folder holding matmul_split_sweep.csv, "
                     "measurements.json or both, or one .csv sweep or .json of single figures (default: "
                     "../shared/calibration beside the project, when it is there)")
    val.add_argument("--plot", metavar="FILE.png", help="simulated vs measured plot (default: beside --out)")
    val.add_argument("--quiet", action="store_true", help="do not print the table")


def _max_cycles(value: int | None) -> dict[str, int]:
    if value is not None and not 0 < value <= DEFAULT_MAX_CYCLES:
        raise SpyreEmuError(f"must be a number of cycles from 1 to {DEFAULT_MAX_CYCLES}", "--max-cycles")
    return {"max_cycles": value} if value else {}


def _inputs(items: list[str]) -> dict[str, Path]:
    out = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise SpyreEmuError("expected BUFFER=FILE.npy", f"--input {item}")
        out[name] = Path(path)
    return out


def _ideal_cycles_dir(trace: Path) -> Path:
    """Beside the trace: run.json -> run_ideal_cycles/ (acelyzer -i run.json -c run_ideal_cycles)."""
    return trace.with_name(trace.stem + "_ideal_cycles")


def _run(args: argparse.Namespace) -> None:
    kwargs = _max_cycles(args.max_cycles)
    inputs = _inputs(args.input)
    read = {"the program": args.program, "--config": args.config, **{f"--input {n}": p for n, p in inputs.items()}}
    named = {"--json": args.json, "--trace": args.trace,
             "--trace's folder": args.trace and _ideal_cycles_dir(Path(args.trace))}
    distinct_outputs(named, read)
    machine = load_machine(args.config, args.set)
    host = load_host() if args.cards is not None else None
    if host and not 1 <= args.cards <= host.drawer.max_cards:
        raise ConfigError(f"a drawer holds 1 to {host.drawer.max_cards} cards, got {args.cards}", None, "--cards")
    program = load(args.program, machine)
    bar = ProgressBar(sys.stderr)
    try:
        result = run(program, machine, functional=args.functional, inputs=inputs, progress=bar,
                     **kwargs)
    finally:
        bar.close()
    trace = chrome_trace(result.log, machine, result.report.data) if args.trace else ""
    drawer = ""
    if host:
        figures, timeline = run_on_cards(program, Path(args.program).name, result.report.data["latency_us"],
                                         args.cards, host, machine)
        result.report.data["drawer"], drawer = figures, drawer_text(figures)
        if trace:
            data = json.loads(trace)
            data["traceEvents"] += trace_events(timeline, args.cards)
            trace = json.dumps(data) + "\n"
    outputs: list[tuple[Path, object]] = []
    if args.json:
        outputs.append((Path(args.json), result.report.to_json().encode()))
    if args.trace:
        outputs.append((Path(args.trace), trace.encode()))
    for name, array in result.outputs.items():
        outputs.append((Path(args.output_dir) / result.output_files[name], array))
    distinct_outputs({**named, **{f"output {name}": Path(args.output_dir) / file
                                  for name, file in result.output_files.items()}}, read)
    write_all(outputs, {_ideal_cycles_dir(Path(args.trace)): ideal_cycles_files(result.report.data["kernels"])}
              if args.trace else None, Path(args.output_dir) if result.outputs else None)
    if not args.quiet:
        sys.stdout.write(result.report.to_text() + drawer)


def _compare(args: argparse.Namespace) -> int:
    limit = None if args.fail_if_slower is None else threshold(args.fail_if_slower, "--fail-if-slower")
    rows = compare(read_report(args.base), read_report(args.new))
    sys.stdout.write(render(rows, limit))
    return EXIT_SLOWER if failures(rows, limit) else 0


def _check(args: argparse.Namespace) -> int:
    limit = threshold(args.tolerance, "--tolerance")
    distinct_outputs({"--json": args.json}, {"the program": args.program, "--baseline": args.baseline,
                                             "--config": args.config})
    baseline = read_report(args.baseline)
    machine = load_machine(args.config, args.set)
    report = run(load(args.program, machine), machine).report
    if args.json:
        write_all([(Path(args.json), report.to_json().encode())])
    rows = compare(baseline, report.data)
    sys.stdout.write(render(rows, limit))
    if any(r.change_pct is not None and r.change_pct < -limit for r in rows):
        sys.stdout.write("some rows are faster than the baseline: update it (spyre-emu check ... --json NEW)\n")
    return EXIT_SLOWER if failures(rows, limit) else 0


def _gemm(args: argparse.Namespace) -> None:
    kwargs = _max_cycles(args.max_cycles)
    distinct_outputs({"--json": args.json}, {"--config": args.config})
    machine = load_machine(args.config, args.set)
    report = run_gemm(args.m, args.n, args.k, machine, args.dtype, args.cores, **kwargs)
    if args.json:
        write_all([(Path(args.json), report.to_json().encode())])
    if not args.quiet:
        systolic = report.data.get("systolic")
        extra = "" if not systolic else (
            f"plain {systolic['array'][0]}x{systolic['array'][1]} {systolic['dataflow']} array: "
            f"{systolic['folds']} folds of {systolic['fold_cycles']} cycles; SCALE-Sim utilization: overall "
            f"{systolic['overall_util_percent']:.2f}%, mapping {systolic['mapping_efficiency_percent']:.2f}%, "
            f"compute {systolic['compute_util_percent']:.2f}%\n")
        sys.stdout.write(report.to_text() + extra)


def _sweep_parser(sub: argparse._SubParsersAction) -> None:
    sw = sub.add_parser("sweep", help="simulate every point of a design space (a TOML spec) and tabulate them")
    sw.add_argument("spec", help="sweep spec TOML (see docs/sweeps.md, examples/sweeps/)")
    sw.add_argument("--executor", choices=["local", "ray", "dask"], help="where points run (default: local processes)")
    sw.add_argument("--workers", type=int, metavar="N", help="worker processes (default: the CPUs here)")
    sw.add_argument("--address", help="an existing Ray or Dask scheduler to run on")
    sw.add_argument("--output", metavar="FILE", help="write the table: .csv, .json or .parquet")
    sw.add_argument("--no-cache", action="store_true", help="simulate every point, even those done before")
    sw.add_argument("--quiet", action="store_true", help="do not print the table")


def _sweep(args: argparse.Namespace) -> None:
    from .sweep import run_spec  # noqa: PLC0415 -- sweeps load their executors only for this command
    from .sweep.spec import PATHS as SPEC_PATHS  # noqa: PLC0415
    from .sweep.spec import load_spec  # noqa: PLC0415
    from .sweep.table import FORMATS  # noqa: PLC0415
    if args.workers is not None and args.workers < 1:
        raise SpyreEmuError("must be at least 1", None, "--workers")
    output = Path(args.output) if args.output else None
    if output and output.suffix not in FORMATS:
        raise SpyreEmuError(f"unknown output type {output.suffix!r}; expected one of {', '.join(FORMATS)}", None,
                            "--output")
    task = load_spec(args.spec).task
    distinct_outputs({"--output": output}, {"the spec": args.spec, **{f"task.{k}": getattr(task, k, None)
                                                                      for k in SPEC_PATHS}})
    try:
        result = run_spec(args.spec, executor=args.executor, workers=args.workers, address=args.address,
                          cache=not args.no_cache)
    finally:
        pool.shutdown()  # the worker processes end with the command
    if output:
        write_all([(output, result.table.encode(output.suffix))])
    if not args.quiet:
        sys.stdout.write(result.table.text())
    print(f"spyre-emu: sweep: {result.stats.summary()}", file=sys.stderr)


def _validate(args: argparse.Namespace) -> int:
    data = Path(args.data) if args.data else DEFAULT_DATA
    used = bool(args.data) or data.is_dir()  # the default folder is read when it is there
    sweep, single = data_files(data) if used else (None, None)
    for option, path in (("--out", args.out), ("--plot", args.plot)):
        if path is not None and Path(path).name in ("", ".."):
            raise SpyreEmuError("expected a file name", None, option)
    plot = Path(args.plot) if args.plot else Path(args.out).with_suffix(".png")
    distinct_outputs({"--out": args.out, "--plot": plot},
                     {"--config": args.config, "--data's sweep": sweep, "--data's measurements": single,
                      **{f"--programs' {p.name}": p for p in sorted(Path(args.programs).glob("*.json"))}})
    machine = load_machine(args.config, args.set)
    cases, calls = load_cases(data) if used else ([], {})
    if args.only:
        cases = [c for c in cases if any(c.name.startswith(n) for n in args.only)]
        calls = {name: entry for name, entry in calls.items() if any(name.startswith(n) for n in args.only)}
    progress = lambda what: print(f"spyre-emu: validate: {what}", file=sys.stderr)  # noqa: E731
    rows, implied = validate(machine, tuple(args.only), Path(args.programs), progress,
                             tuple(c.name for c in cases) + tuple(calls))
    shown = None if args.quiet else progress  # --quiet keeps the measurements' lines, as before
    whole, block = host_cases(calls, machine, load_host(), Path(args.programs), str(single or data), shown)
    points, not_run = run_cases(machine, cases, shown) if cases else ([], [])
    config = " ".join([f"config `{args.config or 'configs/spyre.toml'}`", *(f"`--set {s}`" for s in args.set)])
    text = render_validation(rows, implied, config) + (render_host(whole, block) if whole else "")
    outputs = []
    if points or not_run:
        plot = plot if timed(points) else None  # PT utilizations and ratios are no times to plot
        text += render_calibration(points, _shown(data), plot and os.path.relpath(plot, Path(args.out).parent),
                                   not_run)
        outputs += [(plot, plot_calibration(points, plot))] if plot else []
    text += render_overall([("measurements above", rows), ("with the host (counted)", [w for w in whole if w.counted]),
                            ("calibration data (times and PT utilization)", counted(points))])
    write_all([(Path(args.out), text.encode()), *outputs])
    if not args.quiet:
        sys.stdout.write(text)
    for failed in not_run:  # after every other case ran and the files were written: one line each, then status 2
        print(f"spyre-emu: error: {one_line(failed.reason)}", file=sys.stderr)
    return EXIT_USAGE if not_run else 0


def _shown(folder: Path) -> str:
    """The data folder as the report names it: relative to the project when beside it."""
    try:
        return str(folder.resolve().relative_to(Path(__file__).resolve().parents[2]))
    except ValueError:
        return str(folder)


def _import_sdsc(args: argparse.Namespace) -> None:
    folder = Path(args.directory)
    read = sorted([*folder.glob("sdsc_*.json"), *folder.glob("bundle.mlir")]) if folder.is_dir() else []
    distinct_outputs({"-o": args.output}, {f"the input {p.name}": p for p in read})
    program = import_sdsc(args.directory)
    write_all([(Path(args.output), (json.dumps(program, indent=1) + "\n").encode())])


def _plot(args: argparse.Namespace) -> None:
    from .results.plots import KINDS, image_bytes  # noqa: PLC0415 -- matplotlib loads only for this command
    if args.kind not in KINDS:
        raise SpyreEmuError(f"unknown kind {args.kind!r}; expected one of {', '.join(KINDS)}", "--kind")
    distinct_outputs({"-o": args.output}, {"the report": args.report})
    try:
        figure = KINDS[args.kind](read_json(Path(args.report)))
    except SpyreEmuError as exc:
        raise SpyreEmuError(exc.message, exc.file or args.report, exc.path) from None
    write_all([(Path(args.output), image_bytes(figure, args.output))])


def one_line(message: str) -> str:
    """The message with its line breaks escaped: a file name or a --set value may hold any of them."""
    return "".join(repr(c)[1:-1] if c in LINE_BREAKS else c for c in message)


def main(argv: list[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
        if args.command == "import-sdsc":
            _import_sdsc(args)
        elif args.command == "plot":
            _plot(args)
        elif args.command == "gemm":
            _gemm(args)
        elif args.command == "validate":
            return _validate(args)
        elif args.command == "sweep":
            _sweep(args)
        elif args.command == "serve":
            serve_command.serve(args)
        elif args.command == "compare":
            return _compare(args)
        elif args.command == "check":
            return _check(args)
        else:
            _run(args)
    except SpyreEmuError as exc:
        print(f"spyre-emu: error: {one_line(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    except MemoryError:  # a program too large for this machine's memory: still one line, not a traceback
        print("spyre-emu: error: out of memory (the program is too large to simulate here)", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("spyre-emu: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
