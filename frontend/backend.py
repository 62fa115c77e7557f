"""The torch.compile backend ``"spyre_emu"``: Dynamo graph -> ATen graph -> compiled call.

Registered through the ``torch_dynamo_backends`` entry point, so ``backend="spyre_emu"`` works
after ``pip install`` with no import. Only inference is simulated: the ATen graph is traced once
with the Core ATen decompositions (decompositions.py, trace.py), or through aot_autograd where the
graph mutates tensors, and a graph that needs gradients is refused with an error saying so.
"""

from __future__ import annotations

from typing import Any

import torch
from torch._dynamo.backends.common import aot_autograd
from torch._subclasses.fake_tensor import unset_fake_temporarily

from spyre_emu.config import load_machine
from spyre_emu.errors import SpyreEmuError
from spyre_emu.host import load_host
from spyre_emu.memo import collector_paused

from . import compile_store
from .compile import compile_graph
from .decompositions import decompositions, rewrite_attention
from .generate import install
from .options import parse_options
from .runtime import CompiledGraph
from .subgraphs import inline_subgraphs, walkable
from .tensor_parallel import shard
from .trace import trace_inference
from .transfers import aten_parameters, aten_per_call, per_call_inputs, step_transfers

DYNAMIC = "dynamic shapes are not simulated: compile with torch.compile(..., dynamic=False)"
TRAINING = "training is not simulated: call the model under torch.no_grad() or torch.inference_mode()"


RECOMPILES = 256  # graphs per frame (Dynamo's limit for all frames): static shapes make each new length a graph


def spyre_emu_backend(gm: torch.fx.GraphModule, example_inputs: list[Any], options: dict[str, Any] | None = None):
    # Dynamo's default of 8 would send a generation with a growing KV cache back to eager after 8 tokens.
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILES)
    # Kernel programs are static: without dynamic=False a new shape would recompile as a dynamic graph.
    torch._dynamo.config.automatic_dynamic_shapes = False
    opts = parse_options(options)
    machine = load_machine(opts.machine, opts.set)
    cpu = load_host(opts.host).cpu  # a bad host TOML fails here, before anything is compiled
    if opts.cores is not None and opts.cores > machine.cores.count:
        raise SpyreEmuError(f"the card has {machine.cores.count} cores, got {opts.cores}", None, "options.cores")
    if torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in example_inputs):
        raise SpyreEmuError(TRAINING)
    per_call = per_call_inputs(gm, example_inputs)

    def forward(aten_gm: torch.fx.GraphModule, aten_inputs: list[Any]) -> CompiledGraph:
        if any(isinstance(a, torch.SymInt) for a in aten_inputs):
            raise SpyreEmuError(DYNAMIC)
        if opts.cards or not walkable(aten_gm):  # a repeated region's calls copied, unless the passes read
            inline_subgraphs(aten_gm)             # them in place exactly (subgraphs.walkable)
        plan = shard(aten_gm, opts.cards or 1)  # one card's graph (tensor parallel), or the graph itself
        parameters = aten_parameters(gm, example_inputs, len(aten_inputs))
        key = compile_store.key(plan.gm, opts, machine, parameters)  # the passes' result, stored (compile_store.py)
        with unset_fake_temporarily():  # constants the passes make are real tensors
            compiled = compile_store.load(key, plan.gm, opts)
            if compiled is None:
                compiled = compile_graph(plan.gm, opts, machine, parameters)
                compile_store.store(key, compiled, plan.gm)
        compiled.transfers = step_transfers(compiled.graph, aten_per_call(per_call, len(aten_inputs)))
        return CompiledGraph(aten_gm, compiled, machine, cpu, opts, plan)

    def backward(aten_gm: torch.fx.GraphModule, aten_inputs: list[Any]) -> Any:
        raise SpyreEmuError(TRAINING)

    rewrite_attention(gm)
    with collector_paused():  # no full collection of torch's heap mid-compile (memo.collector_paused)
        traced = trace_inference(gm, example_inputs, decompositions())
        if traced is not None:
            return forward(traced, example_inputs)
        return aot_autograd(fw_compiler=forward, bw_compiler=backward, decompositions=decompositions())(
            gm, example_inputs)


install(spyre_emu_backend)  # compiled.generate(...) runs the compiled forward (generate.py)
