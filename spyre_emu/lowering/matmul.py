"""Matmul kernels (``batchmatmul``): PT passes of 8 rows on both corelets, operands shared over the ring.

Operands are A (M, K), B (K, N), C (M, N), each optionally with a leading batch dim, in torch-spyre's
layouts with the last dim in the stick (2-D A is [K sticks][M][64]: a K stick of consecutive rows is
contiguous; a 3-D operand has its rows outermost and the batch just outside the stick, the default, or its
batch outermost). A core owns an (M block, N block, K block) of the work per batch. It computes its C
tile ``block`` column groups at a time (a tile), streaming its K range in chunks: per chunk, for
each K stick, its rows of A and, per 64-column group, the chunk's rows of B, as runs of
consecutive device sticks. Each pass multiplies up to 8 rows of the A tile by one column group
and accumulates into C in LX; passes alternate between the two corelets' PT arrays (a core whose K is split
runs them on ``pt.split_k_corelets`` of them: one on Spyre, whose single PSUM corelet does the reduction).

Cores that need the same operand sticks form a cohort (``cohorts.py``): each member loads its share
of them with a multicast into every member's LX, so an operand crosses DRAM once per cohort. Every core
lays out LX alike, so one address serves the whole cohort. Chunks are numbered across a core's
tiles and double buffered: chunk n + 2 is loaded once every member's passes of chunk n are done. An
operand the plan keeps in LX (``tiling.py``: A across a row block's column blocks, B across a column
block's row blocks) is loaded in the first tile that needs it, into a place of its own, and loaded again
only once every member's passes of the last tile that read it are done.
With K split, the cores of a K group reduce their partial tiles over the ring (``split_k.py``)
and each stores its piece; otherwise a core stores its tile once its last chunk is done. The next tile
computes into a second C buffer meanwhile, where LX has room, under split K and when the store scatters
(C's layout holds a pass's rows apart).
Padding sticks are zero in A and B, so K is processed in whole sticks. A batched core's tile is one
output stick of a block of batches, the block as large as LX allows for that one stick: the block's
A is read again for each output stick, but its runs (a row's sticks for the block's batches) are
long, and silicon's batched divisions fit that order (docs/decisions/fidelity.md); when its rows come
in blocks, the output stick's B stays in LX across them. A batched matmul of one batch has no blocks of
batches to size: it is tiled as a 2-D one (a single head's Q·Kᵀ would otherwise read its A once per output
stick, 64 times for a context of 4,096), and so are batches outermost in both A and B. A and B sit in LX in
their layouts' order (``operands.lx_order``), so that a DRAM run is one LX run: a block of every batch of the
default layout loads a row of A as one piece.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

import numpy as np

from ..config import STICK_BYTES
from ..errors import ProgramError
from ..kernel_program import Tensor, TensorLayout, default_layout
from ..kernel_program.model import Kernel
from .cohorts import Piece, addressed, cohorts, loaders, share
from .in_place import DRAM, InPlace, in_place
from .operands import Operands, lx_order
from .placement import (
    Runs,
    check_division,
    division,
    run_sticks,
    slice_index,
)
from .spans import check_boxes
from .split_k import SplitK, reduce_tile
from .streams import CoreStreams, Emit, Item
from .target import Target
from .tiling import Plan, batch_block, column_block, least_chunk, rows_for_batches, stationary, tile_chunk


def lower_matmul(core: CoreStreams, *, piece: Piece, plan: Plan, names: tuple[str, str, str],
                 layouts: tuple[TensorLayout, TensorLayout, TensorLayout], memo: dict,
                 place: InPlace = DRAM) -> None:
    """Append one core's share: per batch, its tiles in order, each stored (or reduced) after its
    last chunk; a tile's first passes wait until the previous tile's C has left LX. ``memo``: the
    kernel's operand runs so far (every tile of a core reads the same A chunks, every core of a B
    cohort the same B chunks, and ``_sharing`` all of them once more). ``place``: A and C kept in LX in
    their tensors' own places (``in_place.py``): no A loads, no stores, each tile's C in a place of its own."""
    n, freed, before, kept_done = 0, {}, 0, None  # freed: per C buffer, what its last tile's stores signal
    (m0, rows), (g0, groups) = piece.m, piece.g
    blocks = [piece.batches[i:i + plan.batches] for i in range(0, len(piece.batches), plan.batches)]
    starts = range(m0, m0 + rows, plan.rows), range(g0, g0 + groups, plan.block)
    order = [(xs, r, g) for xs in blocks for r in starts[0] for g in starts[1]] if plan.keep != "B" else [
        (xs, r, g) for xs in blocks for g in starts[1] for r in starts[0]]
    tiles = [(xs, replace(piece, m=(r, min(plan.rows, m0 + rows - r)), g=(g, min(plan.block, g0 + groups - g))))
             for xs, r, g in order]
    held = [(xs, g if plan.keep == "B" else r) for xs, r, g in order]  # what the kept operand's LX holds
    sharing = _sharing(piece, plan, [(Operands(names, layouts, xs, memo), tile) for xs, tile in tiles])
    for t, (xs, tile) in enumerate(tiles):
        ops = Operands(names, layouts, xs, memo)
        fresh, closing = t == 0 or held[t] != held[t - 1], t + 1 == len(tiles) or held[t + 1] != held[t]
        for s0 in range(piece.k[0], piece.k[0] + piece.k[1], plan.chunk):
            ks = (s0, min(plan.chunk, piece.k[0] + piece.k[1] - s0))
            last_chunk = s0 + plan.chunk >= piece.k[0] + piece.k[1]
            kept = (fresh, kept_done if s0 == piece.k[0] else None, closing and last_chunk)
            at = place.tile(piece, tile, piece.batches.index(xs[0]), ks[0])
            passes = _chunk(core, ops, tile, plan, n, ks, sharing, kept, (place, *at), plan.c_at(t))
            for i, item in enumerate(freed.pop(t % plan.c_tiles, [])):
                for u, work in passes.items():
                    _link(item, work[0], f"{core.tag}t{t}.free{i}>{u}")
            n += 1
        kept_done = n - 1 if closing else kept_done
        runs = ops.c(range(tile.g[0], tile.g[0] + tile.g[1]), *tile.m)
        last = [work[-1] for work in passes.values()]
        if place.c is None and plan.split is None:
            stores = core.dma("store", names[2], runs, plan.c_at(t))
            for i, item in enumerate(last):
                _link(item, stores[0], f"{core.tag}t{t}.done{i}")
            freed[t % plan.c_tiles] = stores[-1:]
        elif place.c is None:
            freed[t % plan.c_tiles] = reduce_tile(core, plan.split, piece.k_group, t, runs, before, plan.c_at(t),
                                                  names[2], last, memo)
        before = run_sticks(runs)


def _sharing(piece: Piece, plan: Plan, tiles: list[tuple[Operands, Piece]]) -> tuple[tuple[int, ...], ...]:
    """The A and B loaders of every chunk: as many members as the fewest runs a chunk's tile has (the
    last chunk, the shortest, of each tile)."""
    last = piece.k[0] + (piece.k[1] - 1) // plan.chunk * plan.chunk
    ks = (last, piece.k[0] + piece.k[1] - last)
    counts = [[sum(len(runs) for runs, _ in tile) for _, tile in _operand_tiles(ops, part, plan, 0, ks)]
              for ops, part in tiles]
    return (loaders(piece.a_cohort, min(a for a, _ in counts)), loaders(piece.b_cohort, min(b for _, b in counts)))


def _chunk(core: CoreStreams, ops: Operands, piece: Piece, plan: Plan, n: int, ks: tuple[int, int],
           sharing: tuple[tuple[int, ...], tuple[int, ...]], kept: tuple[bool, int | None, bool],
           at: tuple[InPlace, np.ndarray | None, np.ndarray | None], c_lx: int) -> dict[str, list[Item]]:
    """Chunk ``n``: the loads this core issues for its cohorts, then its own passes, per PT unit.
    ``sharing``: the members of the A and B cohorts that load a share of each chunk. ``kept``, for the
    operand the plan keeps in LX: whether this chunk loads it, the chunk whose passes its loads wait for
    (the last that read the previous one there), and whether this chunk's passes are its last readers.
    ``at``: the operands in LX in their own places, and the tile's A and C addresses there; ``c_lx``: the
    tile's C buffer."""
    rows, groups, nb = piece.m[1], piece.g[1], len(ops.batches)
    a_lx, b_lx = plan.buffers(n, ks[0] - piece.k[0])
    passes = _passes(ops.memo, plan, (nb, groups, rows), (a_lx, b_lx, c_lx), ks, ks[0] > piece.k[0], at)
    a_tile, b_tile = _operand_tiles(ops, piece, plan, n, ks)
    sources = []  # (operand and loading core) of every part this core's passes wait for
    for operand, name, (key, tile), cohort, loading in (
            ("A", ops.names[0], a_tile, piece.a_cohort, sharing[0]),
            ("B", ops.names[1], b_tile, piece.b_cohort, sharing[1])):
        if operand == plan.keep and not kept[0] or operand == "A" and at[1] is not None:
            continue
        sources += [f"{operand}{member}" for member in loading]
        if core.core in loading:
            if (key, len(loading)) not in ops.memo:
                ops.memo[key, len(loading)] = share(tile, len(loading))
            part = ops.memo[key, len(loading)][loading.index(core.core)]
            loads = _load(core, name, part, cohort)
            after = kept[1] if operand == plan.keep else n - 2 if n >= 2 else None
            _handshake(plan, n, after, f"{operand}{core.core}", loads, cohort, list(passes))
    readers = sources + [f"{plan.keep}{member}" for member in sharing[plan.keep == "B"]
                         if plan.keep and kept[2] and f"{plan.keep}{member}" not in sources
                         and not (plan.keep == "A" and at[1] is not None)]
    work: dict[str, list[Item]] = {}
    for unit, items in passes.items():
        work[unit] = [core.add(unit, dict(item)) for item in items]
        work[unit][0]["wait"] = [_token(plan, n, src, ">", core.core, unit) for src in sources]
        work[unit][-1]["signal"] = [_token(plan, n, src, "<", core.core, unit) for src in readers]
    return work


def _passes(memo: dict, plan: Plan, tile: tuple[int, int, int], lx: tuple[int, int], ks: tuple[int, int],
            accumulate: bool, at: tuple[InPlace, np.ndarray | None, np.ndarray | None]) -> dict[str, list[Item]]:
    """Per PT unit, the matmul instructions of a chunk of a (batches, column groups, rows) ``tile`` with A, B
    and C at ``lx``: the same for every chunk of that shape, K length and buffer set, so made once per kernel
    in ``memo`` (shared: callers copy them). ``at``: A's and C's own LX places when they are LX tensors
    (``in_place.py``; then per tile, not memoized)."""
    place, a_at, c_at = at
    key = ("passes", tile, lx, plan.k_rows(ks), accumulate)
    if key not in memo or a_at is not None or c_at is not None:
        (nb, groups, rows), (a_lx, b_lx, c_lx) = tile, lx
        sa, sb = plan.a_strides(nb, ks[1]), plan.b_strides(nb)
        a_k, a_row = (sa["k"], sa["rows"]) if a_at is None else place.a_strides
        fixed = {"op": "matmul", "a_k_stride": a_k, "a_row_stride": a_row,
                 **({"b_k_stride": sb["k"]} if sb["k"] > 1 else {}),
                 **({"c_row_stride": place.c_stride} if c_at is not None else {}), "k": plan.k_rows(ks),
                 "accumulate": accumulate}
        per_pass = plan.rows_per_pass
        passes = [(j, g, r) for j in range(nb) for g in range(groups) for r in range(0, rows, per_pass)]
        by_unit = {u: mine for i, u in enumerate(plan.pts) if (mine := passes[i::len(plan.pts)])}
        made = {unit: repeats(fixed, [
            (a_lx + (j * sa["batch"] + r * sa["rows"]) * STICK_BYTES if a_at is None else int(a_at[j, r]),
             b_lx + (j * sb["batch"] + g * sb["groups"]) * STICK_BYTES,
             c_lx + ((j * groups + g) * rows + r) * STICK_BYTES if c_at is None else int(c_at[j, g, r]),
             min(per_pass, rows - r)) for j, g, r in mine]) for unit, mine in by_unit.items()}
        if a_at is not None or c_at is not None:
            return made
        memo[key] = made
    return memo[key]


def repeats(fixed: Item, passes: list[tuple[int, int, int, int]]) -> list[Item]:
    """One unit's passes in order, (a, b, c, rows) each, as instructions: runs of passes with equal rows
    whose operands move on by the same steps become one ``repeat`` instruction (exact: nothing waits
    or signals between them; docs/unit-program.md)."""
    out: list[Item] = []
    i, total = 0, len(passes)
    while i < total:
        a, b, c, rows = passes[i]
        end, steps = i + 1, (0, 0, 0)
        if end < total and passes[end][3] == rows:
            steps = da, db, dc = passes[end][0] - a, passes[end][1] - b, passes[end][2] - c
            if da >= 0 and db >= 0 and dc >= 0:
                last_a, last_b, last_c = a, b, c
                while end < total:
                    na, nb, nc, n_rows = passes[end]
                    if n_rows != rows or na - last_a != da or nb - last_b != db or nc - last_c != dc:
                        break
                    last_a, last_b, last_c, end = na, nb, nc, end + 1
        item = {**fixed, "a": a, "b": b, "c": c, "rows": rows}
        if end - i > 1:
            item["repeat"] = end - i
            item.update({f"{f}_step": d for f, d in zip("abc", steps, strict=True) if d})
        out.append(item)
        i = end
    return out


Tile = list[tuple[Runs, int]]  # runs of device sticks, each list to its LX address


def _operand_tiles(ops: Operands, piece: Piece, plan: Plan, n: int, ks: tuple[int, int]
                   ) -> tuple[tuple[tuple, Tile], tuple[tuple, Tile]]:
    """Chunk ``n``'s A and B tiles: lines of runs of device sticks in their LX order, each with the LX address it
    goes to; each with its key in ``ops.memo`` (shared: never modify them)."""
    (m0, rows), (g0, groups), (s0, n_k) = piece.m, piece.g, ks
    a_lx, b_lx = plan.buffers(n, s0 - piece.k[0])
    a_key = ("A", ops.batches, range(s0, s0 + n_k), m0, rows, a_lx)
    b_key = ("B", ops.batches, range(g0, g0 + groups), s0 * 64, plan.k_rows(ks), b_lx)
    if a_key not in ops.memo:
        a = ops.a(range(s0, s0 + n_k), m0, rows, plan.a_order, plan.a_strides(len(ops.batches), n_k))
        ops.memo[a_key] = [(runs, a_lx + at * STICK_BYTES) for runs, at in a]
    if b_key not in ops.memo:
        b = ops.b(range(g0, g0 + groups), s0 * 64, plan.k_rows(ks), plan.b_order, plan.b_strides(len(ops.batches)))
        ops.memo[b_key] = [(runs, b_lx + at * STICK_BYTES) for runs, at in b]
    return (a_key, ops.memo[a_key]), (b_key, ops.memo[b_key])


def _load(core: CoreStreams, tensor: str, tile: list[tuple[Runs, int]], feed: tuple[int, ...]) -> list[Item]:
    """Load a tile's pieces (runs of sticks, each to its LX address) into every core of ``feed``; pieces
    that follow one another in LX go in one call, so their runs can form one strided descriptor."""
    groups: list[tuple[int, Runs]] = []  # (LX of the group, its runs)
    end = None
    for runs, at in tile:
        if at != end:
            groups.append((at, []))
        groups[-1][1].extend(runs)
        end = at + run_sticks(runs) * STICK_BYTES
    items = [item for lx, runs in groups for item in core.dma("load", tensor, runs, lx)]
    if feed != (core.core,):
        for item in items:
            item["to"] = list(feed)
    return items


def _handshake(plan: Plan, n: int, after: int | None, src: str, loads: list[Item], feed: tuple[int, ...],
               units: list[str]) -> None:
    """The loads ``src`` (operand and loading core) issues for chunk ``n`` tell every fed core's PT
    units that their data is in, and wait until those units are done with chunk ``after`` (the last
    that read the same LX: n - 2 for a double buffer)."""
    loads[-1].setdefault("signal", []).extend(_token(plan, n, src, ">", c, u) for c in feed for u in units)
    if after is not None:
        loads[0].setdefault("wait", []).extend(_token(plan, after, src, "<", c, u) for c in feed for u in units)


def _token(plan: Plan, n: int, src: str, way: str, core: int, unit: str) -> str:
    """Chunk ``n``'s handshake between the loads of ``src`` and a PT unit: ``>`` data in, ``<`` done."""
    return f"{plan.kernel}q{n}.{src}{way}c{core}.{unit}"


def _link(producer: Item, consumer: Item, token: str) -> None:
    producer.setdefault("signal", []).append(token)
    consumer.setdefault("wait", []).append(token)


def plan_matmul(target: Target, kernel: Kernel, tensors: list[Tensor]) -> dict[int, Emit]:
    """Check a matmul kernel and return each core's share of it."""
    src, where, machine, lx_sticks = target.program.source, kernel.path, target.machine, target.budget
    a, b, c = (t.layout for t in tensors)
    batched = len(a.shape) == 3
    orders = ((0, 1, 2), (1, 0, 2)) if batched else ((0, 1),)  # the stick's dim innermost, the batch in or out
    if not all(len(t.shape) == len(a.shape) in (2, 3) and t.dtype in ("fp16", "bf16")
               and any(t == default_layout(t.shape, t.dtype, o) for o in orders) for t in (a, b, c)):
        raise ProgramError("matmul lowers 2-D or batched 3-D fp16/bf16 operands in torch-spyre's layouts with the "
                           "last dim in the stick (dim_order [0, 1], [0, 1, 2] or [1, 0, 2]) so far", src, where)
    (m, k), n = a.shape[-2:], b.shape[-1]
    want = {"mb": m, "in": k, "out": n, **({"x": a.shape[0]} if batched else {})}
    lead = a.shape[:-2]
    if b.shape != (*lead, k, n) or c.shape != (*lead, m, n) or kernel.dims != want:
        raise ProgramError(f"expected A ([X,] M, K) @ B ([X,] K, N) -> C ([X,] M, N) with dims [x=X,] mb=M, in=K, "
                           f"out=N; got A {list(a.shape)}, B {list(b.shape)}, C {list(c.shape)}, dims {kernel.dims}",
                           src, where + ".dims")
    k_sticks = -(-k // 64)
    dims = (["x"] if batched else []) + ["mb", "out"]
    div = division(kernel, [*dims, "in"])
    check_division(c, division(kernel, dims), src, where + ".work_division")
    units = {"x": a.shape[0] if batched else 1, "mb": m, "out": -(-n // 64), "in": k_sticks}
    split = kernel.slices["in"]
    if (k_sticks < split) if kernel.uneven else (k_sticks % split):
        raise ProgramError(f"K ({k_sticks} sticks) does not split into {kernel.slices['in']} whole-stick slices",
                           src, where + ".work_division.in")
    order = [*dims, "in"]
    bounds = {d: div.bounds(order.index(d), units[d]) if d in order else np.array([0, 1]) for d in units}
    most = {d: int(np.diff(bd).max()) for d, bd in bounds.items()}
    owned = most["mb"]
    a_order = lx_order(a, ("batch", "rows", "k")[not batched:])
    b_order = lx_order(b, ("batch", "k", "groups")[not batched:])
    # batches inside the rows (the default layout) are tiled in batch blocks; one batch, or batches outermost
    # in both operands, as 2-D matmuls
    interleaved = batched and a.shape[0] > 1 and not a_order[0] == b_order[0] == "batch"
    all_rows = interleaved and column_block(most["in"], owned, 1, lx_sticks, split) == 1  # fewer batches instead
    most["mb"] = owned if all_rows else min(owned, machine.pt.max_tile_rows)  # 2-D: row blocks (fidelity.md)
    groups = 1 if interleaved else most["out"]  # batched: one output stick per tile, batch blocks sized for it
    keep, block = ("", column_block(most["in"], most["mb"], 1, lx_sticks, split)) if interleaved else stationary(
        most["in"], (owned, most["mb"]), groups, lx_sticks, split)
    if block == 0:
        raise ProgramError(f"a core's {most['mb']} rows of C leave no LX for A and B; split mb over more cores", src,
                           where + ".work_division")
    whole = block == groups  # batches are blocked only when the tile's columns fit at once
    batches = batch_block(most["in"], most["mb"], groups, most["x"], lx_sticks, split) if whole else 1
    # a block of some of the batches the layout interleaves moves runs of its batch count; rows are cut instead, into
    # blocks holding all the core's batches, where they are cut anyway or where the core has every batch (a row's K
    # chunk of all of them is then one run, not one a batch)
    if interleaved and batches < most["x"] and (not all_rows or most["x"] == a.shape[0]) and (
            rows := rows_for_batches(most["in"], most["mb"], most["x"], lx_sticks, split, machine.pt.rows_per_pass)):
        most["mb"], batches = rows, most["x"]
    if interleaved and split == 1 and owned > most["mb"] and tile_chunk(
            most["in"], most["mb"], 1, lx_sticks, 1, batches, "B") >= least_chunk(most["in"]):
        keep = "B"  # rows in blocks: the block's output stick of B stays in LX across them
    tile = most["mb"] * block * batches
    scatters = lx_order(c, ("batch", "rows", "groups")[not batched:])[-1] != "rows"
    tiles = -(-owned // most["mb"]) * -(-most["out"] // block) * -(-most["x"] // batches)
    c_tiles, fits = 1, tile_chunk(most["in"], most["mb"], block, lx_sticks, split, batches, keep)
    if tiles > 1 and (split > 1 or scatters):
        # the next tile computes into a second C buffer while this one leaves: under split K its reduction over the
        # ring (as long as its passes or longer), the K chunk shortened to make room; otherwise a store that C's
        # layout scatters into short pieces (a pass writes a column group of rows, which it holds apart), if
        # chunks of 8 K sticks still fit
        beside = tile_chunk(most["in"], most["mb"], block, lx_sticks - tile, split, batches, keep)
        least = 1 if split > 1 else least_chunk(most["in"])
        c_tiles, fits = (2, beside) if beside >= least else (c_tiles, fits)
    chunk = target.stepper(kernel)(most["in"], fits)
    plan = Plan(f"{kernel.name}.", k, most["mb"], block, chunk, batches, machine.pt.rows_per_pass, None, keep,
                most["in"], a_order, b_order, c_tiles)
    if split > 1:
        # a K-split core's passes run on pt.split_k_corelets arrays (one on Spyre: IBM's unichain PSUM path)
        plan = replace(plan, split=SplitK(f"{kernel.name}.", split, -(-tile // split),
                                          plan.c_lx + c_tiles * tile * STICK_BYTES),
                       pts=plan.pts[:machine.pt.split_k_corelets])
    shared = cohorts(_pieces(kernel, bounds, batched), machine.dma.multicast_max_cores)
    names = (kernel.inputs[0], kernel.inputs[1], kernel.outputs[0])
    lx = {name: target.residents[name] for name in names if name in target.residents}
    if names[1] in lx or lx and split > 1:
        what = f"B {names[1]!r}" if names[1] in lx else f"{' and '.join(map(repr, lx))} with K split over cores"
        raise ProgramError(f"matmul {what} in LX: a matmul keeps only A and C in LX, with K unsplit", src, where)
    places = {p.core: in_place(p, names, (a, b, c), lx, src, where) for p in shared}
    dram = [(p.core, list(zip(names, (a, b, c), addressed(p, (n, k), split), strict=True))) for p in shared]
    check_boxes([(core, [t for t in boxes if t[0] not in lx]) for core, boxes in dram], src, where + ".work_division")
    memo: dict = {}
    return {p.core: partial(lower_matmul, piece=p, plan=plan, names=names, layouts=(a, b, c), memo=memo,
                            place=places[p.core]) for p in shared}


def _pieces(kernel: Kernel, bounds: dict[str, np.ndarray], batched: bool) -> list[Piece]:
    """Each working core's batches, rows, column groups and K sticks."""
    pieces = []
    for core in range(kernel.cores):
        index = slice_index(kernel.slices, core)
        (x0, x1), (m0, m1), (g0, g1), (k0, k1) = (
            (int(bounds[d][index.get(d, 0)]), int(bounds[d][index.get(d, 0) + 1])) for d in ("x", "mb", "out", "in"))
        if x1 > x0 and m1 > m0 and g1 > g0 and k1 > k0:
            pieces.append(Piece(core, tuple(range(x0, x1)) if batched else (None,), (m0, m1 - m0), (g0, g1 - g0),
                                (k0, k1 - k0)))
    return pieces
