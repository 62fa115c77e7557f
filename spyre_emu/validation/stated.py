"""The kernels a single figure states in words, as programs: an SFU kernel (a pointwise op, a row reduction, a
softmax chain in row tiles) or a SwiGLU MLP.

``calibration.py`` reads a figure's ``what`` (and, where that states nothing, its name) through these readers;
each returns the program with its category, or None where the words are not its kind. Matmuls and ring moves are
read there, with the entry's split.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..kernel_program.ops import OPS
from .workloads import REDUCTIONS, pointwise_program, softmax_tile_program, swiglu_problem, swiglu_program

SHAPE = re.compile(  # [[B,]M,K] x [[B,]K,N]
    r"\[(?:(\d+),\s*)?(\d+),\s*(\d+)\]\s*[x×@]\s*\[(?:(\d+),\s*)?(\d+),\s*(\d+)\]")
CORES = re.compile(r"(\d+)\s*cores?\b")
CARD_CORES = 32  # a figure stating more (or none) cannot be a card's kernel
AREA = r"(\d+)\s*[x×]\s*(\d+)"  # rows x columns
STAGES = re.compile(r"softmax\D{0,40}?" + AREA)  # "softmax 2048×512 in 8 LX tiles, chain of 7, 1 core"
CHAIN, TILES = re.compile(r"chain of (\d+)"), re.compile(r"(\d+)\s*(?:lx\s+|row\s+)?tiles")
STAGES_NAME = re.compile(r"(?:softmax_)?stages_(\d+)_(\d+)(?:cores?)?$")  # chain, cores
REDUCE = re.compile(r"\b(" + "|".join(REDUCTIONS) + r") along the rows? of " + AREA)
POINTWISE_WORDS = {"gelu": "gelufwd", "relu": "relufwd", "div": "realdiv",
                   **{op: op for op, spec in OPS.items() if spec.family == "pointwise" and spec.arity <= 2}}
POINTWISE = re.compile(r"\b(" + "|".join(POINTWISE_WORDS) + r") of (?:two )?" + AREA)
KERNEL_NAME = re.compile(r"(row)?([a-z]+)_(\d+)x(\d+)_(\d+)cores?$")  # "neg_8192x2048_1core", "rowmax_..."
STAGE_ROWS = 256  # softmax_stages' row tile (2048 rows in 8 tiles), where an entry states no tile count
SWIGLU = re.compile(r"(?<![a-z])swiglu(?![a-z])|\bgated mlp\b|\bmlp\s*\(gate\b")  # "SwiGLU", "MLP (gate, up, down)"
PROJECTION = re.compile(r"\b(?:gate|up|down)[\s_-]*(?:proj\w*|matmul|kernel)\b")  # one of the MLP's matmuls
HIDDEN = re.compile(r"\bhidden(?:[\s_](?:size|dim))?\s*[=:]?\s*(\d+)")  # "hidden 4096", "hidden_size=4096"
INTERMEDIATE = re.compile(r"\bintermediate(?:[\s_](?:size|dim))?\s*[=:]?\s*(\d+)")
TOKENS, BATCH = re.compile(r"(\d+)[\s-]*tokens?\b"), re.compile(r"\bbatch(?:[\s_]size)?\s*[=:]?\s*(\d+)")
PHASE = re.compile(r"\b(prefill|decode)\b")
GRANITE_MLP = (4096, 12800)  # Granite-3.3-8B's hidden and intermediate sizes, where a figure names the model only
PHASE_TOKENS = {"prefill": 512, "decode": 64}  # the split sweep's token counts (its README), where none are stated


@dataclass(frozen=True)
class Stated:
    """A program for a figure, its category, why it cannot run ("" where it can), and how many row tiles the
    figure covers (the program runs one)."""

    category: str
    program: dict[str, Any]
    problem: str = ""
    tiles: int = 1


def stated_cores(text: str, default: int | None = None) -> int | None:
    """The cores ``text`` states ("4 cores", "1 core"), else ``default``."""
    found = CORES.search(text)
    return int(found.group(1)) if found else default


def cores_problem(count: int) -> str:
    """Why a kernel on ``count`` cores cannot run ("": it can)."""
    return "" if 1 <= count <= CARD_CORES else f"a kernel runs on 1 to {CARD_CORES} cores; `what` states {count}"


def sfu_kernel(name: str, what: str) -> Stated | None:
    """A softmax chain in row tiles, a pointwise op or a row reduction over rows × columns split over cores (the
    card's 32 where none are stated), as ``what`` states it ("softmax 2048×512 in 8 LX tiles, chain of 7, 1 core",
    "gelu of 2048×8192, 2 cores", "max along the row of 2048×8192, 4 cores") or, where ``what`` states none (or
    states no cores), as the sweep names it ("stages_7_1", "gelu_2048x8192_2core", "rowmax_2048x8192_4core");
    None for any other."""
    what = what.lower()
    stated = stated_cores(what)
    if STAGES.search(what) or STAGES_NAME.match(name):
        return _softmax_chain(name, what, stated)
    found, named = REDUCE.search(what) or POINTWISE.search(what), KERNEL_NAME.match(name)
    if found:  # the cores the words leave out are the name's, as for a softmax chain
        count = stated if stated is not None or not named else int(named.group(5))
        reduction, op, rows, cols = found.re is REDUCE, found.group(1), *map(int, found.group(2, 3))
    elif named:
        reduction, op, (rows, cols, count) = bool(named.group(1)), named.group(2), map(int, named.group(3, 4, 5))
    else:
        return None
    op = (op if op in REDUCTIONS else "") if reduction else POINTWISE_WORDS.get(op, "")
    if not op:
        return None
    count = CARD_CORES if count is None else count
    problem = cores_problem(count)
    program = {} if problem else pointwise_program(op, rows, cols, count, name, OPS[op].arity)
    return Stated("row reduction (single)" if reduction else "pointwise (single)", program, problem)


def _softmax_chain(name: str, what: str, cores: int | None) -> Stated:
    """One row tile of a softmax chain, its figure one launch and every tile: the chain's length less the five
    base ops are sigmoid stages (torch-spyre's softmax_stages sweep); the sweep's 2048 × 512 where ``what`` states
    no size, tiles of ``STAGE_ROWS`` where it states no tile count."""
    stages, named, chain, tiles = STAGES.search(what), STAGES_NAME.match(name), CHAIN.search(what), TILES.search(what)
    length = int(chain.group(1)) if chain else int(named.group(1)) if named else 5
    cores = cores if cores is not None else int(named.group(2)) if named else CARD_CORES
    rows, cols = map(int, stages.group(1, 2)) if stages else (2048, 512)
    count = int(tiles.group(1)) if tiles else max(1, rows // STAGE_ROWS)
    problem = ("a softmax chain has at least 5 ops (max, sub, exp, sum, div)" if length < 5 else
               f"{rows} rows do not cut into {count} tiles" if not count or rows % count else cores_problem(cores))
    program = {} if problem else softmax_tile_program(length - 5, cores, name, rows // count, cols)
    return Stated("softmax stages (single)", program, problem, count)


def swiglu(name: str, what: str) -> Stated | None:
    """A SwiGLU MLP, down(silu(gate(x)) · up(x)), as ``what`` (or its name) states it, with its sizes from the
    input times the gate's weight or from words (``_sizes``); None where the words are not a whole SwiGLU (one
    of its projections is a matmul)."""
    text = f"{name} {what}".lower()
    if not SWIGLU.search(text) or PROJECTION.search(text):
        return None
    sizes, problem = _sizes(what, text)
    count = stated_cores(text, CARD_CORES)
    problem = problem or cores_problem(count) or swiglu_problem(*sizes, count)
    return Stated("SwiGLU MLP (single)", {} if problem else swiglu_program(*sizes, name, count), problem)


def _sizes(what: str, text: str) -> tuple[tuple[int, int, int, int], str]:
    """(batches, tokens, hidden, intermediate) and why they cannot run (""): from the input times the gate's
    weight ("SwiGLU MLP [1,512,4096] x [4096,12800]": 512 tokens, hidden 4096, intermediate 12800; a 3-D input
    over a shared weight is B × M tokens, over a weight of as many batches a batched MLP) or from words ("hidden
    4096, intermediate 12800, 64 tokens"; "batch 4" times the tokens, or alone one token a sequence; a figure
    naming Granite and no sizes is Granite-3.3-8B's MLP; one naming prefill or decode and no tokens has the
    sweep's 512 or 64)."""
    found = SHAPE.search(what)
    if found:
        b, m, hidden, b2, hidden2, inter = (int(g) if g else 1 for g in found.groups())
        sizes = (b, m, hidden, inter) if b2 > 1 else (1, b * m, hidden, inter)
        problem = ("expected [tokens, hidden] x [hidden, intermediate], or [B, tokens, hidden] x [B, hidden, "
                   "intermediate]" if b2 not in (1, b) or hidden != hidden2 else "")
    else:
        granite = GRANITE_MLP if "granite" in text else (0, 0)
        hidden, inter = (int(match.group(1)) if match else default for match, default in
                         zip((HIDDEN.search(text), INTERMEDIATE.search(text)), granite, strict=True))
        stated, batch, phase = TOKENS.search(text), BATCH.search(text), PHASE.search(text)
        per_sequence = int(stated.group(1)) if stated else 1 if batch else PHASE_TOKENS.get(phase and phase.group(1), 0)
        sizes = (1, per_sequence * (int(batch.group(1)) if batch else 1), hidden, inter)
        problem = "" if min(sizes) else ("expected a SwiGLU's sizes: [tokens, hidden] x [hidden, intermediate], or "
                                         "'hidden H, intermediate I, T tokens'")
    return sizes, problem or ("" if min(sizes) else "a SwiGLU's sizes must be positive")
