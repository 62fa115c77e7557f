"""Pass 4: each kernel's iteration space and its split over the cores.

Slices are exact divisors counted in whole sticks (the stick dim in sticks, the others in
elements), because the lowering gives every core an equal piece of whole sticks. Output dims
are split in device order (long runs of consecutive sticks per core), except the last dim of a
row-wise kernel (softmax, the norms); a restickify keeps each transpose block on one core while
there are blocks enough. A reduction splits its output dims first and gives its reduced dim only
the cores they leave (partial results combined over the ring), as torch-spyre does. A matmul's split
over batch, rows and columns is chosen by a cost estimate: the longest of the DRAM time (each
core reads its rows of A and its columns of B), a core's loads and the PT time of the busiest
core, among the splits whose C tile fits in LX. On a prefill matmul this prefers a split such as
(8, 4) to (32, 1), which makes every core read all of B: torch-spyre issue 2407 measures
(8, 4, 1) 2-2.6x faster.
"""

from __future__ import annotations

import math

from spyre_emu.config import DTYPE_BYTES, STICK_BYTES, Machine
from spyre_emu.kernel_program import elems_per_stick
from spyre_emu.kernel_program.ops import OPS
from spyre_emu.lowering import usable_lx_sticks
from spyre_emu.lowering.lx import reads_before_writing

from .graph import Graph, Node, blame
from .layout import REDUCTIONS, RESTICKIFY
from .views import lane_dims

ROWWISE = ("softmax", "layernorm", "rmsnorm", "embedding")  # each row on one core: the last dim is not split
STICK = 64          # fp16 / bf16 elements per 128-byte stick
PT_ROWS = 8         # rows per PT pass
NEAR = 1.05         # matmul splits within 5 % of the cheapest estimate count as equal
MIN_K_CHUNK = 8     # the lowering wants two chunks of at least 8 K sticks beside a core's C tile
DRAM_SUSTAINED = 150 / 204.8  # share of the DRAM peak a card sustains streaming: ~150 GB/s (DESIGN.md §3 decode)


def divide_work(graph: Graph, machine: Machine, cores: int) -> None:
    """Set ``dims`` and ``slices`` of every kernel for a card of ``cores`` cores. A matmul's split
    depends on its shapes alone (for this machine and core count): estimated once per shape, not
    once per layer."""
    matmuls: dict[tuple[tuple[int, ...], ...], tuple[dict, dict]] = {}
    for node in graph.nodes:
        if node.is_kernel:
            with blame(node):
                _divide(graph, node, machine, cores, matmuls)
    for chain in row_chains(graph):
        _align(graph, chain, machine, cores)


def row_chains(graph: Graph) -> list[list[Node]]:
    """Matmuls whose result C reaches a row-wise kernel over C's shape (softmax, a norm), directly or through
    pointwise kernels of that shape, each tensor of the chain read by the next kernel alone; with the matmul
    that reads the chain's last tensor as its A, when one alone reads it (attention: Q·Kᵀ, scale, mask,
    softmax, P·V)."""
    readers: dict[str, list[Node]] = {}
    for node in graph.nodes:
        if node.is_kernel:
            for name in dict.fromkeys(node.tensors[:-1]):
                readers.setdefault(name, []).append(node)
    chains = []
    for head in (n for n in graph.nodes if n.is_kernel and n.op == "batchmatmul"):
        chain, name = [head], head.tensors[-1]
        shape = graph.tensors[name].dshape
        while len(readers.get(name, ())) == 1 and chain[-1].op not in ROWWISE:
            node = readers[name][0]
            if OPS[node.op].family not in ("pointwise", "rowwise") or graph.tensors[node.tensors[-1]].dshape != shape:
                break
            chain, name = [*chain, node], node.tensors[-1]
        if chain[-1].op not in ROWWISE:
            continue
        tail = readers.get(name, [])
        if len(tail) == 1 and tail[0].op == "batchmatmul" and tail[0].tensors[0] == name != tail[0].tensors[1]:
            chain.append(tail[0])
        chains.append(chain)
    return chains


def _align(graph: Graph, chain: list[Node], machine: Machine, cores: int) -> None:
    """Give a row chain one split of its batches and rows, columns whole, so that its tensors can stay in LX
    (scratchpad.py: each core finds its own slice in its own LX): among ``_fitting``'s splits, the cheapest by
    the matmuls' estimates (within 5 %, the one using most cores), as a matmul's own split is chosen; taken only
    if its matmuls' estimate exceeds that of their own splits by less than the DRAM time the chain's tensors
    would take (each written and read once at the card's sustained rate)."""
    batch, m, per_row = _chain_shape(graph, chain)
    splits = _fitting(graph, chain, machine, cores, m)
    if not splits:
        return
    matmuls = [k for k in (chain[0], chain[-1]) if k.op == "batchmatmul"]

    def cost(split: tuple[int, int, int]) -> float:
        return sum(matmul_cost(batch, m, k.dims["in"], k.dims["out"], split, machine) for k in matmuls)

    costs = {s: cost((*s, 1)) for s in splits}
    x, r = _cheapest(costs)
    own = sum(matmul_cost(batch, m, k.dims["in"], k.dims["out"], (k.slices.get("x", 1), k.slices["mb"],
                                                                   k.slices["out"]), machine) for k in matmuls)
    sticks = batch * m * per_row * (len(chain) - 1)  # the tensors the chain hands on
    if costs[x, r] - own >= 2 * sticks * STICK_BYTES / (DRAM_SUSTAINED * machine.dram.peak_bytes_per_cycle()):
        return
    two_lead = len(graph.tensors[chain[0].tensors[-1]].dshape) == 3
    for node in chain:
        if node.op == "batchmatmul":
            node.slices = {d: {"x": x, "mb": r}.get(d, 1) for d in node.dims}
        else:
            node.slices = dict(zip(node.dims, [x, r, 1] if two_lead else [r, 1], strict=True))


def _chain_shape(graph: Graph, chain: list[Node]) -> tuple[int, int, int]:
    """A row chain's batches, rows (the head matmul's M) and sticks per row of its tensors."""
    c = graph.tensors[chain[0].tensors[-1]]
    lead = c.dshape[:-1]
    batch, m = (lead[0], lead[1]) if len(lead) == 2 else (1, lead[0])
    return batch, m, -(-c.dshape[-1] // elems_per_stick(c.dtype))


def _fitting(graph: Graph, chain: list[Node], machine: Machine, cores: int, rows: int,
             batch: int | None = None) -> list[tuple[int, int]]:
    """The splits (batches, rows) of a row chain cut to its first ``rows`` rows (and ``batch`` of its batches: a
    query tile's heads) whose tensors live at once fit in the half of LX a pointwise or row-wise kernel leaves (one
    when every such kernel writes its result over the tensor it reads, ``_in_place``, else two) and that give a core
    at least a PT pass of rows: a decode's few query rows split so read each column stick of K and V on its own,
    which the estimate does not see (Llama-3.1-8B's decode attention took 0.29 M cycles aligned, 0.15 M not)."""
    whole, _, per_row = _chain_shape(graph, chain)
    batch = batch or whole
    live = 1 if _in_place(graph, chain) else 2
    return [(x, r) for x, r, cols in _matmul_splits(batch, rows, STICK, cores) if cols == 1 and rows // r >= PT_ROWS
            and live * (batch // x) * (rows // r) * per_row <= usable_lx_sticks(machine) // 2]


Tiling = tuple[list[tuple[int, int]], list[tuple[int, int]]]  # head groups (ranges of the batch dim), query rows
Window = tuple[int, int, bool, bool]  # an input the card copies windows of: its bytes, a row's, whether it varies
# along the batch dim x and along the query rows


def query_tiles(graph: Graph, chain: list[Node], machine: Machine, cores: int, sizes: list[int],
                windows: list[Window]) -> Tiling:
    """An attention chain (one ending in P·V, whose output rows the tiles give apart) as tiles of a head group (of
    ``sizes`` consecutive batches) × a range of query rows, each tile's chain fitting in LX (``_fitting``, the test
    ``_align`` applies, on the tile's heads and rows): for each group size the fewest ``tile_rows`` row tiles that
    fit, and among those tilings the cheapest by ``_tiling_cost``, counting tilings within ``NEAR`` of it as equal and
    taking the one of fewest head groups among them (no windows of Kᵀ and V and no cat of the groups for an estimated
    saving under 5 %); one tile of all when the whole chain fits, or when no tiling makes it fit (query_tiles.py
    runs each tile as its own chain).

    Why heads too: each tile reads its heads' Kᵀ and V whole, so a tiling reads them once per row tile. All heads in
    64 row tiles (flash attention, 32 heads of 4,096) read 6.5 GB of them; 8 groups of 4 heads in 4 row tiles, as
    silicon's flash attention tiles, read each head's K and V 4 times."""
    batch, m, _ = _chain_shape(graph, chain)
    whole = [(0, batch)], [(0, m)]
    if chain[-1].op != "batchmatmul" or _fitting(graph, chain, machine, cores, m):
        return whole
    costs = {}
    for g in sizes:
        n = next((n for n in range(1, m // PT_ROWS + 1)  # a tile of fewer rows than a PT pass never fits
                  if all(_tile_splits(graph, chain, machine, cores, b - a, g) for a, b in tile_rows(m, n))), None)
        if n is not None:
            costs[g, n] = _tiling_cost(graph, chain, machine, cores, (g, n), windows)
    if not costs:
        return whole
    g, n = max((t for t in costs if costs[t] <= NEAR * min(costs.values())), key=lambda t: (t[0], -costs[t]))
    return [(a, a + g) for a in range(0, batch, g)], tile_rows(m, n)


def _tile_splits(graph: Graph, chain: list[Node], machine: Machine, cores: int, rows: int,
                 g: int) -> list[tuple[int, int]]:
    """The splits (``_fitting``) of a tile of ``g`` heads and ``rows`` rows; for a group of fewer heads than the
    batch dim, only those giving each core whole rows of its heads, where ``matmul_cost`` ranks tilings as the
    simulator runs them. Split so that cores share a head's rows (and its Kᵀ, a multicast cohort), the fused chain's
    Q·Kᵀ slows in a way the estimate does not see: a core then holds few of the tile's heads, which the default
    layout interleaves, so it moves one-stick pieces and reads Q again per output stick (docs/decisions/fidelity.md,
    "Head-group attention tiles need the whole tile batch-outer"). Flash attention over 32 heads of 2,048
    took 81 cycles a head's row in tiles of all heads (no row shared), 77, 142 and 279 in groups of 16, 8 and 4 heads
    (rows shared by 2, 4 and 8 cores), which the estimate ranked the other way; the tilings took 10.8, 12.2, 16.7
    and 26.0 ms. Tiles of all heads keep every split, as before head groups."""
    splits = _fitting(graph, chain, machine, cores, rows, g)
    return splits if g == _chain_shape(graph, chain)[0] else [(x, r) for x, r in splits if r == 1]


def _tiling_cost(graph: Graph, chain: list[Node], machine: Machine, cores: int, tiling: tuple[int, int],
                 windows: list[Window]) -> float:
    """Estimated cycles of a tiling of ``g`` heads × ``n`` row tiles: each tile's matmuls at their cheapest fitting
    split (``matmul_cost``: Kᵀ and V read once per tile) and its launch; each input's windows (none when one
    window is the whole input) and the cats joining the tiles' outputs (rows within a group, then the groups along
    the batch dim), each a launch copying its bytes (``_copy``)."""
    (g, n), (batch, m, _) = tiling, _chain_shape(graph, chain)
    groups, launch = batch // g, machine.launch.dispatch_cycles
    shapes = [graph.tensors[k.tensors[1]].dshape[-2:] for k in (chain[0], chain[-1])]  # (K, N) of each matmul
    cycles = 0.0
    for a, b in tile_rows(m, n):
        cycles += groups * (launch + min(sum(matmul_cost(g, b - a, k, c, (*s, 1), machine) for k, c in shapes)
                                         for s in _tile_splits(graph, chain, machine, cores, b - a, g)))
    for size, row, along_x, along_rows in windows:
        if (count := (groups if along_x else 1) * (n if along_rows else 1)) > 1:
            cycles += count * launch + _copy(size, g * row if along_x and groups > 1 else size // count, machine, cores)
    out = graph.tensors[chain[-1].tensors[-1]]
    size, row = math.prod(out.dshape) * DTYPE_BYTES[out.dtype], -(-out.dshape[-1] // STICK) * STICK_BYTES
    if n > 1:
        cycles += groups * launch + _copy(size, size // (groups * n), machine, cores)
    if groups > 1:
        cycles += launch + _copy(size, g * row, machine, cores)
    return cycles


def _copy(size: int, run: int, machine: Machine, cores: int) -> float:
    """Estimated cycles of a copy on the card of ``size`` bytes in contiguous runs of ``run`` bytes: its bytes read
    and written at the sustained rate, or each run set up on a core's load and store units
    (``dma.piece_setup_cycles``), the longer. A head window is short runs: the card's default layout puts the batch
    dim just outside the stick, so a run is a row of ``g`` heads (Q's window of 4 of 16 heads of 64, 512 rows on 4
    cores, took 600 cycles a row on a core, where this counts 260: a lower bound)."""
    dram = 2 * size / (DRAM_SUSTAINED * machine.dram.peak_bytes_per_cycle())
    return max(dram, 2 * machine.dma.piece_setup_cycles * -(-size // run) / cores)


def tile_rows(m: int, tiles: int) -> list[tuple[int, int]]:
    """``m`` rows as ``tiles`` tiles (start, stop): the rows' PT passes of 8 (the last partly filled when 8 does
    not divide ``m``) shared near-equally, so every tile but the last is whole passes and no two differ by more
    than a pass. Tiles need not divide ``m``: a prime prompt length has no divisor but itself, and was not tiled.

    Whole passes rather than near-equal rows or ceil(m / tiles) rows and a shorter last one: a tile's split over the
    cores takes whole heads and whole rows (``_fitting``: divisors of each), and rows of whole passes have the
    divisors the cores' powers of two want. Granite-3.3-8B's attention at 1,024 tokens (32 heads) on 32 cores in
    three tiles took 7,202 µs as 341, 341 and 342 rows (341 = 11 × 31, 342 = 2 × 171: split (32 heads, 1) and (16,
    2), a core 341 rows of one head or 171 of two) and 3,661 µs as 336, 344 and 344 (344 = 8 × 43: split (4, 8), a
    core 43 rows of 8 heads). No pass is partly filled but the last tile's, and no tile falls far under the others
    (a short last tile could fall under a PT pass, which ``_fitting`` refuses, or use few cores). The cost: the
    largest tile can be up to 7 rows longer than ceil(m / tiles), so one more tile at the edge of fitting."""
    passes = -(-m // PT_ROWS)
    bounds = [min(m, PT_ROWS * (passes * t // tiles)) for t in range(tiles + 1)]
    return list(zip(bounds, bounds[1:], strict=False))


def _in_place(graph: Graph, chain: list[Node]) -> bool:
    """Whether each pointwise or row-wise kernel of a row chain may write its result over the chain's tensor it
    reads (its last reader: scratchpad.py, lowering/lx.py), so that one of the chain's tensors is in LX at a time."""
    return all(graph.tensors[prev.tensors[-1]].dtype == graph.tensors[node.tensors[-1]].dtype
               and reads_before_writing(node.op, tuple(node.tensors[:-1]), prev.tensors[-1])
               for prev, node in zip(chain, chain[1:], strict=False) if node.op != "batchmatmul")


def dim_names(rank: int) -> list[str]:
    return [f"d{i}" for i in range(rank - 2)] + ["mb", "out"]


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _divide(graph: Graph, node: Node, machine: Machine, cores: int,
            matmuls: dict[tuple[tuple[int, ...], ...], tuple[dict, dict]]) -> None:
    shapes = [graph.tensors[name].dshape for name in node.tensors]
    if node.op == "batchmatmul":
        key = tuple(tuple(shape) for shape in shapes)
        if key not in matmuls:
            matmuls[key] = _matmul(shapes, machine, cores)
        dims, slices = matmuls[key]
        node.dims, node.slices = dict(dims), dict(slices)  # each kernel's own, as before
        return
    space = shapes[0] if node.op in REDUCTIONS else shapes[-1]
    lanes = elems_per_stick(graph.tensors[node.tensors[-1]].dtype)  # a cast divides its output's sticks
    units = [-(-n // lanes) if i == len(space) - 1 else n for i, n in enumerate(space)]
    if node.op in REDUCTIONS:
        reduced = [i for i, (n, m) in enumerate(zip(shapes[0], shapes[-1], strict=True)) if n != m]
        slices = _reduction(units, reduced[0], cores) if reduced else _greedy(units, [True] * len(units), cores)
    elif node.op == RESTICKIFY:
        window = node.attrs.get("window") or [i for n in node.attrs.get("x_shape", shapes[0]) for i in (0, n)]
        x = tuple(b - a for a, b in zip(window[::2], window[1::2], strict=True))  # what it reads of its input
        slices = _restickify(x, tuple(node.attrs["perm"]), space, units, cores)
    else:
        slices = _greedy(units, [node.op not in ROWWISE or i < len(units) - 1 for i in range(len(units))], cores)
    node.dims = dict(zip(dim_names(len(space)), space, strict=True))
    node.slices = dict(zip(node.dims, slices, strict=True))


def _reduction(units: list[int], reduced: int, cores: int) -> list[int]:
    """The output's dims split greedily over the cores, the reduced dim over the cores they leave
    (each core folds its share, the group's first core folds the others' partials in as they
    arrive over the ring): torch-spyre's work division gives a reduction's output dims the cores
    first. Silicon's row reductions over (2048, 1024-8192) on 32 cores run at 145-155 GB/s with the
    rows alone split; splitting the reduced dim 2-4 ways as well, as a fitted estimate used to,
    made them wait on ring links, up to 2.4x slower (docs/validation-generalization.md)."""
    outputs = [1 if d == reduced else n for d, n in enumerate(units)]
    slices = _greedy(outputs, [True] * len(units), cores)
    slices[reduced] = max(g for g in divisors(units[reduced]) if g <= cores // math.prod(slices))
    return slices


def _restickify(x: tuple[int, ...], perm: tuple[int, ...], y: tuple[int, ...], units: list[int],
                cores: int) -> list[int]:
    """A transpose loads each block's input sticks on every core that stores one of its output
    sticks: split the dims outside the blocks first, and the blocks only for the cores left."""
    lanes = lane_dims(x, perm, y)
    outer = _greedy([1 if d in lanes else n for d, n in enumerate(units)], [True] * len(units), cores)
    inner = _greedy([n if d in lanes else 1 for d, n in enumerate(units)], [True] * len(units),
                    cores // math.prod(outer))
    return [a * b for a, b in zip(outer, inner, strict=True)]


def _greedy(units: list[int], splittable: list[bool], cores: int) -> list[int]:
    """Dims in device order, each split by its largest divisor the cores still left allow.

    The default layout of (d0, d1, ..., stick) lays out d1, ..., the stick count, then d0 just
    outside the stick, so splitting in that order gives each core long runs of consecutive
    sticks; splitting d0 first gives it single sticks, a DMA each (5x slower on (8, 2048, 512)).
    """
    out, left = [1] * len(units), cores
    for d in [*range(1, len(units)), 0]:
        if splittable[d]:
            out[d] = max(g for g in divisors(units[d]) if g <= left)
            left //= out[d]
    return out


def matmul_lx_sticks(rows: int, k: int) -> int:
    """The least LX a matmul core needs: its rows of C for one column group, and two chunks of A
    and B sticks (the lowering's column blocking)."""
    return rows + 2 * (rows + STICK) * min(MIN_K_CHUNK, -(-k // STICK))


def _cheapest(costs: dict[tuple[int, ...], float]) -> tuple[int, ...]:
    """The split of least estimated cost, counting splits within ``NEAR`` of it as equal and taking the one that
    uses most cores among them: no idle cores for an estimated saving under 5 %."""
    near = [s for s, cost in costs.items() if cost <= NEAR * min(costs.values())]
    return min(near, key=lambda s: (-math.prod(s), costs[s]))


def _matmul(shapes: list[tuple[int, ...]], machine: Machine, cores: int) -> tuple[dict, dict]:
    a, b = shapes[0], shapes[1]
    batch = a[0] if len(a) == 3 else 1
    (m, k), n = a[-2:], b[-1]
    splits = _matmul_splits(batch, m, n, cores)
    splits = [s for s in splits if matmul_lx_sticks(m // s[1], k) <= usable_lx_sticks(machine)] or splits
    best = _cheapest({s: matmul_cost(batch, m, k, n, s, machine) for s in splits})
    dims = {"mb": m, "in": k, "out": n}
    slices = {"mb": best[1], "in": 1, "out": best[2]}
    if len(a) == 3:
        dims, slices = {"x": batch, **dims}, {"x": best[0], **slices}
    return dims, slices


def _matmul_splits(batch: int, m: int, n: int, cores: int) -> list[tuple[int, int, int]]:
    return [(x, r, c) for x in divisors(batch) if x <= cores for r in divisors(m) if x * r <= cores
            for c in divisors(-(-n // STICK)) if x * r * c <= cores]


def matmul_cost(batch: int, m: int, k: int, n: int, split: tuple[int, int, int], machine: Machine) -> float:
    """Estimated cycles of a matmul split (batch, rows, columns): the longest of the card's DRAM time,
    one core's own loads (a stick per cycle) and one core's PT time. The lowering multicasts a shared
    operand to cohorts of up to ``dma.multicast_max_cores``: A crosses DRAM once per cohort of the
    column slices that share its rows, B once per cohort of the row slices that share its columns and
    per row block (a core computes at most ``pt.max_tile_rows`` rows at once); a batched core reads its A
    once per output stick it owns (its tile is one output stick of a batch block; a matmul of one batch is tiled as
    a 2-D one)."""
    x, r, c = split
    k_pad, n_pad = -(-k // STICK) * STICK, -(-n // STICK) * STICK
    cohort = machine.dma.multicast_max_cores
    rows_per_core = -(-m // r)
    blocks = -(-rows_per_core // machine.pt.max_tile_rows)
    a_reads = -(-(n_pad // STICK) // c) if batch > 1 else 1
    elems = batch * (a_reads * -(-c // cohort) * m * k_pad + blocks * -(-r // cohort) * k_pad * n_pad + m * n_pad)
    dram_cycles = 2 * elems / (DRAM_SUSTAINED * machine.dram.peak_bytes_per_cycle())
    core_cycles = 2 * elems / (x * r * c) / STICK_BYTES
    rows = -(-(m // r) // PT_ROWS) * PT_ROWS
    macs = (batch // x) * rows * (n_pad // c) * k_pad
    pt_cycles = macs / (machine.cores.corelets * machine.pt.macs_per_cycle("fp16"))
    return max(dram_cycles, core_cycles, pt_cycles)
