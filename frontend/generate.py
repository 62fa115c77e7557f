"""``torch.compile(model, backend="spyre_emu").generate(...)``: generation through the compiled forward.

torch's ``OptimizedModule`` hands every attribute it does not own to the original module, so
``compiled.generate`` is the original module's method, which calls the original, eager module: no
step would be simulated. For modules compiled with this backend, ``generate`` is that same method
run with the module's ``forward`` compiled by the same Dynamo context (backend, options,
``dynamic``) for the call's duration, which is what ``model.forward = torch.compile(model.forward)``
does; the module's own ``forward`` is back afterwards. Calls and ``generate`` of such modules also run
with a Hugging Face model's mixture-of-experts layers as the card runs them (experts.py). Other
backends' modules are untouched.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from torch._dynamo.eval_frame import OptimizedModule, innermost_backend

from .experts import on_card

METHODS = ("generate",)  # methods that call the module's forward step by step


def install(backend: Callable[..., Any]) -> None:
    """Route ``METHODS`` of modules compiled with ``backend`` through their compiled forward, and their
    calls through experts.on_card (once)."""
    plain = OptimizedModule.__getattr__
    if getattr(plain, "_spyre_emu", False):
        return

    @functools.wraps(plain)
    def getattr_(self: OptimizedModule, name: str) -> Any:
        value = plain(self, name)
        if name in METHODS and callable(value) and _compiled_with(self, backend):
            return functools.partial(_with_compiled_forward, self, value)
        return value

    getattr_._spyre_emu = True
    OptimizedModule.__getattr__ = getattr_
    call = OptimizedModule.__call__

    @functools.wraps(call)
    def call_(self: OptimizedModule, *args: Any, **kwargs: Any) -> Any:
        if not _compiled_with(self, backend):
            return call(self, *args, **kwargs)
        with on_card(self._orig_mod):
            return call(self, *args, **kwargs)

    OptimizedModule.__call__ = call_


def _compiled_with(module: OptimizedModule, backend: Callable[..., Any]) -> bool:
    inner = innermost_backend(module.dynamo_ctx.callback)
    return getattr(inner, "compiler_fn", inner) is backend


def _with_compiled_forward(module: OptimizedModule, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    original = module._orig_mod
    own = original.__dict__.get("forward")  # a forward set on the instance (already compiled, perhaps)
    original.forward = module.dynamo_ctx(own if own is not None else original.forward)
    try:
        with on_card(original):
            return method(*args, **kwargs)
    finally:
        if own is None:
            del original.forward
        else:
            original.forward = own
