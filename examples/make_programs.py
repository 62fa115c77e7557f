"""Write the example unit programs in examples/programs/ (run: python examples/make_programs.py).

The programs are generated so their structure (tiling, double buffering, token
choreography) is readable here rather than in thousands of JSON lines.
"""

from __future__ import annotations

import json
from pathlib import Path

OUT = Path(__file__).parent / "programs"
MB = 1 << 20
STICK = 128
CORES = 32


def program(buffers: dict, cores: dict[int, dict], note: str) -> dict:
    return {"format": "spyre-emu.unit-program", "version": 1, "note": note, "buffers": buffers,
            "cores": [{"core": c, "units": units} for c, units in sorted(cores.items())]}


def stream_read() -> dict:
    """32 cores each read their 2 MB share of a 64 MB tensor into LX."""
    cores = {c: {"load": [{"op": "load", "dram": f"x+{c * 2 * MB}", "lx": 0, "bytes": 2 * MB}]}
             for c in range(CORES)}
    return program({"x": {"bytes": 64 * MB}}, cores, "streaming read of 64 MB by 32 cores")


def gemm(m: int = 1024, k: int = 1024, n: int = 1024, split_m: int = 4, split_n: int = 8, kc: int = 256) -> dict:
    """C = A @ B in fp16, output blocks over 32 cores, K streamed in double-buffered chunks.

    Device layouts: A as [M/mb][K/kc][mb][kc], B as [N/64][K][64] (the stick holds 64 columns),
    C as [N/64][M][64], so every load and store is one contiguous range.
    """
    mb, nb, chunks = m // split_m, n // split_n, k // kc
    groups = nb // 64
    a_bytes, b_bytes = mb * kc * 2, groups * kc * STICK
    buf = [(0, a_bytes), (a_bytes + b_bytes, 2 * a_bytes + b_bytes)]  # (A, B) LX offsets per buffer
    c_base = 2 * (a_bytes + b_bytes)
    cores = {}
    for core in range(split_m * split_n):
        i, j = core % split_m, core // split_m  # the first dim varies fastest, as in SuperDSC
        tok = f"c{core}."  # token names are card-wide: prefix them with the core
        load, pts = [], {"pt0": [], "pt1": []}
        for q in range(chunks):
            a_off, b_off = buf[q % 2]
            wait = [f"{tok}free{q % 2}_pt0", f"{tok}free{q % 2}_pt1"] if q >= 2 else []
            load.append({"op": "load", "dram": f"A+{((i * chunks + q) * mb * kc) * 2}", "lx": a_off,
                         "bytes": a_bytes, **({"wait": wait} if wait else {})})
            for g in range(groups):
                col = j * groups + g
                load.append({"op": "load", "dram": f"B+{(col * k + q * kc) * STICK}", "lx": b_off + g * kc * STICK,
                             "bytes": kc * STICK})
            load[-1]["signal"] = [f"{tok}ready{q % 2}_pt0", f"{tok}ready{q % 2}_pt1"]
            passes = [(r, g) for g in range(groups) for r in range(0, mb, 8)]
            for unit, mine in (("pt0", passes[0::2]), ("pt1", passes[1::2])):
                for idx, (r, g) in enumerate(mine):
                    ins = {"op": "matmul", "a": a_off + r * kc * 2, "b": b_off + g * kc * STICK,
                           "c": c_base + (g * mb + r) * STICK, "rows": 8, "k": kc, "accumulate": q > 0}
                    if idx == 0:
                        ins["wait"] = [f"{tok}ready{q % 2}_{unit}"]
                    if idx == len(mine) - 1:
                        last = [f"{tok}done_{unit}"] if q == chunks - 1 else []
                        ins["signal"] = [f"{tok}free{q % 2}_{unit}", *last]
                    pts[unit].append(ins)
        store = [{"op": "store", "lx": c_base + g * mb * STICK, "dram": f"C+{((j * groups + g) * m + i * mb) * STICK}",
                  "bytes": mb * STICK, **({"wait": [f"{tok}done_pt0", f"{tok}done_pt1"]} if g == 0 else {})}
                 for g in range(groups)]
        cores[core] = {"load": load, **pts, "store": store}
    buffers = {"A": {"bytes": m * k * 2}, "B": {"bytes": n * k * 2}, "C": {"bytes": m * n * 2}}
    return program(buffers, cores, f"GEMM {m}x{k} @ {k}x{n} fp16 over 32 cores, split (m={split_m}, n={split_n}), "
                   f"K in double-buffered chunks of {kc}")


def ring_move(nbytes: int = 128 * 1024) -> dict:
    """Core 0 hands a block to core 1 over the ring."""
    cores = {0: {"send": [{"op": "send", "lx": 0, "to_core": 1, "to_lx": 0, "bytes": nbytes}]}}
    return program({}, cores, f"{nbytes // 1024} KB moved core 0 -> core 1 over the ring (on-chip reorganization)")


def dram_roundtrip(nbytes: int = 128 * 1024) -> dict:
    """The same block written to DRAM by core 0 and read back by core 1."""
    cores = {0: {"store": [{"op": "store", "lx": 0, "dram": "t", "bytes": nbytes, "signal": ["stored"]}]},
             1: {"load": [{"op": "load", "dram": "t", "lx": 0, "bytes": nbytes, "wait": ["stored"]}]}}
    return program({"t": {"bytes": nbytes}}, cores, f"{nbytes // 1024} KB core 0 -> DRAM -> core 1")


def softmax(rows: int = 64, cols: int = 1024) -> dict:
    """Row-wise softmax of an fp16 (rows, cols) tensor on one core, rows split over both SFUs."""
    sticks = cols // 64
    row_bytes = sticks * STICK
    x, y, t = 0, rows * row_bytes, 2 * rows * row_bytes  # LX: input, output, per-corelet scratch
    sfu: dict[str, list] = {"sfu0": [], "sfu1": []}
    for r in range(rows):
        unit, s = f"sfu{r % 2}", t + (r % 2) * 4 * STICK
        xr, yr = x + r * row_bytes, y + r * row_bytes
        sfu[unit] += [
            {"op": "reduce_max", "a": xr, "out": s, "sticks": sticks},
            {"op": "lanes_max", "a": s, "out": s + STICK, "sticks": 1},
            {"op": "sub", "a": xr, "b": s + STICK, "b_broadcast": True, "out": yr, "sticks": sticks},
            {"op": "exp", "a": yr, "out": yr, "sticks": sticks},
            {"op": "reduce_sum", "a": yr, "out": s, "sticks": sticks},
            {"op": "lanes_sum", "a": s, "out": s + STICK, "sticks": 1},
            {"op": "reciprocal", "a": s + STICK, "out": s + 2 * STICK, "sticks": 1},
            {"op": "mul", "a": yr, "b": s + 2 * STICK, "b_broadcast": True, "out": yr, "sticks": sticks},
        ]
    for unit in sfu:
        sfu[unit][0]["wait"] = [f"x_{unit}"]
        sfu[unit][-1]["signal"] = [f"y_{unit}"]
    units = {"load": [{"op": "load", "dram": "x", "lx": x, "bytes": rows * row_bytes, "signal": ["x_sfu0", "x_sfu1"]}],
             **sfu,
             "store": [{"op": "store", "lx": y, "dram": "y", "bytes": rows * row_bytes, "wait": ["y_sfu0", "y_sfu1"]}]}
    buffers = {"x": {"bytes": rows * row_bytes, "dtype": "fp16", "shape": [rows, cols], "fill": "random"},
               "y": {"bytes": rows * row_bytes, "dtype": "fp16", "shape": [rows, cols], "output": "softmax_y.npy"}}
    return program(buffers, {0: units}, f"row softmax of fp16 ({rows}, {cols}) on core 0")


EXAMPLES = {"stream_read_64mb": stream_read, "gemm_1024_32core": gemm, "ring_move_128k": ring_move,
            "dram_roundtrip_128k": dram_roundtrip, "softmax_1core": softmax}


def main() -> None:
    OUT.mkdir(exist_ok=True)
    for name, make in EXAMPLES.items():
        (OUT / f"{name}.json").write_text(json.dumps(make(), separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
