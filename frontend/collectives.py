"""The collectives a tensor-parallel graph calls between its cards (spyreccl's, through host memory).

In one card's graph (tensor_parallel.py) a collective is a call of ``all_reduce`` or ``all_gather``:
the function gives the shape and dtype of that card's result (what the passes and fake tensors need);
``combine`` is what the drawer computes from every card's operand, and the runtime calls it, card
values in, card results out. Their time is the host model's (spyre_emu.host).
"""

from __future__ import annotations

import torch


def all_reduce(x: torch.Tensor, cards: int) -> torch.Tensor:
    """Every card's partial sum in, the sum out on every card (one card's result: x's shape)."""
    return torch.empty_like(x)


def all_gather(x: torch.Tensor, dim: int, cards: int) -> torch.Tensor:
    """Every card's slice along ``dim`` in, all of them concatenated out on every card."""
    shape = list(x.shape)
    shape[dim] *= cards
    return x.new_empty(shape)


KINDS = {all_reduce: "all_reduce", all_gather: "all_gather"}


def combine(kind: str, parts: list[torch.Tensor], dim: int = 0) -> list[torch.Tensor]:
    """What each card holds after the collective, given each card's operand (the sum taken in float32,
    rounded once)."""
    if kind == "all_reduce":
        total = torch.stack([p.float() for p in parts]).sum(0).to(parts[0].dtype)
        return [total.clone() for _ in parts]
    whole = torch.cat(parts, dim)
    return [whole.clone() for _ in parts]


def nbytes(kind: str, shape: tuple[int, ...], dtype: torch.dtype) -> int:
    """The bytes each card holds once the collective is done (what ``spyre_emu.host.collective_us`` takes)."""
    n = 1
    for s in shape:
        n *= int(s)
    return n * dtype.itemsize
