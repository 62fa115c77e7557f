"""What each kernel op the front end emits means, written in torch: the plain reference.

A kernel the lowering refuses runs on the CPU through this table (a counted fallback), as does a
kernel of constants (folded at compile time), and the tests read it as the definition of the
ops. Values are computed in float32 and rounded to the output dtype once, as the card's SFU does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

Ref = Callable[..., torch.Tensor]


def _norm(x: torch.Tensor, eps: float, rms: bool) -> torch.Tensor:
    centred = x if rms else x - x.mean(-1, keepdim=True)
    return centred * torch.rsqrt(centred.pow(2).mean(-1, keepdim=True) + eps)


def _softmax(x: torch.Tensor, safe: bool) -> torch.Tensor:
    out = torch.softmax(x, -1)
    return out.masked_fill(x.amax(-1, keepdim=True) == -torch.inf, 0.0) if safe else out


def _reduce(fn: Callable[..., torch.Tensor]) -> Ref:
    def ref(x: torch.Tensor, *, dims: tuple[int, ...]) -> torch.Tensor:
        return fn(x, dims, keepdim=True)
    return ref


def _window(x: torch.Tensor, *, slice: tuple[tuple[tuple[int, int, int], ...], bool]) -> torch.Tensor:
    """A restickify of pass 1 or a query tile's window: ``x`` narrowed along each (dim, start, stop), transposed to
    (sliced dim, rows) when asked (one dim, the last)."""
    cuts, transposed = slice
    for dim, start, stop in cuts:
        x = x.narrow(dim, start, stop - start)
    return x.reshape(-1, x.shape[-1]).T if transposed else x


def patches(x: torch.Tensor, *, kernel: list[int], stride: list[int], padding: list[int], dilation: list[int],
            pad: float, image: list[int] | None = None) -> torch.Tensor:
    """The windows of a channels-last image (N, H, W, C) as (N·OH·OW, KH·KW, C), ``pad`` outside it."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    x = x if image is None else x.reshape(*image, -1)
    n, h, w, c = x.shape
    oh, ow = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1, (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    xp = torch.nn.functional.pad(x, (0, 0, pw, pw, ph, ph), value=pad)
    rows = [xp[:, i * dh:i * dh + (oh - 1) * sh + 1:sh, j * dw:j * dw + (ow - 1) * sw + 1:sw]
            for i in range(kh) for j in range(kw)]
    return torch.stack(rows, 3).reshape(n * oh * ow, kh * kw, c)


UNARY: dict[str, Ref] = {
    "neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt, "reciprocal": torch.reciprocal, "tanh": torch.tanh, "sigmoid": torch.sigmoid,
    "silu": torch.nn.functional.silu, "gelufwd": torch.nn.functional.gelu, "relufwd": torch.relu,
    "cos": torch.cos, "sin": torch.sin, "identity": lambda x: x, "to_dtype": lambda x: x,
}
BINARY: dict[str, Ref] = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "realdiv": torch.div, "maximum": torch.maximum,
    "minimum": torch.minimum, "greater": torch.gt, "greaterequal": torch.ge, "less": torch.lt,
    "lessequal": torch.le, "equal": torch.eq, "notequal": torch.ne,
}
COMPARISONS = {"greater", "greaterequal", "less", "lessequal", "equal", "notequal"}

REFERENCE: dict[str, Ref] = {
    **UNARY, **BINARY,
    "where3": lambda c, a, b: torch.where(c != 0, a, b),
    "sum": _reduce(torch.sum), "mean": _reduce(torch.mean), "max": _reduce(torch.amax), "min": _reduce(torch.amin),
    "batchmatmul": torch.matmul, "ReStickifyOpHBM": _window,
    "embedding": lambda table, index: table[index.long()], "patches": patches,
    "cat": lambda *parts, along: torch.cat(parts, along),
    "softmax": lambda x, *, safe=False: _softmax(x, safe),
    "layernorm": lambda x, w, b, *, eps: _norm(x, eps, False) * w + b,
    "rmsnorm": lambda x, w, *, eps: _norm(x, eps, True) * w,
}


def run_reference(op: str, inputs: list[torch.Tensor], attrs: dict[str, Any], dtype: torch.dtype,
                  shape: tuple[int, ...]) -> torch.Tensor:
    """One kernel computed by torch on the CPU: float32 inside, rounded to ``dtype`` at the end,
    broadcast to the output ``shape`` (an ``identity`` kernel copies its input into a larger shape)."""
    out = REFERENCE[op](*(t.float() for t in inputs), **attrs)
    return out.to(dtype).reshape(shape) if op == "patches" else out.to(dtype).expand(shape)
