"""Running a compiled graph: kernel programs on the simulator, host steps on the CPU.

Timing does not depend on the data, so each kernel program is simulated once per compiled graph
(independent programs side by side in the process pool, results reused through the result cache).
Functional calls then replay the timed instructions on real data: every host value is a torch
tensor, a segment's inputs go in as arrays in their device shape, and its outputs come back as
torch tensors. Timing-only calls (``functional=False``, or meta tensors) compute the results with torch.
Over several cards (tensor_parallel.py) every card runs the same kernel programs, so the timing is
one card's; a functional call runs each card on its own slices, step by step, and a collective
combines the cards' values (collectives.py).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from spyre_emu.config import Machine
from spyre_emu.host.config import Cpu
from spyre_emu.host.drawer import trace_json
from spyre_emu.pipeline import RunResult, timings, with_outputs
from spyre_emu.results import chrome_trace

from . import drawer, report
from .collectives import combine
from .compile import Compiled
from .graph import DeviceTensor, Node, Value, blame
from .kernel_ops import run_reference
from .options import Options
from .program import Segment
from .progress import status
from .tensor_parallel import ShardPlan
from .transfers import argument

TORCH_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32, "int32": torch.int32}
# what the torch reference of an op reads
SEMANTIC_ATTRS = ("dims", "eps", "slice", "kernel", "stride", "padding", "dilation", "pad", "image", "along")


class Residence(Protocol):
    """Where a registered device keeps its tensors' bytes (frontend/device): a compiled graph reads
    device tensors in place and leaves its outputs there, with no host round trip."""

    def holds(self, t: Any) -> bool: ...
    def host_view(self, t: torch.Tensor) -> torch.Tensor: ...
    def to_device(self, t: torch.Tensor) -> torch.Tensor: ...
    def ran(self, rep: report.FrontendReport) -> None: ...


RESIDENCE: list[Residence] = []   # empty unless spyre_emu.frontend.device.register_device() ran


class CompiledGraph:
    """The callable aot_autograd gets back: inputs in, output tensors out, a report published per call."""

    def __init__(self, gm: torch.fx.GraphModule, compiled: Compiled, machine: Machine, cpu: Cpu,
                 options: Options, plan: ShardPlan):
        """``gm``: the whole graph (timing-only calls run it); ``compiled``: one card's, after ``plan``."""
        self.gm, self.compiled, self.machine, self.cpu = gm, compiled, machine, cpu
        self.options, self.plan = options, plan
        self._timing: dict[int, RunResult] = {}

    def __call__(self, *args: Any) -> Any:
        device = next((d for d in RESIDENCE if any(d.holds(a) for a in args)), None)
        held: set[int] = set()
        if device is not None:  # what the device holds does not cross, nor do outputs it keeps
            held = {i for i, a in enumerate(args) if device.holds(a)} | {-1}
            args = tuple(device.host_view(a) if device.holds(a) else a for a in args)
        outputs, rep = self.run(*args, held=held)
        if device is not None:
            outputs = [device.to_device(o) if isinstance(o, torch.Tensor) else o for o in outputs]
            device.ran(rep)
        report.publish(rep)
        if self.options.print_report:
            sys.stdout.write(rep.to_text())
        return outputs

    def run(self, *args: Any, held: set[int] = frozenset()) -> tuple[Any, report.FrontendReport]:
        """The outputs and the report of one call, not published (the emulated device keeps its own).
        ``held``: inputs already on the card (-1: the outputs stay there too), which the step does not copy."""
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        functional = self.options.functional and not any(t.is_meta for t in tensors)
        self._inputs: list[dict[str, np.ndarray]] = []
        self._host_us: dict[int, float] = {}
        outputs = self._functional(args) if functional else self._torch_outputs(args, tensors)
        results = self._functional_runs if functional else self._timing_runs()
        rep = report.build(results, [s for s in self.compiled.steps if isinstance(s, Node)],
                           self.compiled.crossings, self.machine, self.cpu, self._inputs, self._host_us)
        rep.transfers = [{"direction": d, "tensor": name, "bytes": nbytes, "index": i, "source": source}
                         for d, name, nbytes, i, source in self.compiled.transfers
                         if (i if d == "h2d" else -1) not in held and argument(source) not in self.options.on_card]
        rep.copy_us = round(sum(self.machine.pcie_us(t["bytes"]) for t in rep.transfers), 6)
        if self.options.cards is not None:
            split = {i for i, d in enumerate(self.plan.outputs) if d is not None}
            rep.drawer = drawer.figures(self.compiled, results, rep.transfers, split, self.plan.cards, self.machine,
                                        self.options)
            if self.options.trace:  # the step's timeline; each kernel program's own is named in its slices
                Path(self.options.trace).write_text(trace_json(rep.drawer["timeline"], self.plan.cards,
                                                               self._details()))
        return outputs, rep

    def _segments(self) -> list[tuple[int, Segment]]:
        return [(i, s) for i, s in enumerate(self.compiled.steps) if isinstance(s, Segment)]

    def _torch_outputs(self, args: tuple[Any, ...], tensors: list[torch.Tensor]) -> Any:
        """A timing-only call's outputs as torch computes them; on meta tensors, read off the trace."""
        if tensors and all(t.is_meta for t in tensors):
            outputs = meta_outputs(self.gm, args)
            if outputs is not None:
                return outputs
        return self.gm(*args)

    def _timing_runs(self) -> list[tuple[Segment, RunResult]]:
        """Each segment simulated once per compiled graph; the ones not yet simulated side by side."""
        todo = [i for i, _ in self._segments() if i not in self._timing]
        with status(f"simulating {len(todo)} kernel programs"):
            runs = timings([self.compiled.programs[i] for i in todo], self.machine, self.options.cache)
        for i, (log, rep) in zip(todo, runs, strict=True):
            self._timing[i] = self._traced(i, RunResult(rep, log))
        return [(seg, self._timing[i]) for i, seg in self._segments()]

    def _traced(self, i: int, result: RunResult) -> RunResult:
        """Write the segment's Chrome trace when the options ask for one."""
        if self.options.trace:
            self._trace_path(i).write_text(chrome_trace(result.log, self.machine, result.report.data))
        return result

    def _trace_path(self, i: int) -> Path:
        """The trace option's file for one kernel program, or ``<trace>.<i>.json`` beside the step's
        timeline (with ``cards``) or the other programs' traces."""
        path = Path(self.options.trace)
        alone = len(self._segments()) == 1 and self.options.cards is None
        return path if alone else path.with_suffix(f".{i}{path.suffix}")

    def _details(self) -> dict[str, str]:
        """Each launched program's (drawer.rank_ops names them) cycle-level trace file."""
        return {drawer.program_key(seg): self._trace_path(i).name for i, seg in reversed(self._segments())}

    def _functional(self, args: tuple[Any, ...]) -> list[Any]:
        """Every card on its own slices of the inputs, step by step; the report shows card 0's runs."""
        graph = self.compiled.graph
        envs: list[dict[Value, torch.Tensor]] = [
            {v: a for v, a in zip(graph.inputs, card_args, strict=True) if isinstance(v, Value)}
            for card_args in (self.plan.card_inputs(args, r) for r in range(self.plan.cards))]
        self._functional_runs: list[tuple[Segment, RunResult]] = []
        self._timing_runs()  # every segment's timing first, once per compiled graph: it does not depend on the data
        for i, step in enumerate(self.compiled.steps):
            if isinstance(step, Segment):
                for card, env in enumerate(envs):
                    self._segment(i, step, env, card == 0)
            elif step.host == "collective":
                parts = [value_of(env, step.inputs[0]) for env in envs]
                dim = step.attrs["args"][1] if step.op == "all_gather" else 0
                for env, out in zip(envs, combine(step.op, parts, dim), strict=True):
                    env[step.outputs[0]] = out
            else:
                for env in envs:
                    self._host_step(step, env)
        return self.plan.assemble([[None if v is None else value_of(env, v) for v in graph.outputs] for env in envs])

    def _segment(self, i: int, step: Segment, env: dict[Value, torch.Tensor], reported: bool) -> None:
        graph = self.compiled.graph
        inputs = {step.names[name]: _to_array(_host(env, graph.tensors[name])) for name in step.inputs}
        result = with_outputs(self.compiled.programs[i], self.machine, self._timing[i], inputs)
        if reported:
            self._inputs.append(inputs)
            self._functional_runs.append((step, result))
        for name in step.outputs:
            t = graph.tensors[name]
            env[t.value] = _from_array(result.outputs[step.names[name]], t).reshape(t.value.shape)

    def _host_step(self, step: Node, env: dict[Value, torch.Tensor]) -> None:
        start = time.perf_counter()
        with blame(step):  # the op itself failed on the host: name it and its source
            _run_host(step, env)
        self._host_us[id(step)] = (time.perf_counter() - start) * 1e6


def value_of(env: dict[Value, torch.Tensor], v: Value) -> torch.Tensor:
    """A value's host tensor: its own (a segment output), or its root's (data or constant) read
    in the view's order."""
    if v in env:
        return env[v].reshape(v.shape)
    root = v.root
    data = env[root] if root in env else root.const
    if data is None:
        raise KeyError(f"value {v.name} was never computed")
    order = v.elements
    return data.reshape(order.atoms).permute(order.perm).reshape(v.shape).to(v.dtype)  # a carried value's view


def _host(env: dict[Value, torch.Tensor], t: DeviceTensor) -> torch.Tensor:
    """The host data of a device tensor, in its device shape and dtype."""
    data = value_of(env, t.value)
    data = data if t.expand is None else data.expand(t.expand)
    return data.reshape(t.dshape).to(TORCH_DTYPES[t.dtype])


def _to_array(t: torch.Tensor) -> np.ndarray:
    t = t.detach().contiguous()
    return t.view(torch.int16).numpy().view(np.uint16) if t.dtype == torch.bfloat16 else t.numpy()


def _from_array(a: np.ndarray, t: DeviceTensor) -> torch.Tensor:
    data = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16) if t.dtype == "bf16" else torch.from_numpy(a)
    return data != 0 if t.value.dtype == torch.bool else data.to(t.value.dtype)  # an integer carried in fp32


def _run_host(node: Node, env: dict[Value, torch.Tensor]) -> None:
    """A host step: the ATen op itself, or a kernel (refused, or folded) through its torch reference."""
    if "args" in node.attrs:
        def get(a: Any) -> Any:
            return value_of(env, a) if isinstance(a, Value) else a
        args = torch.fx.node.map_aggregate(node.attrs["args"], get)
        kwargs = torch.fx.node.map_aggregate(node.attrs["kwargs"], get)
        result = node.fx.target(*args, **kwargs)
        for out, data in zip(node.outputs, result if len(node.outputs) > 1 else [result], strict=True):
            env[out] = data
    else:
        attrs = {k: v for k, v in node.attrs.items() if k in SEMANTIC_ATTRS}
        out = node.outputs[0]
        env[out] = run_reference(node.op, [value_of(env, v) for v in node.inputs], attrs, out.dtype, out.shape)


def meta_outputs(gm: torch.fx.GraphModule, args: tuple[Any, ...]) -> Any:
    """The outputs ``gm`` gives for meta ``args``, without running it: on meta tensors torch computes
    only shapes, strides and dtypes, which the trace recorded on each node (``meta["val"]``); an
    output that is an input is that input. None where that is not the whole answer: an output made
    on another device (real values), or a node with no recorded tensor."""
    places = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(places) != len(args):
        return None
    given = dict(zip(places, args, strict=True))
    vals = {}
    out = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    for node in out.all_input_nodes:
        val = node.meta.get("val")
        if node not in given and not (isinstance(val, torch.Tensor) and val.device.type == "meta"):
            return None
        vals[node] = given[node] if node in given else torch.empty_strided(val.shape, val.stride(), dtype=val.dtype,
                                                                          device="meta")
    outputs = torch.fx.node.map_arg(out.args[0], vals.__getitem__)
    return list(outputs) if isinstance(outputs, list) else outputs  # a list the caller may write to, as gm's
