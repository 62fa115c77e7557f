"""Write the kernel programs behind DESIGN.md section 3's silicon measurements (examples/programs/calibration/).

Each program is the measured workload as a kernel program; the work division is the one the
measurement names, or the nearest one whose slices are whole sticks. Run them with
`spyre-emu run examples/programs/calibration/NAME.json`; `spyre-emu validate` runs them all
against the measurements and writes docs/validation.md.
"""

from __future__ import annotations

import json
from pathlib import Path

from spyre_emu.validation.workloads import fp16_tensor, matmul_program, pointwise_program, softmax_tile_program

OUT = Path(__file__).parent / "programs" / "calibration"


def matmul(m: int, k: int, n: int, split_m: int, split_n: int, note: str) -> dict:
    """validate's matmul workload (an uneven division cut as SuperDSC cuts it), with random inputs to run."""
    program = matmul_program(1, m, n, k, (1, split_m, split_n, 1))
    tensors = {name: {**t, "init": "randn"} if t["role"] == "input" else t for name, t in program["tensors"].items()}
    return {**program, "note": note, "tensors": tensors}


def softmax_dim0(rows: int, cols: int, planned: bool = False) -> dict:
    """softmax over dim 0 on one core: max, sub, exp, sum, div. Unplanned, every intermediate goes
    through DRAM; planned as the torch-spyre doc describes: the input cloned to LX, the reductions
    pinned in LX, sub and exp in place."""
    t = fp16_tensor
    full, row = [rows, cols], [1, cols]
    dims = {"mb": rows, "out": cols}
    if planned:
        tensors = {"x": t(full, "input"), "c": t(full, "intermediate", "lx"), "m": t(row, "intermediate", "lx"),
                   "s": t(row, "intermediate", "lx"), "y": t(full, "output")}
        steps = [("identity", ["x"], "c"), ("max", ["c"], "m"), ("sub", ["c", "m"], "c"), ("exp", ["c"], "c"),
                 ("sum", ["c"], "s"), ("realdiv", ["c", "s"], "y")]
        note = "torch-spyre scratchpad planning doc: 23.67 us measured with LX planning"
    else:
        tensors = {"x": t(full, "input"), "m": t(row, "intermediate"), "d": t(full, "intermediate"),
                   "e": t(full, "intermediate"), "s": t(row, "intermediate"), "y": t(full, "output")}
        steps = [("max", ["x"], "m"), ("sub", ["x", "m"], "d"), ("exp", ["d"], "e"), ("sum", ["e"], "s"),
                 ("realdiv", ["e", "s"], "y")]
        note = "torch-spyre scratchpad planning doc: 32.51 us median with every intermediate in DRAM"
    kernels = [{"name": f"k{i}_{op}", "op": op, "inputs": ins, "outputs": [out], "dims": dims, "work_division": {}}
               for i, (op, ins, out) in enumerate(steps)]
    return {"format": "spyre-emu.kernel-program", "version": 1, "tensors": tensors, "kernels": kernels,
            "note": note}


SWEEP = "torch-spyre cost-model sweep (sweep_records.csv)"
STAGES = ("one of 8 row tiles of softmax_stages 2048x512, chain of {}, {} core(s): torch-spyre cost-model report "
          "section 19")


PROGRAMS = {
    "softmax_dim0_512x1024_dram_1core": softmax_dim0(512, 1024),
    "softmax_dim0_512x1024_lx_1core": softmax_dim0(512, 1024, planned=True),
    "decode_1x4096x25600_25cores": matmul(1, 4096, 25600, 1, 25, "torch-spyre issue 4032: 1.762 ms measured"),
    "decode_4x4096x25600_32cores": matmul(4, 4096, 25600, 1, 32, "torch-spyre issue 4032: 1.389 ms measured. "
                                          "25600 columns are 400 sticks: 16 cores take 13, 16 take 12 (uneven)"),
    "decode_16x4096x25600_32cores": matmul(16, 4096, 25600, 1, 32, "torch-spyre issue 4032: 1.365 ms measured "
                                           "(uneven column slices, as above)"),
    "prefill_512x4096x4096_split32x1": matmul(512, 4096, 4096, 32, 1, "torch-spyre issue 2407: (8,4,1) is 2.59x "
                                              "faster"),
    "prefill_512x4096x4096_split8x4": matmul(512, 4096, 4096, 8, 4, "torch-spyre issue 2407"),
    "prefill_512x4096x12800_split32x1": matmul(512, 4096, 12800, 32, 1, "torch-spyre issue 2407: (8,4,1) is 2.07x "
                                               "faster"),
    "prefill_512x4096x12800_split8x4": matmul(512, 4096, 12800, 8, 4, "torch-spyre issue 2407"),
    "matmul_512x2048x512_1core": matmul(512, 2048, 512, 1, 1, "torch-spyre fitted cost model: ~1140 MAC/ns per "
                                        "core sustained by plain 2D matmul (compute-bound on one core)"),
    **{f"softmax_stages_{5 + extra}_{cores}core": softmax_tile_program(extra, cores, STAGES.format(5 + extra, cores))
       for extra in (0, 2, 4, 8) for cores in (1, 2)},
    **{f"rowmax_2048x8192_{cores}core": pointwise_program("max", 2048, 8192, cores, SWEEP) for cores in (1, 2, 4)},
    "rowmean_4096x2048_1core": pointwise_program("mean", 4096, 2048, 1, SWEEP),
    "rowsum_4096x2048_1core": pointwise_program("sum", 4096, 2048, 1, SWEEP),
    **{f"neg_8192x2048_{cores}core": pointwise_program("neg", 8192, 2048, cores, SWEEP) for cores in (1, 2)},
    **{f"gelu_2048x8192_{cores}core": pointwise_program("gelufwd", 2048, 8192, cores, SWEEP) for cores in (1, 2)},
    "add_2048x8192_1core": pointwise_program("add", 2048, 8192, 1, SWEEP, arity=2),
    **{f"{name}_2048x4096_32cores": pointwise_program(op, 2048, 4096, 32, SWEEP)
       for name, op in (("neg", "neg"), ("gelu", "gelufwd"), ("exp", "exp"))},
}


def main() -> None:
    OUT.mkdir(exist_ok=True)
    for name, program in PROGRAMS.items():
        (OUT / f"{name}.json").write_text(json.dumps(program, indent=1) + "\n")


if __name__ == "__main__":
    main()
