"""The passes on their own: work division, scratchpad planning, fallbacks and host round trips."""

from __future__ import annotations

import csv
import warnings

import pytest

torch = pytest.importorskip("torch")

from spyre_emu.frontend import aten_to_kernels, last_report, layout, runtime, views, work_division  # noqa: E402
from spyre_emu.frontend.work_division import matmul_cost  # noqa: E402

from spyre_emu.config import load_machine  # noqa: E402
from spyre_emu.errors import SpyreEmuError  # noqa: E402
from spyre_emu.host import load_host  # noqa: E402
from tests.conftest import require_shared  # noqa: E402

pytestmark = pytest.mark.torch


def test_prefill_matmul_split_beats_rows_only():
    """torch-spyre issue 2407: on [512, 4096] x [4096, N], (8, 4) is 2-2.6x faster than (32, 1)."""
    machine = load_machine()
    for n in (4096, 12800):
        rows_only = matmul_cost(1, 512, 4096, n, (1, 32, 1), machine)
        mixed = matmul_cost(1, 512, 4096, n, (1, 8, 4), machine)
        assert rows_only > 2 * mixed


def test_matmul_division_in_the_program(check):
    check(torch.mm, torch.randn(512, 256).half(), torch.randn(256, 512).half())
    (row,) = last_report().kernels
    assert row["cores"] > 1


def test_intermediates_stay_in_lx(check):
    check(lambda x: (torch.exp(x * 0.5) + 1.0).sigmoid(), torch.randn(256, 512).half())
    (program,) = last_report().kernel_programs
    spaces = {name: t.get("space", "dram") for name, t in program["tensors"].items() if t["role"] == "intermediate"}
    assert set(spaces.values()) == {"lx"}


def test_a_kernel_writes_its_lx_result_over_the_lx_input_it_reads_last(check):
    """In (exp(s) + 1) * s, s = x / 2: exp may not write over s, which the last mul still reads (two tensors), but
    the add writes over exp's result, which nothing reads after it (one place)."""
    def f(x):
        s = x * 0.5
        return (s.exp() + 1.0) * s

    check(f, torch.randn(256, 512).half())
    (program,) = last_report().kernel_programs
    assert [k["op"] for k in program["kernels"]] == ["mul", "exp", "add", "mul"]
    s, e, a = (k["outputs"][0] for k in program["kernels"][:3])
    tensors = program["tensors"]
    assert tensors[s]["space"] == tensors[e]["space"] == "lx"
    assert "in_place_of" not in tensors[e]
    assert tensors[a]["in_place_of"] == e


def test_reduction_splits_a_long_reduced_dim():
    check_sum = torch.randn(4, 4096).half()
    with torch.no_grad():
        got = torch.compile(lambda x: x.mean(-1), backend="spyre_emu", dynamic=False)(check_sum)
    torch.testing.assert_close(got.float(), check_sum.float().mean(-1), atol=2e-3, rtol=5e-3)
    (program,) = last_report().kernel_programs
    assert program["kernels"][0]["work_division"].get("out", 1) > 1  # the reduced dim, over the ring


@pytest.mark.parametrize(("shape", "split"), [((256, 128), {"mb": 32, "out": 1}), ((4, 4096), {"mb": 4, "out": 8})])
def test_a_reduction_gives_its_rows_the_cores_first(shape, split):
    """As torch-spyre divides a reduction: 256 rows take all 32 cores and each row is summed whole; 4 rows take
    4, and the reduced dim's 64 sticks the 8 cores left."""
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(0)).half()  # the shared stream left as it was
    with torch.no_grad():
        got = torch.compile(lambda t: t.sum(-1), backend="spyre_emu", dynamic=False)(x)
    torch.testing.assert_close(got.float(), x.float().sum(-1), atol=0.25, rtol=5e-3)
    (program,) = last_report().kernel_programs
    division = program["kernels"][0]["work_division"]
    assert {d: division.get(d, 1) for d in split} == split


def test_a_column_sum_reads_its_input_in_its_own_layout():
    """Summing the first dim groups x as (rows, 1, columns), whose default layout is x's own (stick columns
    outermost), so a core's stick column is one run: on 32 cores a column sum of 2048 x 2048 takes about what the
    row sum does (silicon 69.9 and 57.9 us); grouped (1, rows, 1, columns) it read a stick at a time, 4.3x."""
    x = torch.randn(256, 128, generator=torch.Generator().manual_seed(0)).half()
    with torch.no_grad():
        got = torch.compile(lambda t: t.sum(0), backend="spyre_emu", dynamic=False)(x)
    torch.testing.assert_close(got.float(), x.float().sum(0), atol=0.25, rtol=5e-3)
    (program,) = last_report().kernel_programs
    assert [program["tensors"][t]["shape"] for t in program["kernels"][0]["inputs"]] == [[256, 1, 128]]
    big = torch.empty(2048, 2048, dtype=torch.float16, device="meta")
    times = []
    for dim in (0, 1):
        with torch.no_grad():
            torch.compile(lambda t, d=dim: t.sum(d), backend="spyre_emu", dynamic=False,
                          options={"cores": 32, "cache": False})(big)
        times.append(last_report().latency_us)
    assert times[0] < 1.5 * times[1]


def test_views_of_computed_values_move_on_the_card(check):
    check(lambda x: x.exp().view(16, 2, 64).permute(1, 0, 2).amax(-1), torch.randn(16, 128).half())
    rep = last_report()
    assert rep.crossings == []
    assert [k["op"] for k in rep.kernels] == ["exp", "ReStickifyOpHBM", "max"]  # one gather, exp read as (16, 2, 64)


def test_pointwise_ops_on_a_permuted_value_run_in_its_order(check):
    """The mul of the permuted exp runs over exp's own order and its result is the permuted view: no
    restickify (the output's order is the host's to read)."""
    check(lambda x: x.exp().view(16, 2, 64).permute(1, 0, 2) * 2, torch.randn(16, 128).half())
    assert [k["op"] for k in last_report().kernels] == ["exp", "mul"]


def test_a_refused_restickify_goes_through_the_host(check, monkeypatch):
    monkeypatch.setattr(views, "accepted", lambda *shapes: True)  # plan a kernel the lowering refuses
    check(lambda x: x.exp().view(8, 2, 48).permute(1, 0, 2).softmax(-1), torch.randn(8, 96).half())
    rep = last_report()
    assert {c["direction"] for c in rep.crossings} == {"d2h", "h2d"}
    assert "ReStickifyOpHBM" not in [k["op"] for k in rep.kernels]


def test_unsupported_op_falls_back_with_a_warning_and_a_price(check):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check(lambda x: torch.cumsum(torch.cumsum(x.exp(), -1), 0).tanh(), torch.randn(4, 64).half())
    rep = last_report()
    assert [f["op"] for f in rep.fallbacks] == ["aten.cumsum.default"] * 2
    assert "test_passes.py" in rep.fallbacks[0]["source"]
    assert {c["direction"] for c in rep.crossings} == {"d2h", "h2d"}
    # each round trip of 512 B (4 x 64 fp16): 1,100 cycles of latency, then 512 + 24 B of TLP at
    # 63 GB/s = 536 x 1.1 / 63 = 9.36 cycles, 10 whole
    assert {(c["bytes"], c["cycles"]) for c in rep.crossings} == {(512, 1110)}
    assert rep.total_cycles > sum(k["cycles"] for k in rep.kernels)
    assert [f["flops"] for f in rep.fallbacks] == [4 * 64] * 2  # one per output element
    assert [f["bytes"] for f in rep.fallbacks] == [2 * 4 * 64 * 2] * 2  # fp16 in and out
    cpu = load_host().cpu  # each: its dispatch, then 512 B in and 512 B out at the host's rate (> 256 FLOPs)
    assert [f["cpu_us"] for f in rep.fallbacks] == [round(cpu.op_us + 1024 / (cpu.gbytes_per_s * 1e3), 6)] * 2
    assert rep.cpu_us == round(2 * rep.fallbacks[0]["cpu_us"], 6)
    assert rep.latency_us == round(rep.total_cycles / load_machine().clock.ghz / 1000 + rep.cpu_us, 6)
    assert all(f["measured_us"] > 0 for f in rep.fallbacks)  # CPU tensors: the call ran them here
    assert rep.card_flop_share == 0.5  # exp and tanh on the card, 256 each; the two cumsums on the CPU
    assert rep.to_text().startswith("spyre_emu: 50.0% of the FLOPs on the card; ")
    assert [str(w.message) for w in caught] == [  # one line for the compiled graph
        "spyre_emu: 2 ops on the CPU: aten.cumsum.default×2 (no kernel for this op); see last_report().fallbacks"]


def test_fallback_error_names_the_op_and_line():
    with pytest.raises(Exception, match=r"aten.cumsum.default has no kernel.*test_passes.py"), torch.no_grad():
        torch.compile(lambda x: torch.cumsum(x, -1), backend="spyre_emu", options={"fallback": "error"})(
            torch.randn(4, 64).half())


def test_float32_pointwise_runs_on_the_card_and_an_fp32_matmul_says_why_not(check):
    check(lambda x: x.exp(), torch.randn(4, 64))
    assert last_report().fallbacks == []
    check(lambda x, y: x @ y, torch.randn(4, 64), torch.randn(64, 8))
    assert "PT array multiplies fp16 and bf16" in last_report().fallbacks[0]["reason"]


def test_graph_break_and_recompile():
    def fn(x):
        y = x.exp()
        print("graph break")
        return y * 2
    compiled = torch.compile(fn, backend="spyre_emu", dynamic=False)
    with torch.no_grad():
        for shape in ((4, 64), (8, 64)):
            x = torch.randn(*shape).half()
            torch.testing.assert_close(compiled(x), fn(x), atol=5e-3, rtol=5e-3)


def test_matmul_divisions_are_the_measured_best():
    """On every shape of the silicon split sweep, the division the pass picks is measured within 10 %
    of the best one (calibration/matmul_split_sweep.csv)."""
    rows = list(csv.DictReader((require_shared() / "calibration" / "matmul_split_sweep.csv").open()))
    machine = load_machine()
    shapes = {(r["role"], r["phase"]): tuple(int(r[d]) for d in "BMNK") for r in rows}
    for (role, phase), (b, m, n, k) in shapes.items():
        measured = {tuple(int(r[f"split_{d}"]) for d in "bmnk"): float(r["device_us"])
                    for r in rows if (r["role"], r["phase"]) == (role, phase)}
        a_shape, b_shape = ((b, m, k), (b, k, n)) if b > 1 else ((m, k), (k, n))
        _, slices = work_division._matmul([a_shape, b_shape], machine, 32)
        picked = (slices.get("x", 1), slices["mb"], slices["out"], 1)
        assert picked in measured, (role, phase, picked)
        assert measured[picked] <= 1.10 * min(measured.values()), (role, phase, picked)


def test_a_failure_while_translating_names_the_op_shapes_and_line(monkeypatch):
    def broken(b, *args, **kwargs):
        raise ValueError("bad\nstate")
    monkeypatch.setitem(aten_to_kernels.HANDLERS, torch.ops.aten.exp, broken)
    with pytest.raises(Exception, match=r"node exp: aten.exp.default on operands of shape \[4, 64\] failed "
                                        r"\(bad state\); it comes from .*test_passes.py"), torch.no_grad():
        torch.compile(lambda x: x.exp(), backend="spyre_emu", dynamic=False)(torch.randn(4, 64).half())


@pytest.mark.parametrize("module", [layout, work_division])
def test_a_failure_in_a_later_pass_names_the_node_op_shapes_and_line(monkeypatch, module):
    def broken(*args, **kwargs):
        raise KeyError("lost")
    monkeypatch.setattr(module, "_kernel" if module is layout else "_divide", broken)
    with pytest.raises(Exception, match=r"node exp: aten.exp.default on operands of shape \[4, 64\] failed "
                                        r"\('lost'\); it comes from .*test_passes.py"), torch.no_grad():
        torch.compile(lambda x: x.exp(), backend="spyre_emu", dynamic=False)(torch.randn(4, 64).half())


def test_a_host_step_that_fails_names_the_op_shapes_and_line(monkeypatch):
    def broken(node, env):
        raise RuntimeError("shape '[1]' is invalid for input of size 0")
    monkeypatch.setattr(runtime, "_run_host", broken)
    want = r"aten.cumsum.default on operands of shape \[4, 64\] failed \(shape '\[1\]' is invalid .*\); it comes from "
    with pytest.raises(SpyreEmuError, match=want + r".*test_passes.py"), torch.no_grad():
        torch.compile(lambda x: torch.cumsum(x.exp(), -1), backend="spyre_emu", dynamic=False)(
            torch.randn(4, 64).half())


def test_matmul_flops_and_fallbacks_on_meta_tensors():
    """2·M·N·K for a matmul on the card; on meta tensors a fallback's CPU time is not measured."""
    fn = torch.compile(lambda a, b: torch.cumsum(a @ b, -1), backend="spyre_emu", dynamic=False)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fn(torch.randn(8, 64, device="meta").half(), torch.randn(64, 128, device="meta").half())
    rep = last_report()
    matmul, cumsum = 2 * 8 * 128 * 64, 8 * 128
    assert rep.fallbacks[0]["flops"] == cumsum
    assert rep.fallbacks[0]["measured_us"] is None
    assert rep.fallbacks[0]["cpu_us"] > 0  # priced all the same
    assert rep.card_flop_share == round(matmul / (matmul + cumsum), 6)
