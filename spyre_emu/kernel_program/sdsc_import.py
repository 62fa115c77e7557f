"""torch-spyre compiler output (``sdsc_*.json``, optional ``bundle.mlir``) -> kernel program JSON.

The field-by-field reading behind every rule here is docs/sdsc-format.md. In short: one kernel
per SDSC file, in the bundle's execution order (file order without a bundle); its op is the
``dscs_`` key, its iteration space ``N_``, its work division ``numWkSlicesPerDim_``. DRAM ("hbm")
tensors become the kernel arguments ``arg0, arg1, ...``: through the bundle's symbols when there
is one, else in file then ``ldsIdx_`` order. Host shapes come from the coordinate folds and the
host dim order from ``layoutDimOrder_``. Every rule the importer relies on is checked against the
file (core -> slice map, per-core DRAM offsets), so a kernel it misreads fails loudly instead of
simulating something else. Fields it does not know are listed in the program's ``note``.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from ..config import DTYPE_BYTES
from ..errors import ProgramError
from ..files import program_input
from ..unit_program.load import read_json
from .layout import default_layout, elems_per_stick
from .load import FORMAT, parse_kernel_program
from .ops import OPS
from .sdsc_bundle import read_bundle

# IBM's DLFloat16 (SEN169) is the card's fp16: numerics/ stores every fp16 tensor on the card as DLFloat16.
DTYPES = {"SEN169_FP16": "fp16", "IEEE_FP32": "fp32"}

# Keys read or understood (docs/sdsc-format.md sections 2-3); any other key becomes a note.
KNOWN = {
    "sdsc": {"debug_handle_", "sdscFoldProps_", "sdscFolds_", "coreFoldProp_", "coreletFoldProp_",
             "numCoresUsed_", "coreIdToDsc_", "numWkSlicesPerDim_", "coreIdToWkSlice_",
             "coreIdToDscSchedule", "dscs_"},
    "dsc": {"numCoresUsed_", "numCoreletsUsed_", "coreIdsUsed_", "N_", "coordinateMasking_",
            "maskingConstId_", "dataStageParam_", "primaryDsInfo_", "scheduleTree_", "labeledDs_",
            "constantInfo_", "computeOp_"},
    "node": {"nodeType_", "name_", "prev_", "ldsIdx_", "component_", "isStartAddrSymbolic_",
             "layoutDimOrder_", "maxDimSizes_", "indirectAllocType_", "startAddressCoreCorelet_",
             "coordinates_"},
    "lds": {"ldsIdx_", "dsName_", "dsType_", "scale_", "wordLength", "dataFormat_", "memOrg_"},
    "op": {"exUnit", "opFuncName", "attributes_", "location", "inputLabeledDs", "outputLabeledDs"},
}



class _Importer:
    """State of one import: the directory, notes gathered on the way, and the arguments found."""

    def __init__(self, directory: Path):
        self.dir = directory
        self.notes: list[str] = []
        self.unknown: set[str] = set()
        self.tensors: dict[str, dict[str, Any]] = {}
        self.written: set[str] = set()
        self.labels: dict[str, list[str]] = {}  # argument -> SDSC dim label of each host dim
        self.lx: dict[int, str] = {}  # LX start offset -> the tensor written there last

    def fail(self, message: str, file: str | None = None, path: str | None = None) -> ProgramError:
        return ProgramError(message, str(self.dir / file) if file else str(self.dir), path)


def import_sdsc(directory: str | Path) -> dict[str, Any]:
    """The kernel program (a JSON-ready dict, already validated) of one torch-spyre kernel folder."""
    imp = _Importer(Path(directory))
    if not imp.dir.is_dir():
        raise imp.fail("not a directory")
    bundle = read_bundle(imp.dir)
    files = [name for name, _ in bundle] if bundle is not None else _sdsc_files(imp)
    symbols = dict(bundle) if bundle is not None else None
    if bundle is None:
        imp.notes.append("no bundle.mlir: kernel arguments follow file and ldsIdx_ order; DRAM offsets unchecked")
    kernels = [_guarded_kernel(imp, i, name, symbols.get(name) if symbols else None) for i, name in enumerate(files)]
    for name, spec in imp.tensors.items():
        if spec.get("space") != "lx":
            spec["role"] = "output" if name in imp.written else "input"
    if imp.unknown:
        imp.notes.append("ignored unknown SDSC fields: " + ", ".join(sorted(imp.unknown)))
    program = {"format": FORMAT, "version": 1, "note": "\n".join(imp.notes),
               "tensors": dict(sorted(imp.tensors.items(), key=_tensor_order)), "kernels": kernels}
    parse_kernel_program(program, str(imp.dir))  # what we write must load
    return program


def _tensor_order(item: tuple[str, Any]) -> tuple[int, int]:
    """Kernel arguments by number, then the LX intermediates (in the order they were written)."""
    name, spec = item
    return (1, 0) if spec.get("space") == "lx" else (0, int(name[3:]))


def _guarded_kernel(imp: _Importer, i: int, name: str, symbols: dict | None) -> dict[str, Any]:
    """A field missing or of the wrong type is a one-line error naming the file, not a traceback."""
    try:
        return _kernel(imp, i, name, symbols)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, StopIteration) as exc:
        raise imp.fail(f"malformed SDSC ({type(exc).__name__}: {exc})", name) from None


def _sdsc_files(imp: _Importer) -> list[str]:
    """``sdsc_<i>.json`` in numeric order: the execution order when there is no bundle."""
    found = [(int(m.group(1)), p.name) for p in imp.dir.iterdir() if (m := re.fullmatch(r"sdsc_(\d+)\.json", p.name))]
    if not found:
        raise imp.fail("no sdsc_*.json files (is this a torch-spyre kernel folder?)")
    return [name for _, name in sorted(found)]


def _read_json(imp: _Importer, name: str) -> Any:
    """An SDSC file: a name bundle.mlir gives must stay inside the folder (the threat model: docs/reliability.md)."""
    return read_json(program_input(imp.dir, name, str(imp.dir / "bundle.mlir"), "sdsc_filename", ""))


# --- one SDSC file -> one kernel --------------------------------------------------------------

def _kernel(imp: _Importer, i: int, name: str, symbols: dict[int, tuple[int, int]] | None) -> dict[str, Any]:
    data = _read_json(imp, name)
    if not isinstance(data, dict) or len(data) != 1:
        raise imp.fail("expected one key '<i>_<op>' holding the SuperDsc", name)
    key, sdsc = next(iter(data.items()))
    _unknown(imp, sdsc, "sdsc", key)
    dsc_list = sdsc.get("dscs_", [])
    if len(dsc_list) != 1 or len(dsc_list[0]) != 1 or set(sdsc.get("coreIdToDsc_", {}).values()) - {0}:
        raise imp.fail("only one DSC per SDSC is imported", name, f"{key}.dscs_")
    op, dsc = next(iter(dsc_list[0].items()))
    where = f"{key}.dscs_[0].{op}"
    if op not in OPS:
        raise imp.fail(f"op {op!r} has no entry in spyre-emu's op table", name, where)
    _unknown(imp, dsc, "dsc", where)
    _check_supported(imp, name, key, sdsc, dsc)
    dims = {k.rstrip("_"): int(v) for k, v in dsc["N_"].items() if k != "name_"}
    role_in, role_out = _roles(imp, name, where, dsc)
    division = _division(imp, name, key, sdsc)
    args = _tensors(imp, name, where, dsc, symbols, division, role_out[0])
    out = args[role_out[0]]
    order = imp.labels[out] + [d for d in dims if d not in imp.labels[out]]
    slices = {d: division.get(d, 1) for d in order}
    _check_cores(imp, name, key, sdsc, slices)
    imp.written.add(out)
    return {"name": f"sdsc{i}_{op}", "op": op, "inputs": [args[t] for t in role_in if t not in role_out],
            "outputs": [out], "dims": {d: dims[d] for d in order}, "work_division": slices}


def _unknown(imp: _Importer, obj: dict[str, Any], kind: str, where: str) -> None:
    imp.unknown.update(f"{where.rsplit('.', maxsplit=1)[-1]}.{k}" for k in obj if k not in KNOWN[kind])


def _check_supported(imp: _Importer, name: str, key: str, sdsc: dict, dsc: dict) -> None:
    """Refuse what the files can say but the kernel program cannot (yet) express."""
    steps = {len(s) for s in sdsc.get("coreIdToDscSchedule", {}).values()}
    time = math.prod(p.get("factor_", 1) for p in sdsc.get("sdscFoldProps_", []))
    if steps - {1} or time != 1:
        raise imp.fail("more than one schedule step or time fold is not imported yet", name, key)
    if dsc.get("coordinateMasking_"):
        raise imp.fail("padding masks (coordinateMasking_) are not imported yet", name, key)
    stage = dsc.get("dataStageParam_", {}).get("0", {})
    if stage.get("ss_") != stage.get("el_"):
        raise imp.fail("uneven work slices (ss_ != el_) are not imported yet", name, key)
    constants = dsc.get("constantInfo_")
    if isinstance(constants, dict) and constants:
        names = ", ".join(c.get("name_", "?") for c in constants.values())
        imp.notes.append(f"{name}: constants ({names}) dropped; the op implies them (e.g. mean's 1/N)")


def _roles(imp: _Importer, name: str, where: str, dsc: dict) -> tuple[list[int], list[int]]:
    """Input and output ``ldsIdx_`` of the compute op; a reduction also lists its output as an
    input (an accumulator), which the kernel program does not repeat."""
    ops = dsc.get("computeOp_", [])
    if len(ops) != 1:
        raise imp.fail("expected exactly one computeOp_", name, where + ".computeOp_")
    _unknown(imp, ops[0], "op", "computeOp_")
    idx = [[int(s.rsplit("-idx", 1)[1]) for s in ops[0][f] if "-idx" in s]
           for f in ("inputLabeledDs", "outputLabeledDs")]
    if len(idx[1]) != 1:
        raise imp.fail("expected exactly one output", name, where + ".computeOp_[0].outputLabeledDs")
    return idx[0], idx[1]


# --- tensors ------------------------------------------------------------------------------------

def _tensors(imp: _Importer, name: str, where: str, dsc: dict, symbols: dict | None,
             division: dict[str, int], output: int) -> dict[int, str]:
    """Each allocate node -> a tensor name (registered in ``imp.tensors``); ``ldsIdx_ -> name``.

    DRAM ("hbm") tensors are kernel arguments; LX tensors are named by their LX offset and
    written version, so a kernel reads what the last writer of that offset left there (inputs are
    resolved before the output, which may reuse an input's offset)."""
    lds = {d["ldsIdx_"]: d for d in dsc["labeledDs_"]}
    args: dict[int, str] = {}
    nodes = sorted(enumerate(dsc["scheduleTree_"]), key=lambda jn: jn[1].get("ldsIdx_") == output)
    for j, node in nodes:
        path = f"{where}.scheduleTree_[{j}]"
        _unknown(imp, node, "node", "scheduleTree_[]")
        if node.get("nodeType_") != "allocate" or node.get("indirectAllocType_", "no_indirection") != "no_indirection":
            raise imp.fail(f"schedule node {node.get('name_')!r} is not a plain allocate", name, path)
        desc = lds[node["ldsIdx_"]]
        _unknown(imp, desc, "lds", "labeledDs_[]")
        spec, labels = _tensor_spec(imp, name, path, node, desc)
        starts = _starts(node)
        if node["component_"] == "lx":
            arg = _lx_tensor(imp, name, path, starts, spec, node["ldsIdx_"] == output)
        elif node["component_"] == "hbm":
            arg = _argument(imp, name, path, starts, symbols)
            _merge(imp, name, path, arg, spec)
            if symbols is not None:
                _check_offsets(imp, name, path, spec, labels, node, starts, symbols, division)
        else:
            raise imp.fail(f"{desc['dsName_']} lives in {node['component_']!r}; expected hbm or lx", name, path)
        imp.labels[arg] = labels
        args[node["ldsIdx_"]] = arg
    return args


def _lx_tensor(imp: _Importer, name: str, path: str, starts: dict[int, int], spec: dict[str, Any],
               written: bool) -> str:
    """The LX tensor at this node's offset: a new version when the kernel writes it."""
    offsets = set(starts.values())
    if len(offsets) != 1:
        raise imp.fail(f"an LX tensor at different offsets per core {sorted(offsets)} is not imported", name, path)
    offset = offsets.pop()
    if not written:
        if offset not in imp.lx:
            raise imp.fail(f"reads LX offset {offset} before any kernel wrote it", name, path)
        return imp.lx[offset]
    arg = f"lx{offset}" + (f"_{sum(1 for t in imp.tensors if t.startswith(f'lx{offset}'))}"
                           if f"lx{offset}" in imp.tensors else "")
    imp.tensors[arg] = {**spec, "role": "intermediate", "space": "lx"}
    imp.lx[offset] = arg
    if not any("LX offsets" in n for n in imp.notes):
        imp.notes.append("LX offsets of the files name the on-chip tensors; spyre-emu allocates their LX itself")
    return arg


def _tensor_spec(imp: _Importer, name: str, path: str, node: dict, desc: dict) -> tuple[dict[str, Any], list[str]]:
    """Host shape, dtype and layout of one tensor.

    The host dims are ordered so that the device layout is torch-spyre's default rule: the
    first (innermost) entry of ``layoutDimOrder_`` is the first host dim and the rest follow
    outer to inner, the stick dim last; the layout is then verified to be that default.
    """
    fmt = desc.get("dataFormat_")
    if fmt not in DTYPES:
        raise imp.fail(f"dataFormat_ {fmt!r} is not imported (known: {', '.join(DTYPES)})", name, path)
    dtype = DTYPES[fmt]
    if fmt == "SEN169_FP16" and not any("DLFloat16" in n for n in imp.notes):
        imp.notes.append("SEN169_FP16 (IBM DLFloat16) imported as fp16, as the files say, even where the "
                         "front end asked for bf16 (torch-spyre's mul_bf16 example is labelled SEN169_FP16)")
    order = node["layoutDimOrder_"]
    info = node["coordinates_"]["coordInfo"]
    labels = [order[0], *reversed(order[1:])]
    stick = _stick_label(node, info)
    if stick != labels[-1]:
        raise imp.fail(f"stick dim {stick!r} is not the last host dim: non-default layouts are not imported yet",
                       name, path)
    shape = [_extent(info[d]["folds"]) for d in labels]
    layout = default_layout(shape, dtype)
    device = _device_dims(labels, shape, order, dtype)
    if list(layout.device_size) != [n for _, n, _ in device] + [elems_per_stick(dtype)]:
        raise imp.fail(f"device sizes {[n for _, n, _ in device]} are not torch-spyre's default for "
                       f"shape {shape}", name, path)
    return {"shape": shape, "dtype": dtype, "layout": {"dim_order": list(range(len(shape)))}}, labels


def _stick_label(node: dict, info: dict) -> str:
    """The dim whose folds have a stick level (``elem_arr_1``); the innermost layout dim if none."""
    for label in node["layoutDimOrder_"]:
        if any(a["label_"] == "elem_arr_1" for a in info[label]["folds"]["dim_prop_attr"]):
            return label
    return node["layoutDimOrder_"][0]


def _extent(folds: dict) -> int:
    """1 + the largest coordinate the fold levels reach: the dim's extent in this tensor.

    Coordinates are sums of ``alpha_ * index``; a reduced dim has alpha 0 and extent 1.
    """
    top = 0
    for attr, func in zip(folds["dim_prop_attr"], folds["dim_prop_func"], strict=True):
        top += func.get("Affine", {}).get("alpha_", 0) * (attr["factor_"] - 1)
    return top + 1


def _device_dims(labels: list[str], shape: list[int], order: list[str], dtype: str) -> list[tuple[str, int, int]]:
    """Device dims outside the stick, outer first, from ``layoutDimOrder_`` (innermost first):
    (label, size, coordinate step), the stick dim counted in sticks."""
    eps, stick = elems_per_stick(dtype), labels[-1]
    sizes = dict(zip(labels, shape, strict=True))
    return [(d, -(-sizes[d] // eps) if d == stick else sizes[d], eps if d == stick else 1) for d in reversed(order)]


def _starts(node: dict) -> dict[int, int]:
    """Per core, the start value of the allocate node: a symbol id (< 0) or a literal address."""
    data = node["startAddressCoreCorelet_"]["data_"]
    return {int(k.strip("[]").split(",")[0]): int(v) for k, v in data.items()}


def _argument(imp: _Importer, name: str, path: str, starts: dict[int, int], symbols: dict | None) -> str:
    """The kernel argument of a DRAM tensor: from the bundle's symbols, else the next unused one."""
    if symbols is None:
        return f"arg{len(imp.tensors)}"
    missing = [s for s in starts.values() if s not in symbols]
    if missing:
        raise imp.fail(f"symbol {missing[0]} is not bound by bundle.mlir", name, path)
    found = {symbols[s][0] for s in starts.values()}
    if len(found) != 1:
        raise imp.fail(f"one tensor, several kernel arguments {sorted(found)}", name, path)
    return f"arg{found.pop()}"


def _merge(imp: _Importer, name: str, path: str, arg: str, spec: dict[str, Any]) -> None:
    """Register an argument; one used by several SDSCs must look the same in each."""
    seen = imp.tensors.setdefault(arg, spec)
    if {k: seen[k] for k in ("shape", "dtype")} != {k: spec[k] for k in ("shape", "dtype")}:
        raise imp.fail(f"{arg} is {seen['dtype']}{seen['shape']} elsewhere, {spec['dtype']}{spec['shape']} here",
                       name, path)


def _check_offsets(imp: _Importer, name: str, path: str, spec: dict, labels: list[str], node: dict,
                   starts: dict[int, int], symbols: dict, division: dict[str, int]) -> None:
    """Each core's DRAM start (argument + offset, from the bundle) must be where our layout puts the
    first element of that core's slice: this is what proves the host order and layout right."""
    info = node["coordinates_"]["coordInfo"]
    device = _device_dims(labels, spec["shape"], node["layoutDimOrder_"], spec["dtype"])
    stick_bytes = elems_per_stick(spec["dtype"]) * DTYPE_BYTES[spec["dtype"]]
    byte_strides = [math.prod(n for _, n, _ in device[j + 1:]) * stick_bytes for j in range(len(device))]
    slices = _core_slices(division)
    for core, symbol in sorted(starts.items()):
        coord = {d: _core_step(info[d]["folds"]) * slices[core].get(d, 0) for d in labels}
        offset = sum((coord[d] // step) % n * s for (d, n, step), s in zip(device, byte_strides, strict=True))
        offset += coord[labels[-1]] % elems_per_stick(spec["dtype"]) * DTYPE_BYTES[spec["dtype"]]
        if offset != symbols[symbol][1]:
            raise imp.fail(f"core {core} starts at byte {symbols[symbol][1]} in the bundle, at {offset} in the "
                           f"imported layout", name, path)


def _core_step(folds: dict) -> int:
    """How far one work slice moves along a dim (``alpha_`` of the core fold; 0 if not split)."""
    for attr, func in zip(folds["dim_prop_attr"], folds["dim_prop_func"], strict=True):
        if attr["label_"] == "core_fold" and attr["factor_"] > 1:
            return func.get("Affine", {}).get("alpha_", 0)
    return 0


# --- work division ------------------------------------------------------------------------------

def _core_slices(slices: dict[str, int]) -> list[dict[str, int]]:
    """Our lowering's rule: core c takes the mixed-radix digits of c, first dim fastest."""
    out = []
    for core in range(math.prod(slices.values())):
        digits, rest = {}, core
        for d, n in slices.items():
            rest, digits[d] = divmod(rest, n)
        out.append(digits)
    return out


def _division(imp: _Importer, name: str, key: str, sdsc: dict) -> dict[str, int]:
    """``numWkSlicesPerDim_``, checked before anything walks its cores: whole positive counts whose
    product is ``numCoresUsed_`` (a huge count would otherwise enumerate billions of cores)."""
    raw = sdsc.get("numWkSlicesPerDim_")
    cores = sdsc.get("numCoresUsed_")
    if not isinstance(raw, dict) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1
                                            for v in raw.values()) or math.prod(raw.values()) != cores:
        raise imp.fail(f"expected whole positive slice counts whose product is numCoresUsed_ ({cores})", name,
                       f"{key}.numWkSlicesPerDim_")
    return raw


def _check_cores(imp: _Importer, name: str, key: str, sdsc: dict, slices: dict[str, int]) -> None:
    """SDSC's explicit ``coreIdToWkSlice_`` must equal what our lowering will assign."""
    given = sdsc.get("coreIdToWkSlice_", {})
    ours = _core_slices(slices)
    if sorted(int(c) for c in given) != list(range(len(ours))) or sdsc.get("numCoresUsed_") != len(ours):
        raise imp.fail(f"cores {sorted(int(c) for c in given)} do not match the {len(ours)} slices", name,
                       f"{key}.coreIdToWkSlice_")
    for core, mine in enumerate(ours):
        theirs = {d: int(v) for d, v in given[str(core)].items()}
        if any(theirs.get(d, 0) != v for d, v in mine.items()):
            raise imp.fail(f"core {core} owns slice {theirs}; with dims in host order {list(slices)} our "
                           f"lowering would give it {mine}", name, f"{key}.coreIdToWkSlice_.{core}")

