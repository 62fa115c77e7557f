"""Matmuls the calibration data does not hold, as validate would run them from another sweep file: other
models' linear layers, attention's batched matmuls, divisions over 32 down to 1 core, divisions that do not
divide a dim evenly, and divisions no card can run. Each must lower and run inside the physical bounds, or
fail as one line naming its file and row (docs/validation-generalization.md has the larger sample)."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spyre_emu.cli import main
from spyre_emu.errors import SpyreEmuError
from spyre_emu.pipeline import parse, run
from spyre_emu.validation import cases as cases_module
from spyre_emu.validation.accuracy import Point
from spyre_emu.validation.calibration import SINGLE, SWEEP, load_cases, split_problem
from spyre_emu.validation.cases import render_calibration
from spyre_emu.validation.workloads import matmul_program
from tests.conftest import CALIBRATION_COLUMNS as COLUMNS
from tests.conftest import calibration_folder

DRAM_BYTES_PER_US = 204.8e3          # 16 LPDDR5 channels at 12.8 GB/s
MACS_PER_US_PER_CORE = 1024 * 1.1e3  # 1024 fp16 MAC a cycle at 1.1 GHz

UNSEEN = [  # (role, phase, B, M, N, K, split): none of these shapes is in ../shared/calibration
    ("llama8b_kv", "decode", 1, 8, 1024, 4096, (1, 1, 16, 2)),      # K/V projection, 8 sequences, 32 cores
    ("granite2b_qo", "decode", 1, 1, 2048, 2048, (1, 1, 32, 1)),    # one token
    ("granite2b_kv", "prefill", 1, 128, 512, 2048, (1, 4, 8, 1)),
    ("granite2b_up", "decode", 1, 32, 8192, 2048, (1, 2, 4, 2)),    # 16 cores
    ("llama8b_down", "decode", 1, 16, 4096, 14336, (1, 1, 4, 2)),   # 8 cores, K split
    ("qk_h8_d128", "decode", 8, 64, 256, 128, (8, 4, 1, 1)),        # Q @ K^T: K is the head dim
    ("av_h12_d64", "decode", 12, 64, 64, 256, (4, 2, 1, 2)),        # probabilities @ V: N is the head dim
    ("av_h40_d128", "prefill", 40, 128, 128, 128, (2, 1, 1, 1)),    # 2 cores
    ("qk_h8_d64", "decode", 8, 16, 128, 64, (1, 1, 1, 1)),          # 1 core
    ("odd_m", "decode", 1, 100, 512, 512, (1, 8, 1, 1)),            # 100 rows over 8 cores: 13 or 12 each
    ("odd_n", "decode", 1, 64, 1000, 1024, (1, 1, 4, 1)),           # 16 sticks (the last one padded) over 4
    ("odd_k", "decode", 1, 16, 512, 4160, (1, 1, 1, 2)),            # 65 K sticks over 2 cores
    ("odd_b", "prefill", 12, 64, 128, 128, (8, 1, 1, 1)),           # 12 heads over 8 cores
]
IMPOSSIBLE = [  # (row, problem)
    (("over_m", "decode", 1, 1, 4096, 4096, (1, 32, 1, 1)), "split_m = 32 is more than M = 1 allows"),
    (("over_n", "decode", 1, 64, 1024, 4096, (1, 1, 32, 1)), "split_n = 32 is more than N = 1024 allows"),
    (("over_b", "decode", 1, 64, 1024, 1024, (2, 1, 1, 1)), "split_b = 2 is more than B = 1 allows"),
    (("over_k", "decode", 1, 64, 4096, 128, (1, 1, 1, 4)), "split_k = 4 is more than K = 128 allows"),
    (("cores64", "prefill", 1, 512, 4096, 4096, (1, 8, 8, 1)), "work division needs 64 cores; the card has 32"),
    (("qk_h40_span", "prefill", 40, 2048, 4096, 128, (1, 1, 32, 1)), "core 0 would span 670771200 B of tensor 'C'"),
]


def _bounds_us(b: int, m: int, n: int, k: int, split: tuple[int, ...]) -> tuple[float, float]:
    """Nothing is faster than A and B read and C written once at the DRAM peak, nor than its MACs at the
    peak of the cores the division uses."""
    nbytes = 2 * (b * m * k + b * k * n + b * m * n)
    return nbytes / DRAM_BYTES_PER_US, b * m * n * k / (math.prod(split) * MACS_PER_US_PER_CORE)


@pytest.mark.parametrize("row", UNSEEN, ids=[f"{r[0]}-{r[1]}-{'x'.join(map(str, r[-1]))}" for r in UNSEEN])
def test_unseen_cases_run_within_the_physical_bounds(row, spyre):
    *_, b, m, n, k, split = row
    report = run(parse(matmul_program(b, m, n, k, split), spyre, "unseen"), spyre, cache=False).report.data
    card_us = report["card_cycles"] / report["clock_ghz"] / 1000
    dram_us, mac_us = _bounds_us(b, m, n, k, split)
    assert card_us >= max(dram_us, mac_us)
    assert report["pt"]["macs"] >= b * m * n * k  # every product is computed (padding may add more)
    assert card_us < 100 * max(dram_us, mac_us)  # no order-of-magnitude nonsense (the sample's worst is 38x)


def test_uneven_is_asked_only_where_a_dim_does_not_divide():
    """The calibration's own rows (every dim divides) keep the program they always had."""
    assert "uneven" not in matmul_program(1, 512, 4096, 4096, (1, 4, 8, 1))["kernels"][0]
    assert matmul_program(1, 100, 512, 512, (1, 8, 1, 1))["kernels"][0]["uneven"] is True
    assert matmul_program(1, 16, 512, 4160, (1, 1, 1, 2))["kernels"][0]["uneven"] is True  # 65 K sticks


def test_split_problems_name_the_dim():
    assert split_problem(1, 64, 4096, 4096, (1, 4, 8, 1)) == ""
    assert split_problem(1, 100, 4096, 4096, (1, 32, 1, 1)) == ""  # uneven, but a row for every core
    for (_, _, b, m, n, k, split), problem in IMPOSSIBLE[:4]:
        assert split_problem(b, m, n, k, split).startswith(problem)


def test_validate_reports_rows_it_cannot_run_and_goes_on(tmp_path, capsys, monkeypatch):
    """The impossible rows are listed with their reason, in the output and one line each on stderr, after the
    rows that can run ran; the exit status is then 2. (In this process: a worker runs the same function.)"""
    monkeypatch.setenv("SPYRE_EMU_WORKERS", "1")
    rows = [UNSEEN[0], *(r for r, _ in IMPOSSIBLE), UNSEEN[9]]
    data = calibration_folder(tmp_path, rows)
    out = tmp_path / "v.md"
    names = ("llama8b", "over", "cores64", "qk_h40", "odd_m")
    assert main(["validate", "--data", str(data), "--out", str(out), "--quiet",
                 *(a for n in names for a in ("--only", n))]) == 2
    text = out.read_text()
    assert "**Mean absolute error over all 2 timed cases:" in text
    assert "## Cases not run (6)" in text
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("spyre-emu: error:")]
    sweep = data / SWEEP
    assert errors == [
        f"spyre-emu: error: {sweep} row 3: split_m = 32 is more than M = 1 allows: each slice needs at least one row",
        f"spyre-emu: error: {sweep} row 4: split_n = 32 is more than N = 1024 allows: each slice needs at least one "
        "64-element stick of N",
        f"spyre-emu: error: {sweep} row 5: split_b = 2 is more than B = 1 allows: each slice needs at least one batch",
        f"spyre-emu: error: {sweep} row 6: split_k = 4 is more than K = 128 allows: each slice needs at least one "
        "64-element stick of K",
        f"spyre-emu: error: {sweep} row 7: kernels[0].work_division: work division needs 64 cores; the card has 32",
        f"spyre-emu: error: {sweep} row 8: kernels[0].work_division: core 0 would span 670771200 B of tensor 'C'; at "
        "most 268435456 B per core: split the work over more cores"]  # before lowering (15-31 s after it before)
    assert (tmp_path / "v.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize(("cell", "column", "expected"), [
    ("abc", "M", "expected a positive integer, got 'abc'"), ("0", "split_n", "expected a positive integer, got '0'"),
    ("", "K", "expected a positive integer, got ''"), ("nan", "device_us", "expected a positive number, got 'nan'")])
def test_a_malformed_row_is_listed_not_run_and_the_others_run(tmp_path, capsys, monkeypatch, cell, column,
                                                               expected):
    """One bad row does not void a sweep (a hang logged as an empty time, a typo): it is one line naming its row
    and column, listed under the cases not run; the other rows run, the files are written, the status is 2."""
    monkeypatch.setenv("SPYRE_EMU_WORKERS", "1")
    data = calibration_folder(tmp_path, [UNSEEN[0], UNSEEN[1]])
    lines = (data / SWEEP).read_text().splitlines()
    cells = lines[2].split(",")
    cells[COLUMNS.index(column)] = cell
    (data / SWEEP).write_text("\n".join([*lines[:2], ",".join(cells)]) + "\n")
    out = tmp_path / "v.md"
    assert main(["validate", "--data", str(data), "--out", str(out), "--quiet", "--only", "llama8b",
                 "--only", "granite2b"]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("spyre-emu: error:")]
    assert errors == [f"spyre-emu: error: {data / SWEEP} row 3: {column}: {expected}"]
    text = out.read_text()
    assert "| matmul decode: llama8b_kv decode [1,8,4096]×[1,4096,1024] (b, m, n, k) = (1, 1, 16, 2) | 100.00 |" in text
    assert "## Cases not run (1)" in text
    assert "granite2b_qo_decode_row3" in text


def test_single_figures_take_their_shape_from_what_they_measured(tmp_path):
    """A tuned-matmul entry runs the shape its ``what`` states; an entry that states none runs the
    Granite-3.3-8B prefill shape its name stands for, as before."""
    singles = [{"name": "qo_decode_pt_util", "what": "matmul [1,64,2048] x [2048,2048]", "device_us": 50.0,
                "split": {"b": 1, "m": 1, "n": 32, "k": 1}},
               {"name": "mlp_up_sendnn_prefill", "what": "the production compiler's own split", "device_us": 959.0}]
    cases = {c.name: c for c in load_cases(calibration_folder(tmp_path, [UNSEEN[0]], singles))[0]}
    assert cases["qo_decode_pt_util"].program == matmul_program(1, 64, 2048, 2048, (1, 1, 32, 1))
    assert cases["qo_decode_pt_util"].category == "matmul decode (single)"
    assert cases["mlp_up_sendnn_prefill"].program == matmul_program(1, 512, 12800, 4096, (1, 4, 8, 1))


@pytest.mark.parametrize(("entry", "path", "expected"), [
    ({"device_us": "fast"}, "device_us", "expected a positive number of microseconds, got 'fast'"),
    ({"device_us": 9.0, "split": {"m": "4"}}, "split", "expected null or {'b': ..., 'm': ..., 'n': ..., 'k': ...}"),
    ({"device_us": 9.0, "split": {"m": 4, "q": 2}}, "split", "expected null or {'b': ..., 'm': ..., 'n': ..., "
                                                             "'k': ...} (a dim left out is not split)"),
    ({"device_us": 9.0, "pt_util_pct": True}, "pt_util_pct", "expected a positive number, a range {'low': ..., "
                                                              "'high': ...} or null, got True"),
    ({"device_us": 9.0, "pt_util_pct": {"low": 79, "high": 66}}, "pt_util_pct", "expected a positive number, a "
                                                                                "range"),
    ({"device_us": 9.0, "what": "matmul [0,4096] x [4096,4096]"}, "what", "expected [[B,]M,K] x [[B,]K,N] with one "
                                                                           "K, one B and no size of 0; got '[0,4096]"),
    ({"device_us": 9.0, "what": "matmul [64,128] x [256,64]"}, "what", "expected [[B,]M,K] x [[B,]K,N]"),
    ({"device_us": 9.0, "what": "decode matmul [1,64,4096] x [4096,1024], 1000000000 cores"}, "what",
     "a kernel runs on 1 to 32 cores; `what` states 1000000000")])
def test_a_malformed_single_figure_is_listed_not_run(tmp_path, capsys, monkeypatch, entry, path, expected):
    monkeypatch.setenv("SPYRE_EMU_WORKERS", "1")
    data = calibration_folder(tmp_path, [UNSEEN[0]], [{"name": "qo_x", **entry}])
    out = tmp_path / "v.md"
    assert main(["validate", "--data", str(data), "--out", str(out), "--quiet", "--only", "llama8b",
                 "--only", "qo_x"]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("spyre-emu: error:")]
    assert len(errors) == 1
    assert errors[0].startswith(f"spyre-emu: error: {data / SINGLE}: cases[qo_x].{path}: {expected}")
    assert "## Cases not run (1)" in out.read_text()


def test_an_undefined_rank_correlation_is_a_dash(recwarn):
    """Divisions the simulator (or the data) ties throughout have no Spearman: a dash, not nan and a numpy warning."""
    tied = [Point("bmm decode", "s", f"({i})", 10.0 + i, 5.0) for i in range(3)]
    text = render_calibration(tied, "data", None)
    assert "| bmm decode | 3 | 54.3 % | — | 20.0 %, 20.0 % |" in text  # errors −50, −54.5, −58.3 %
    assert "| s | 3 | — | (0): 10.0 µs | (2): 12.0 µs | 20.0 % |" in text  # tied first: the slowest measured
    assert not recwarn.list


@settings(max_examples=30, deadline=None, derandomize=True)
@given(b=st.integers(1, 6), m=st.integers(1, 200), n=st.integers(1, 600), k=st.integers(1, 600),
       split=st.tuples(*[st.sampled_from([1, 2, 3, 4, 8])] * 4))
def test_any_small_row_runs_within_the_bounds_or_says_why(spyre, b, m, n, k, split):
    """Random shapes and divisions (most of them uneven): a row with a problem, or more cores than the card,
    is the lowering's error too; every other row lowers and runs within the floors."""
    split = (split[0] if b > 1 else 1, *split[1:])  # B = 1 takes no batch split (split_problem's own case)
    problem = split_problem(b, m, n, k, split)
    program = matmul_program(b, m, n, k, split)
    if problem or math.prod(split) > 32:  # the card's 32 cores are the only other limit at these sizes
        with pytest.raises(SpyreEmuError):
            parse(program, spyre, "fuzz")
        return
    report = run(parse(program, spyre, "fuzz"), spyre, cache=False).report.data
    card_us = report["card_cycles"] / report["clock_ghz"] / 1000
    assert card_us >= max(_bounds_us(b, m, n, k, split))


def test_a_bug_on_one_case_is_reported_and_the_others_run(monkeypatch, spyre, tmp_path):
    """An unexpected exception while one case runs (a bug, not bad input) is that case's reason, not the end of
    validate: the other cases still give their points."""
    monkeypatch.setenv("SPYRE_EMU_WORKERS", "1")  # in this process, so that the patch below applies
    calls, real = [], cases_module.run

    def buggy_first(program, machine, **kwargs):
        calls.append(program)
        if len(calls) == 1:
            raise IndexError("a bug")
        return real(program, machine, **kwargs)
    monkeypatch.setattr(cases_module, "run", buggy_first)
    cases = load_cases(calibration_folder(tmp_path, [UNSEEN[0], UNSEEN[1]]))[0]
    points, not_run = cases_module.run_cases(spyre, cases)
    assert [p.label for p in points] == ["(b, m, n, k) = (1, 1, 32, 1)"]
    assert [n.reason for n in not_run] == [f"{tmp_path / SWEEP} row 2: internal error, please report it: "
                                           "IndexError: a bug"]


def test_a_rows_number_is_its_line_in_the_file(tmp_path):
    """A blank line (skipped by the csv reader) does not shift the row a reason names: the bad cell is on line 4."""
    data = calibration_folder(tmp_path, [UNSEEN[0], UNSEEN[1]])
    lines = (data / SWEEP).read_text().splitlines()
    (data / SWEEP).write_text("\n".join([lines[0], lines[1], "", lines[2].replace(",100.0", ",abc")]) + "\n")
    bad = load_cases(data)[0][1]
    assert (bad.source, bad.name) == (f"{data / SWEEP} row 4", "granite2b_qo_decode_row4")
    assert bad.problem == "device_us: expected a positive number, got 'abc'"


@pytest.mark.parametrize(("header", "message"), [
    ([c for c in COLUMNS if c not in ("M", "device_us")], "expected columns M, device_us in the header"),
    (COLUMNS, "expected a row under the header"),
])
def test_a_sweep_without_a_column_or_a_row_says_which(tmp_path, header, message):
    (tmp_path / SWEEP).write_text(",".join(header) + "\n")
    with pytest.raises(SpyreEmuError) as error:
        load_cases(tmp_path)
    assert (error.value.file, error.value.message) == (str(tmp_path / SWEEP), message)
