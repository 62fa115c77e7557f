"""JSON -> KernelProgram: schema, layouts, tensor references and op arity, each error with its JSON path."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

from ..errors import ProgramError, SpyreEmuError
from ..files import program_input
from ..unit_program.load import StrictValidator, json_path, read_json
from .layout import TensorLayout, check_layout, default_layout
from .model import Kernel, KernelProgram, Tensor
from .ops import ATTRS, OPS

FORMAT = "spyre-emu.kernel-program"


@cache
def schema() -> dict[str, Any]:
    return json.loads(resources.files(__package__).joinpath("schema.json").read_text())


def load_kernel_program(path: str | Path) -> KernelProgram:
    path = Path(path)
    return parse_kernel_program(read_json(path), str(path))


def parse_kernel_program(data: Any, source: str = "<program>") -> KernelProgram:
    error = jsonschema.exceptions.best_match(StrictValidator(schema()).iter_errors(data))
    if error is not None:
        raise ProgramError(error.message, source, json_path(error.absolute_path))
    base = Path(source).parent
    tensors = {name: _tensor(name, spec, base, source) for name, spec in data["tensors"].items()}
    kernels = tuple(_kernel(i, spec, tensors, source) for i, spec in enumerate(data["kernels"]))
    _check_names(kernels, source)
    _check_order(tensors, kernels, source)
    return KernelProgram(source, tensors, kernels, data.get("host_transfers", False))


def _tensor(name: str, spec: dict[str, Any], base: Path, source: str) -> Tensor:
    where = f"tensors.{name}"
    layout_spec = spec.get("layout", {})
    try:
        if "device_size" in layout_spec:
            layout = TensorLayout(tuple(spec["shape"]), spec["dtype"], tuple(layout_spec["device_size"]),
                                  tuple(layout_spec["stride_map"]))
            check_layout(layout, file=source, path=where + ".layout")
        else:
            layout = default_layout(spec["shape"], spec["dtype"], layout_spec.get("dim_order"),
                                    file=source, path=where + ".layout")
    except ProgramError:
        raise
    except SpyreEmuError as exc:
        raise ProgramError(exc.message, source, where + ".layout") from None
    space = spec.get("space", "dram")
    for field, needs in (("dram_address", "dram"), ("lx_offset", "lx"), ("in_place_of", "lx")):
        if field in spec and space != needs:
            raise ProgramError(f"{field} places a tensor in {needs}; this one is in {space}", source,
                               f"{where}.{field}")
    for field in ("dram_address", "lx_offset"):
        if spec.get(field, 0) % 128:
            raise ProgramError(f"{field} {spec[field]} is not a multiple of 128 B", source, f"{where}.{field}")
    data = program_input(base, spec["data"], source, where + ".data") if "data" in spec else None
    return Tensor(name, layout, spec["role"], space, data, spec.get("init", "zeros"), spec.get("dram_address"),
                  spec.get("lx_offset"), spec.get("in_place_of"))


def _kernel(i: int, spec: dict[str, Any], tensors: dict[str, Tensor], source: str) -> Kernel:
    where = f"kernels[{i}]"
    for field in ("inputs", "outputs"):
        for j, name in enumerate(spec[field]):
            if name not in tensors:
                raise ProgramError(f"unknown tensor {name!r}", source, f"{where}.{field}[{j}]")
    op = OPS[spec["op"]]
    if len(spec["inputs"]) < op.arity if op.or_more else len(spec["inputs"]) != op.arity:
        raise ProgramError(f"{spec['op']} takes {op.arity}{' or more' if op.or_more else ''} inputs, got "
                           f"{len(spec['inputs'])}", source, where + ".inputs")
    for dim in spec["work_division"]:
        if dim not in spec["dims"]:
            raise ProgramError(f"work_division names {dim!r}, which is not in dims", source,
                               f"{where}.work_division.{dim}")
    slices = {dim: spec["work_division"].get(dim, 1) for dim in spec["dims"]}
    return Kernel(spec.get("name", f"k{i}"), spec["op"], tuple(spec["inputs"]), tuple(spec["outputs"]),
                  dict(spec["dims"]), slices, where, _attrs(spec, where, source), spec.get("steps"),
                  spec.get("uneven", False))


def _attrs(spec: dict[str, Any], where: str, source: str) -> dict[str, Any]:
    defaults = ATTRS.get(spec["op"], {})
    for name, value in spec.get("attrs", {}).items():
        if name not in defaults:
            raise ProgramError(f"{spec['op']} takes no attribute {name!r}"
                               + (f" (it takes {', '.join(defaults)})" if defaults else ""), source,
                               f"{where}.attrs.{name}")
        if _kind(value) != _kind(defaults[name]):
            raise ProgramError(f"attribute {name!r} must be a {_kind(defaults[name])}", source, f"{where}.attrs.{name}")
    return {**defaults, **spec.get("attrs", {})}


def _kind(value: Any) -> str:
    return "bool" if isinstance(value, bool) else "list" if isinstance(value, list) else "number"


def _check_names(kernels: tuple[Kernel, ...], source: str) -> None:
    """Reports, compare and check key kernels by name: a second kernel of the same name would vanish into the first."""
    first: dict[str, str] = {}
    for kernel in kernels:
        if kernel.name in first:
            raise ProgramError(f"kernel name {kernel.name!r} is already used by {first[kernel.name]}", source,
                               kernel.path + ".name")
        first[kernel.name] = kernel.path


def _check_order(tensors: dict[str, Tensor], kernels: tuple[Kernel, ...], source: str) -> None:
    """Intermediates and outputs are read only after a kernel wrote them; inputs are never written."""
    written: set[str] = set()
    for kernel in kernels:
        for j, name in enumerate(kernel.inputs):
            if tensors[name].role in ("intermediate", "output") and name not in written:
                raise ProgramError(f"tensor {name!r} is used before it is written ({tensors[name].role}: no earlier "
                                   "kernel outputs it)", source, f"{kernel.path}.inputs[{j}]")
        for name in kernel.outputs:
            if tensors[name].role in ("input", "constant"):
                raise ProgramError(f"tensor {name!r} is an {tensors[name].role}; kernels write only intermediates "
                                   "and outputs", source, f"{kernel.path}.outputs[0]")
            written.add(name)
