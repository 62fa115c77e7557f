"""An LX tensor written over another (``in_place_of``): one LX region for a row-wise or pointwise kernel's input
and output, as torch-spyre's softmax runs its exp in place.

Timing rule: none changes. The kernel runs the same SFU instructions, only its output's places are its input's;
an SFU op on LX operands takes a duration set by its sticks alone (engine/pack.py), and no LX port depends on the
address. So every instruction starts and ends where it does out of place, exactly, which the tests check
instruction by instruction.
"""

import json
import re

import numpy as np
import pytest

from spyre_emu.cli import main
from spyre_emu.errors import ProgramError
from spyre_emu.kernel_program import load_kernel_program
from spyre_emu.lowering import usable_lx_sticks
from spyre_emu.lowering.lx import plan_lx
from spyre_emu.pipeline import load, run
from tests.conftest import card_fp16
from tests.lowering.test_lx_and_broadcast import _chain
from tests.lowering.test_matmul_lx import _attention
from tests.lowering.test_rowwise import _program, _reference
from tests.reference.test_differential import assert_agree


def _in_place(path, y, x):
    """A copy of the program at ``path`` with LX tensor ``y`` written over ``x``."""
    data = json.loads(path.read_text())
    data["tensors"][y]["in_place_of"] = x
    out = path.with_name(f"in_place_{path.name}")
    out.write_text(json.dumps(data))
    return out


def _times(result):
    log = result.log
    return [(ins.path, int(s), int(e)) for ins, s, e in zip(log.instructions, log.start, log.end, strict=True)]


def _region(path, machine, y, x):
    """Per core, the LX byte address of every stick of LX tensor ``y``, which must be ``x``'s."""
    residents = plan_lx(load_kernel_program(path), usable_lx_sticks(machine)).residents
    places = [{c: set((res.base + 128 * np.arange(len(ids))).tolist()) for c, ids in res.sticks.items()}
              for res in (residents[y], residents[x])]
    assert places[0] == places[1]
    return places[0]


def assert_never_overwritten_before_read(result, kernel, region):
    """In ``kernel``, each LX stick of ``region`` is read and written by the SFU ops of one unit, and every op
    that reads it before that unit's first write of it has ended when the write starts: no stick is overwritten
    while an op that needs its old value is still to run."""
    log = result.log
    for core, addrs in region.items():
        touches: dict[int, list[tuple[int, bool]]] = {}  # LX stick -> (instruction, writes it), in stream order
        for i, ins in enumerate(log.instructions):
            if ins.core == core and ins.kernel == kernel and ins.unit.startswith("sfu"):
                for field in ("a", "b", "c", "out"):
                    if field in ins.args:
                        n = 1 if ins.args.get(f"{field}_broadcast") else ins.args["sticks"]
                        for a in set(range(ins.args[field], ins.args[field] + 128 * n, 128)) & addrs:
                            touches.setdefault(a, []).append((i, field == "out"))
        assert touches.keys() == addrs
        for a, seen in touches.items():
            assert len({log.instructions[i].unit for i, _ in seen}) == 1, (core, a)
            w = min(i for i, writes in seen if writes)
            assert all(log.end[i] <= log.start[w] for i, _ in seen if i < w), (core, a)


@pytest.mark.parametrize("op", ["softmax", "layernorm", "rmsnorm"])
@pytest.mark.parametrize(("shape", "slices"), [((40, 200), (4, 1)), ((2, 16, 128), (2, 2, 1))])
def test_a_row_kernel_in_place_gives_the_values_and_times_of_one_out_of_place(tmp_path, spyre, op, shape, slices):
    """A padded last stick (200 = 3 sticks + 8 lanes) and a batch dim; softmax, both norms."""
    path, arrays = _program(tmp_path, op, shape, slices, space="lx")
    over_path = _in_place(path, "yl", "xl")
    apart, over = (run(load(p, spyre), spyre, functional=True) for p in (path, over_path))
    np.testing.assert_array_equal(over.outputs["y"], apart.outputs["y"])
    assert _times(over) == _times(apart)
    w, b = (arrays[k].astype(np.float32) for k in ("w", "b"))
    np.testing.assert_allclose(over.outputs["y"].astype(np.float32), _reference(op, arrays["x"], w, b, 1e-5),
                               rtol=1e-2, atol=1e-2)
    assert_never_overwritten_before_read(over, "k1", _region(over_path, spyre, "yl", "xl"))


def test_a_pointwise_kernel_in_place_gives_the_values_and_times_of_one_out_of_place(tmp_path, spyre):
    """exp(s) written over s in y = exp(x + 1) - x."""
    path, _ = _chain(tmp_path, "lx")
    over_path = _in_place(path, "e", "s")
    apart, over = (run(load(p, spyre), spyre, functional=True) for p in (path, over_path))
    np.testing.assert_array_equal(over.outputs["y"], apart.outputs["y"])
    assert _times(over) == _times(apart)
    assert_never_overwritten_before_read(over, "exp", _region(over_path, spyre, "e", "s"))


@pytest.mark.parametrize(("x", "length", "division"), [(2, 64, (2, 4)), (4, 8, (4, 8)), (3, 128, (3, 2))])
def test_attention_with_its_probabilities_over_its_scores(tmp_path, spyre, x, length, division):
    """softmax(q kᵀ) v with one score tensor in LX: numpy's values, the out-of-place times exactly, and the
    reference simulator's times."""
    over, want = _attention(tmp_path, spyre, x, length, division, in_place=True)
    apart, _ = _attention(tmp_path, spyre, x, length, division)
    got = run(over, spyre, functional=True, cache=False)
    np.testing.assert_allclose(got.outputs["y"].astype(np.float32), want, rtol=5e-3, atol=5e-3)
    assert _times(got) == _times(run(apart, spyre, cache=False))
    assert_never_overwritten_before_read(got, "softmax", _region(tmp_path / "lx_in_place.json", spyre, "p", "s"))
    assert_agree(over.units, spyre)


def test_writing_over_a_tensor_a_later_kernel_reads_is_refused(tmp_path, spyre):
    path, _ = _chain(tmp_path, "lx")
    data = json.loads(path.read_text())
    data["kernels"][2]["inputs"] = ["e", "s"]  # the sub reads s after the exp wrote e over it
    path.write_text(json.dumps(data))
    with pytest.raises(ProgramError, match=r"kernels\[1\].outputs: LX tensor 'e' in place of 's': 'sub' still "
                                           r"reads 's' after 'exp'"):
        load(_in_place(path, "e", "s"), spyre)


def _row_kernel_over_lx(tmp_path, op, inputs, lx, out, shape, attrs=None):
    """Input ``lx[:-1]`` copied into LX tensor ``lx``; the row kernel ``op`` over ``inputs`` writing LX tensor ``out``
    (in place of ``lx``, or ``lx`` itself); ``out`` copied to the output ``y``."""
    dims = {"mb": shape[0], "out": shape[1]}
    t = {n: {"shape": list(shape), "dtype": "fp16", "role": "input"} for n in [*inputs, lx[:-1]] if n != lx}
    t[lx] = {"shape": list(shape), "dtype": "fp16", "role": "intermediate", "space": "lx"}
    if out != lx:
        t[out] = {**t[lx], "in_place_of": lx}
    t["y"] = {"shape": list(shape), "dtype": "fp16", "role": "output"}
    kernels = [{"op": "identity", "inputs": [lx[:-1]], "outputs": [lx], "dims": dims, "work_division": {}},
               {"name": "norm", "op": op, "inputs": inputs, "outputs": [out], "dims": dims, "work_division": {},
                **({"attrs": attrs} if attrs else {})},
               {"op": "identity", "inputs": [out], "outputs": ["y"], "dims": dims, "work_division": {}}]
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"format": "spyre-emu.kernel-program", "version": 1, "tensors": t, "kernels": kernels}))
    return path


def _norm_over_rstd(tmp_path, out):
    """layernormnorm over an LX rstd ``rl``, writing LX tensor ``out`` (``yl`` in place of ``rl``, or ``rl``)."""
    return _row_kernel_over_lx(tmp_path, "layernormnorm", ["x", "m", "rl", "w", "b"], "rl", out, (8, 64))


def test_writing_over_an_input_a_later_sfu_step_reads_is_refused(tmp_path, spyre):
    """layernormnorm reads its rstd (input 2) in its second step, after the first has written the output."""
    with pytest.raises(ProgramError, match=r"'yl' in place of 'rl': layernormnorm does not read every stick of 'rl'"):
        load(_norm_over_rstd(tmp_path, "yl"), spyre)


def test_writing_an_lx_input_over_itself_by_name_follows_the_same_rule(tmp_path, spyre):
    """The same kernel writing ``rl`` itself (one name, no in_place_of) wrote each output stick over the rstd its
    second step still had to read: 2.4 off torch's values, silently. Refused as the in-place tensor is; a
    one-step op over itself (the softmax_stages programs' sigmoid d -> d) still runs."""
    with pytest.raises(ProgramError, match=r"kernels\[1\]\.outputs: 'norm' writes LX tensor 'rl' over itself: "
                                           r"layernormnorm does not read every stick of 'rl' before writing"):
        load(_norm_over_rstd(tmp_path, "rl"), spyre)
    path, x = _chain(tmp_path, "lx")
    data = json.loads(path.read_text())
    data["kernels"][1]["outputs"] = ["s"]  # exp(s) over s itself
    data["kernels"][2]["inputs"] = ["s", "x"]
    path.write_text(json.dumps(data))
    got = run(load(path, spyre), spyre, functional=True).outputs["y"].astype(np.float32)
    f = x.astype(np.float32)
    np.testing.assert_allclose(got, card_fp16(np.exp(card_fp16(f + 1))) - f, rtol=5e-3, atol=5e-3)


def test_the_kernels_after_keep_the_lx_the_input_held(tmp_path, spyre):
    """Attention over 3 batches of 128 × 128 scores, each core 64 rows of 2 sticks: 128 sticks of scores. Out of
    place the probabilities go below the live scores, so the softmax and P·V have ``usable - 256`` sticks for their
    chunk buffers; in place, ``usable - 128``, as Q·Kᵀ has."""
    usable = usable_lx_sticks(spyre)
    for in_place, held in ((False, [128, 256, 256]), (True, [128, 128, 128])):
        _attention(tmp_path, spyre, 3, 128, (3, 2), in_place=in_place)
        program = load_kernel_program(tmp_path / f"lx{'_in_place' * in_place}.json")
        assert plan_lx(program, usable).budgets == [usable - n for n in held]


@pytest.mark.parametrize(("change", "words"), [
    ({"in_place_of": "x"}, r"kernels\[1\]\.outputs: LX tensor 'e' in place of 'x': 'exp' must read 'x', an LX tensor "
                           r"written before it"),
    ({"in_place_of": "nowhere"}, r"kernels\[1\]\.outputs: LX tensor 'e' in place of 'nowhere': 'exp' must read"),
    ({"in_place_of": "s", "lx_offset": 65536}, r"kernels\[1\]\.outputs: LX tensor 'e' in place of 's': it must have "
                                               r"the same layout and no lx_offset"),
    ({"in_place_of": "s", "slices": {"mb": 4, "out": 2}}, r"kernels\[1\]\.outputs: LX tensor 'e' in place of 's': "
                                                          r"'exp' gives the cores other slices than 's' has"),
    ({"in_place_of": "s", "dram": True}, r"tensors\.e\.in_place_of: in_place_of places a tensor in lx; this one is "
                                         r"in dram"),
])
def test_an_in_place_tensor_the_rule_does_not_allow_is_one_line_exit_2(tmp_path, capsys, change, words):
    """Each refusal names the kernel (or the tensor) by its JSON path, on one line, exit 2, no traceback."""
    path, _ = _chain(tmp_path, "lx")
    data = json.loads(path.read_text())
    e = data["tensors"]["e"]
    e["in_place_of"] = change["in_place_of"]
    if "lx_offset" in change:
        e["lx_offset"] = change["lx_offset"]
    if "slices" in change:
        data["kernels"][1]["work_division"] = change["slices"]
    if change.get("dram"):
        del e["space"]
    path.write_text(json.dumps(data))
    assert main(["run", str(path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith(f"spyre-emu: error: {path}: "), err
    assert re.search(words, err), err


def test_writing_over_a_row_kernels_weight_is_refused(tmp_path, spyre):
    """rmsnorm multiplies each output stick by its weight stick after writing it (x * rstd, then * w): an output
    written over the weight (one row, so the two share a layout) would read its own product; only x (input 0) may
    be written over."""
    path = _row_kernel_over_lx(tmp_path, "rmsnorm", ["x", "wl"], "wl", "yl", (1, 256), {"eps": 1e-5})
    with pytest.raises(ProgramError, match=r"kernels\[1\]\.outputs: LX tensor 'yl' in place of 'wl': rmsnorm does not "
                                           r"read every stick of 'wl' before writing the same stick"):
        load(path, spyre)
