"""Every ATen op on a device tensor comes here (the PrivateUse1 backend fallback, one Python function).

An op is one of:
- a **factory** (no device tensor in, the device named): made on the host, its bytes adopted by the card;
- a **copy** between host and card (``copy_``, ``_to_copy`` to or from the CPU): the bytes move, timed on
  the PCIe model; a copy to the host, and ``.item()``, wait for the card first (synchronize); a copy
  within the card is simulated as an identity kernel program (copies.py);
- a **view** (the schema says the result aliases an input and is not written): a device tensor over the
  same allocation, no work;
- **compute**: on the simulated card when the front end has kernels for it (eager.py), else on the CPU,
  counted and named as a fallback. In-place and ``out=`` ops write into their argument and return it.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_map

from . import state

HOST = torch.device("cpu")
CPU_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)


def fallback(op: torch._ops.OpOverload, *args: Any, **kwargs: Any) -> Any:
    dev = state.current()
    args, kwargs = _seeded(op, args, kwargs, dev.generator)
    inputs = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
    on_card = [a for a in inputs if a.device.type == dev.name]
    target = kwargs.get("device")
    if op is torch.ops.aten._local_scalar_dense.default:  # .item(): the host waits, then reads the bytes
        dev.synchronize()
        dev.copy("d2h", args[0].element_size())
    if not on_card:  # a factory
        return _to_device(dev, op(*_host_args(dev, args), **_host_args(dev, kwargs)), inputs)
    if op.overloadpacket is torch.ops.aten.set_:  # geometry over a device storage: no data moves
        return op.redispatch(CPU_KEYS, *args, **kwargs)
    if _is_copy(op, target, inputs, dev.name):
        return _copy(dev, op, args, kwargs)
    returns = op._schema.returns
    if not any(isinstance(r.type, torch.TensorType | torch.ListType | torch.OptionalType) for r in returns):
        return op(*_host_args(dev, args), **_host_args(dev, kwargs))  # scalars and flags (.item(), equal)
    if all(r.alias_info is not None and not r.alias_info.is_write for r in returns):  # views
        return _to_device(dev, op(*_host_args(dev, args), **_host_args(dev, kwargs)), inputs)
    return _compute(dev, op, args, kwargs, inputs)


def _compute(dev: state.Device, op: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any],
             inputs: list[torch.Tensor]) -> Any:
    """The op on the card or the CPU; an in-place or out= op returns the device tensors it wrote, which
    take their host views' new geometry (and bytes) when the op resized them."""
    host_args, host_kwargs = _host_args(dev, args), _host_args(dev, kwargs)
    written = _written(op, args, kwargs)
    outs = [kwargs.get(a.name) for a in op._schema.arguments if a.kwarg_only and a.alias_info and a.alias_info.is_write]
    read = [t.nbytes for t in inputs if t.device.type == dev.name and not any(t is o for o in outs)]
    result = dev.compute(op, host_args, host_kwargs, read)
    if not written:
        return _to_device(dev, result, inputs, view=False)
    for t, host in zip(written, _written(op, host_args, host_kwargs), strict=True):
        if host.untyped_storage().data_ptr() != dev.store.allocation(t).host.data_ptr() or host.shape != t.shape:
            dev.store.repoint(t, host)
    return written[0] if len(written) == 1 else tuple(written)


def _host_args(dev: state.Device, tree: Any) -> Any:
    """Device tensors as their host views, the device as the CPU."""
    def host(a: Any) -> Any:
        if isinstance(a, torch.Tensor) and a.device.type == dev.name:
            return dev.store.host_view(a)
        if isinstance(a, torch.device) and a.type == dev.name:
            return HOST
        return a
    return tree_map(host, tree)


def _seeded(op: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any], generator: torch.Generator
            ) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A random op without a generator draws from the device's (torch.spyre.manual_seed)."""
    names = [a.name for a in op._schema.arguments]
    if "generator" not in names:
        return args, kwargs
    at = names.index("generator")
    if at < len(args):
        return (*args[:at], args[at] if args[at] is not None else generator, *args[at + 1:]), kwargs
    return args, {**kwargs, "generator": kwargs.get("generator") or generator}


def _to_device(dev: state.Device, result: Any, inputs: list[torch.Tensor], view: bool = True) -> Any:
    """The op's host results as device tensors: a view's result stays on its base's bytes, new data is
    adopted (copied first when a host input or, for an op that is no view, a device tensor owns it)."""
    cpu_storages = {a.untyped_storage().data_ptr() for a in inputs if a.device.type == "cpu"}

    def place(r: Any) -> Any:
        if not isinstance(r, torch.Tensor) or r.device.type != "cpu":
            return r
        shared = r.untyped_storage().data_ptr() in cpu_storages or (not view and dev.store.owner(r) is not None)
        return dev.store.place(r.clone() if shared else r)
    return tree_map(place, result)


def _written(op: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """The arguments an in-place or out= op writes and returns (none for other ops)."""
    returns = op._schema.returns
    if not returns or returns[0].alias_info is None or not returns[0].alias_info.is_write:
        return []
    return [kwargs[a.name] if a.name in kwargs else args[i] for i, a in enumerate(op._schema.arguments)
            if a.alias_info is not None and a.alias_info.is_write]


def _is_copy(op: torch._ops.OpOverload, target: Any, inputs: list[torch.Tensor], name: str) -> bool:
    devices = {a.device.type for a in inputs}
    if op is torch.ops.aten._to_copy.default:
        return target is not None and torch.device(target).type != name
    return op is torch.ops.aten._copy_from.default or (op.overloadpacket is torch.ops.aten.copy_ and len(devices) > 1)


def _copy(dev: state.Device, op: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Bytes between host and card: to the host after the card's work is done."""
    if op is torch.ops.aten._to_copy.default:
        dev.synchronize()
        dev.copy("d2h", args[0].nbytes)
        return op(*_host_args(dev, args), **_host_args(dev, kwargs))
    src, dst = (args[0], args[1]) if op.overloadpacket is torch.ops.aten._copy_from else (args[1], args[0])
    to_card, from_card = dst.device.type == dev.name, src.device.type == dev.name
    nbytes = src.numel() * src.element_size()
    if to_card and from_card:
        dev.copy_on_card(nbytes)
    elif to_card:
        dev.copy("h2d", nbytes)
    else:
        dev.synchronize()
        dev.copy("d2h", nbytes)
    _host_args(dev, dst).copy_(_host_args(dev, src))
    return dst
