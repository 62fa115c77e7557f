"""Print what the host runtime adds to a Granite-3.3-8B step, with graphs built on the launch path or cached.

Run: ``python benchmarks/host_launch.py [--layers 40] [--phase decode|prefill]``. A script, not a
test: it prints figures (docs/host.md records them).

The model is benchmarks/model_speed.py's Granite stack at IBM's shape (batch 1, sequence 1024: a
prefill of 1024 tokens, or a decode step over 1024 cached keys), compiled timing-only on meta
tensors; each kernel program the front end launches becomes a ``Launch`` with its simulated card time
(identical layers' launches are the same program), each PCIe round trip a pair of copies, and the
step's own copies (the report's ``transfers``: per-call inputs in, results out) a ``Copy`` each, in
before the launches and out after them. The host model (spyre_emu.host, configs/host.toml) then runs
a warm step (every program built by an earlier step, as in IBM's per-token figures) three ways, as
IBM compared them: graphs built on both paths, off the data-transfer path, and off compute dispatch
as well; once with the step's inputs as its graph receives them (the KV cache passed from the host,
the step's keys and values returned), once with the KV cache held on the card (only the hidden
state, RoPE tables and the final output cross). ``--data-path spyre-inference`` replaces the step's own
copies with the ones IBM's serving stack of the time issued around the same launches (``ibm_copies``).
It also prints the ``graph_us`` at which the step would give IBM's ratio for both paths exactly
(configs/host.toml takes decode's). Every speed-up is read one way: the gain, before / after - 1.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from dataclasses import replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from model_speed import GRANITE, granite, model_inputs  # noqa: E402
from spyre_emu.frontend import last_report  # noqa: E402

from spyre_emu.config import load_machine  # noqa: E402
from spyre_emu.host import Copy, Host, Launch, load_host, simulate_host  # noqa: E402

IBM = {"decode": (1.136, 2.4), "prefill": (1.099, 1.7)}  # speed-ups: transfer path off; both paths off
SHAPES = {"decode": (1, 1024), "prefill": (1024, 0)}  # IBM's batch 1, sequence 1024: tokens, cached keys
HEAD, VOCAB = 128, 49155  # Granite-3.3-8B's head size and vocabulary


def ibm_copies(phase: str) -> tuple[list[Copy], list[Copy]]:
    """The copies a Granite-3.3-8B step made in torch-spyre's vLLM plugin, read from its first public
    version (spyre-inference, commit e9630e9, 2026-05-07: its custom ops and attention backend), as
    (once a step, once per layer).

    Per step: the token ids in, the last token's logits out (positions stay on the host: RoPE runs there).
    Per layer: the QKV projection's result out (the split runs on the host, RoPE with it); the attention's
    queries (padded to 32 rows), keys and values (the KV cache is on the host: the whole context,
    padded to 256) and its additive mask in, its result out; that result in again for the output
    projection; the gate and up projection's result out and its two halves in (the SwiGLU's slicing runs
    on the host). Sizes from Granite's shape at the phase's tokens (fp16; ids int64)."""
    d, heads, ffn = GRANITE["dim"], GRANITE["kv_heads"], GRANITE["hidden"]
    kv = heads * HEAD
    tokens, cached = SHAPES[phase]
    padded, keys = _up(tokens, 32), _up(tokens + cached, 256)
    step = [Copy("h2d", 8 * tokens), Copy("d2h", 2 * VOCAB)]
    layer = [Copy("d2h", 2 * tokens * (d + 2 * kv)),
             Copy("h2d", 2 * padded * d), Copy("h2d", 2 * keys * kv), Copy("h2d", 2 * keys * kv),
             Copy("h2d", 2 * heads * padded * keys), Copy("d2h", 2 * padded * d),
             Copy("h2d", 2 * tokens * d),
             Copy("d2h", 4 * tokens * ffn), Copy("h2d", 2 * tokens * ffn), Copy("h2d", 2 * tokens * ffn)]
    return step, layer


def _up(n: int, to: int) -> int:
    return -(-n // to) * to


def with_ibm_copies(ops: list, phase: str, layers: int) -> list:
    """``ops``' launches with IBM's stack's copies instead of the step's own: the per-step ones in before the
    launches (the logits after them), each layer's after that layer's share of the launches."""
    step, layer = ibm_copies(phase)
    launches = [op for op in ops if isinstance(op, Launch)]
    share = len(launches) // layers
    out = [op for op in step if op.direction == "h2d"]
    for i, launch in enumerate(launches):
        out.append(launch)
        if (i + 1) % share == 0 and (i + 1) // share <= layers:
            out += layer
    return out + [op for op in step if op.direction == "d2h"]


def step_ops(phase: str, layers: int, cache_on_card: bool) -> list:
    """The copies in, launches, round trips and copies out of one compiled step, in order."""
    tokens, cache = SHAPES[phase]
    with torch.device("meta"):
        model = granite(layers, GRANITE).half().eval()
    on_card = ["cache"] if cache_on_card else []  # the cache's arguments stay on the card
    compiled = torch.compile(model, backend="spyre_emu", dynamic=False,
                             options={"functional": False, "on_card": on_card})
    with torch.no_grad():
        compiled(*model_inputs(layers, GRANITE, tokens, cache, "meta"))
    rep = last_report()
    ins = [t for t in rep.transfers if t["direction"] == "h2d"]
    outs = [t for t in rep.transfers if t["direction"] == "d2h"]
    if cache_on_card:  # the step's keys and values are written into the cache on the card
        outs = [t for t in outs if t["index"] == 0]
    ops = [Copy("h2d", t["bytes"]) for t in ins]
    ops += [Launch(hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:12], prog["latency_us"])
            for data, prog in zip(rep.kernel_programs, rep.programs, strict=True)]
    ops += [Copy("d2h" if c["direction"].startswith("d") else "h2d", c["bytes"]) for c in rep.crossings]
    return ops + [Copy("d2h", t["bytes"]) for t in outs]


def step_us(ops: list, host: Host, machine, cached_launches: bool, cached_copies: bool) -> float:
    return simulate_host(ops, host, machine, cached_launches=cached_launches, cached_copies=cached_copies,
                         warm=True).end_us


def matching_graph_us(ops: list, host: Host, machine, ratio: float) -> float:
    """The ``graph_us`` at which graphs built on both paths make the step ``ratio`` times slower than
    cached ones (bisection: the ratio grows with it)."""
    cached = step_us(ops, host, machine, True, True)
    lo, hi = 0.0, 10_000.0
    for _ in range(40):
        mid = (lo + hi) / 2
        trial = replace(host, runtime=replace(host.runtime, graph_us=mid))
        lo, hi = (mid, hi) if step_us(ops, trial, machine, False, False) < ratio * cached else (lo, mid)
    return (lo + hi) / 2


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=40)
    ap.add_argument("--phase", choices=list(SHAPES), default="decode")
    ap.add_argument("--cache-on-card", action="store_true", help="the KV cache stays on the card (no copies)")
    ap.add_argument("--data-path", choices=["graph", "spyre-inference"], default="graph",
                    help="the step's own copies (graph), or those IBM's serving stack made (ibm_copies)")
    args = ap.parse_args()
    ops = step_ops(args.phase, args.layers, args.cache_on_card)
    if args.data_path == "spyre-inference":
        ops = with_ibm_copies(ops, args.phase, args.layers)
    host, machine = load_host(), load_machine()
    launches = [op for op in ops if isinstance(op, Launch)]
    copies = [op for op in ops if isinstance(op, Copy)]
    print(f"{args.phase}, {args.layers} layers{', KV cache on the card' * args.cache_on_card}, "
          f"{args.data_path} copies: {len(launches)} "
          f"launches of {len({op.program for op in launches})} programs, {len(copies)} copies "
          f"({sum(op.nbytes for op in copies):,} B), {sum(op.card_us for op in launches):,.1f} µs on the card")
    modes = {"built on both paths": (False, False), "off the transfer path": (False, True),
             "off both (cached)": (True, True)}
    times = {name: step_us(ops, host, machine, *mode) for name, mode in modes.items()}
    base = times["built on both paths"]
    for name, us in times.items():
        print(f"  graphs {name:<24} {us:14,.1f} µs per step  gain {base / us - 1:+.1%}")
    transfer, both = IBM[args.phase]
    print(f"IBM, Granite-3.3-8B batch 1 seq 1024: gains {transfer - 1:+.1%} off the transfer path, "
          f"{both - 1:+.1%} off both")
    print(f"  model: {versus(times, transfer, both)}")
    matching = matching_graph_us(ops, host, machine, both)
    print(f"graph_us {host.runtime.graph_us:.1f} in configs/host.toml; x{both:.1f} exactly at {matching:.1f}, "
          "where the model gives:")
    at = replace(host, runtime=replace(host.runtime, graph_us=matching))
    print(f"  {versus({name: step_us(ops, at, machine, *mode) for name, mode in modes.items()}, transfer, both)}")


def versus(times: dict[str, float], transfer: float, both: float) -> str:
    """The model's two gains (before / after - 1) against IBM's, and how far each is from IBM's, as a share."""
    base = times["built on both paths"]
    gains = (base / times["off the transfer path"] - 1, base / times["off both (cached)"] - 1)
    return "; ".join(f"off {what}: gain {g:+.1%} against {ibm - 1:+.1%} ({g / (ibm - 1) - 1:+.1%})"
                     for what, g, ibm in zip(("the transfer path", "both"), gains, (transfer, both), strict=True))


if __name__ == "__main__":
    main()
