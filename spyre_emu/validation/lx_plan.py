"""validate's scratchpad planner: a measured workload whose LX tensors do not all fit keeps in LX what fits.

validate plays the compiler for the figures it runs (workloads.py): a softmax tile keeps its intermediates in
LX, as torch-spyre's softmax SDSCs do. Silicon also ran tiles whose intermediates exceed a core's LX (a fused
4096 × 2048 softmax on one core in 1 to 16 tiles: HieronZhang/torch-spyre ``notes/cost_model_report.md`` §19),
so its compiler kept part of them in DRAM; its planner gives LX to what fits. Here, in the order the kernels
first write them, each LX tensor stays in LX if the program still lowers with it and those kept before it
there, and goes to DRAM otherwise (docs/validation-generalization.md). A program that fits runs as given.
"""

from __future__ import annotations

from typing import Any

from ..config import Machine
from ..errors import LxOverflowError
from ..pipeline import Program, parse


def planned(data: dict[str, Any], machine: Machine, source: str) -> Program:
    """``data`` parsed for ``machine`` where its LX tensors fit; else with those that do not fit (greedily, in
    first-written order) in DRAM. An overflow left with every LX tensor in DRAM (a kernel's own buffers) is
    raised as it is."""
    try:
        return parse(data, machine, source)
    except LxOverflowError:
        pass
    order, kept, program = _first_written(data), [], None
    for name in order:
        try:
            program = parse(_placed(data, order, [*kept, name]), machine, source)
            kept.append(name)
        except LxOverflowError:
            continue
    return program or parse(_placed(data, order, []), machine, source)


def _first_written(data: dict[str, Any]) -> list[str]:
    """The program's LX tensors, in the order its kernels first write them."""
    tensors, order = data["tensors"], []
    for kernel in data["kernels"]:
        for name in kernel["outputs"]:
            if tensors[name].get("space") == "lx" and name not in order:
                order.append(name)
    return order


def _placed(data: dict[str, Any], lx: list[str], kept: list[str]) -> dict[str, Any]:
    """``data`` with the tensors of ``lx`` that are not ``kept`` in DRAM. A tensor written over another
    (``in_place_of``) takes a place of its own when either of the two is in DRAM."""
    dram = {name for name in lx if name not in kept}
    tensors = {name: _own_place(t) if name in dram or t.get("in_place_of") in dram else t
               for name, t in data["tensors"].items()}
    return {**data, "tensors": {**tensors, **{name: {**tensors[name], "space": "dram"} for name in dram}}}


def _own_place(tensor: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in tensor.items() if key != "in_place_of"}
