"""export_program: a model's kernel programs as files that ``spyre-emu run`` takes.

The model is compiled and called once on the example inputs; each kernel program that ran is
written as JSON, with its input tensors as .npy files beside it (``data``), so that
``spyre-emu run --functional`` reproduces the call's results. A model has a kernel program per
launch (kernels that hand over through DRAM, or around a host step, are separate launches): they
are written as ``name.json``, ``name.1.json``, ... in call order. Meta example inputs give programs
without data (timing only).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from spyre_emu.errors import SpyreEmuError

from .report import capture


def export_program(model: Any, example_inputs: tuple | list, path: str | Path,
                   options: dict[str, Any] | None = None, **call_kwargs: Any) -> list[Path]:
    """Compile ``model``, call it once (``call_kwargs`` go to the call, e.g. ``use_cache=False``), write
    the kernel programs of every graph it ran, in call order (graph breaks make several graphs);
    returns the files written."""
    path = Path(path)
    with torch.no_grad(), capture() as reports:
        torch.compile(model, backend="spyre_emu", options=options, dynamic=False)(*example_inputs, **call_kwargs)
    programs = [(program, rep.program_inputs[i] if i < len(rep.program_inputs) else {})
                for rep in reports for i, program in enumerate(rep.kernel_programs)]
    if not programs:
        raise SpyreEmuError("the model runs no kernel on the card; there is no kernel program to write", str(path))
    return [_write(path if i == 0 else path.with_suffix(f".{i}{path.suffix}"), program, data)
            for i, (program, data) in enumerate(programs)]


def _write(target: Path, program: dict[str, Any], inputs: dict[str, np.ndarray]) -> Path:
    program = json.loads(json.dumps(program))  # a copy: data paths are added below
    folder = target.with_name(target.stem + "_data")
    if inputs:
        folder.mkdir(parents=True, exist_ok=True)
    for name, array in inputs.items():
        np.save(folder / f"{name}.npy", array, allow_pickle=False)
        program["tensors"][name]["data"] = f"{folder.name}/{name}.npy"
    target.write_text(json.dumps(program, indent=1) + "\n")
    return target
