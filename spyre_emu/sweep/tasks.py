"""What a point of a sweep means: a kernel program to build and simulate, on a machine to configure.

A point's keys are either machine config keys (``section.key``, anything ``--set`` takes) or the
task's own parameters. ``MatmulTask`` builds the calibration sweep's matmul (shapes and a work
division); ``ProgramTask`` takes a kernel program file and overrides its kernels' work divisions
(``division.<kernel>.<dim>``) and its tensors' layouts (``layout.<tensor>``). A point the card
cannot run (a division over more cores than it has) is a row with its error, not the end of the sweep.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ..config import Machine, load_machine
from ..errors import ConfigError, SpyreEmuError
from ..files import read_bytes
from ..pipeline import parse, run
from ..unit_program.load import read_json
from ..validation.workloads import matmul_program
from .space import Point

FIGURES = ("latency_us", "cycles", "cores", "instructions", "pt_utilization", "dram_gb_per_s", "error")
MACHINE_SECTIONS = frozenset(f.name for f in dataclasses.fields(Machine))


def is_machine_key(key: str) -> bool:
    return key.partition(".")[0] in MACHINE_SECTIONS and "." in key


class Task:
    """What a point means: ``simulate`` gives its figures (``FIGURES``, less ``error``); ``__call__``
    turns a point the card cannot run into a row with its error."""

    config: str | None
    NAME: ClassVar[str]
    FIGURES: ClassVar[tuple[str, ...]] = FIGURES

    def check_key(self, key: str, value: Any) -> str | None:
        """Why ``key = value`` cannot be a parameter of this task, or None."""
        raise NotImplementedError

    def simulate(self, params: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
        """The figures of a point: the task's ``params`` on a machine with ``--set`` ``overrides``."""
        raise NotImplementedError

    def require(self, params: dict[str, Any]) -> None:
        """Raise a one-line error if a point with these parameters lacks one the task needs."""

    def fingerprint(self) -> bytes:
        """What a point's result depends on besides the point: the task and the files it reads."""
        config = read_bytes(Path(self.config)) if self.config else b""
        return repr(self).encode() + hashlib.sha256(config).digest()

    def check_keys(self, point: Point, where: str) -> None:
        """Raise a one-line error for the first key of ``point`` that is neither a machine key nor a
        parameter of this task, or whose value the machine config or the task refuses."""
        for key, value in point.items():
            path = f"{where}.{key}" if where else key
            if is_machine_key(key):
                try:
                    load_machine(self.config, [f"{key}={json.dumps(value)}"])
                except ConfigError as exc:
                    raise ConfigError(exc.message, None, path) from None
            elif (why := self.check_key(key, value)) is not None:
                raise ConfigError(why, None, path)

    def __call__(self, point: Point) -> dict[str, Any]:
        overrides = [f"{k}={json.dumps(v)}" for k, v in point.items() if is_machine_key(k)]
        params = {k: v for k, v in point.items() if not is_machine_key(k)}
        try:
            return {**self.simulate(params, overrides), "error": ""}
        except SpyreEmuError as exc:
            return {**dict.fromkeys(self.FIGURES[:-1]), "error": exc.message}


class KernelTask(Task):
    """A point as a kernel program (``kernel_program``), lowered and simulated on the configured machine."""

    def kernel_program(self, params: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def source(self) -> str:
        return self.NAME

    def simulate(self, params: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
        machine = load_machine(self.config, overrides)
        report = run(parse(self.kernel_program(params), machine, self.source()), machine, cache=False).report.data
        return {"latency_us": round(report["latency_us"], 6), "cycles": report["total_cycles"],
                "cores": len({c for k in report["kernels"] for c in k["cores"]}),
                "instructions": report["instructions"], "pt_utilization": report["pt"]["mac_utilization"],
                "dram_gb_per_s": report["dram"]["gb_per_s"]}


@dataclass(frozen=True)
class MatmulTask(KernelTask):
    """C[B, M, N] = A[B, M, K] @ W[B, K, N] in default fp16 layouts (B = 1: a linear layer), divided
    over ``split_b`` x ``split_m`` x ``split_n`` (in sticks) x ``split_k`` cores, as the calibration
    sweep runs it; ``split = [b, m, n, k]`` gives all four at once (a list of measured divisions is one
    grid over ``split``)."""

    config: str | None = None
    NAME: ClassVar[str] = "matmul"
    DEFAULTS: ClassVar[dict[str, int | None]] = {"B": 1, "M": None, "N": None, "K": None,
                                                 "split_b": 1, "split_m": 1, "split_n": 1, "split_k": 1}

    def check_key(self, key: str, value: Any) -> str | None:
        if key == "split":
            ok = isinstance(value, list) and len(value) == 4 and all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in value)
            return None if ok else f"expected [b, m, n, k], four positive integers, got {value!r}"
        if key not in self.DEFAULTS:
            return ("unknown parameter for a matmul sweep; expected a machine key or one of "
                    + ", ".join([*self.DEFAULTS, "split"]))
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            return f"expected a positive integer, got {value!r}"
        return None

    def kernel_program(self, params: dict[str, Any]) -> dict[str, Any]:
        if "split" in params:
            both = [k for k in params if k.startswith("split_")]
            if both:
                raise ConfigError(f"give split or {both[0]}, not both", None, both[0])
            params = {**{k: v for k, v in params.items() if k != "split"},
                      **{f"split_{d}": v for d, v in zip("bmnk", params["split"], strict=True)}}
        p = {**self.DEFAULTS, **params}
        missing = [k for k, v in p.items() if v is None]
        if missing:
            raise ConfigError(f"a matmul sweep needs {', '.join(missing)} (in the space or fixed)")
        split = tuple(p[f"split_{d}"] for d in "bmnk")
        return matmul_program(p["B"], p["M"], p["N"], p["K"], split)

    def require(self, params: dict[str, Any]) -> None:
        self.kernel_program(params)


@dataclass(frozen=True)
class ProgramTask(KernelTask):
    """A kernel program file; ``division.<kernel>.<dim>`` sets that kernel's work division along ``dim``,
    ``layout.<tensor>`` the tensor's device layout as a ``dim_order`` (its last entry is the stick dim)."""

    program: str
    config: str | None = None
    NAME: ClassVar[str] = "program"

    def source(self) -> str:
        return self.program

    def fingerprint(self) -> bytes:
        return super().fingerprint() + hashlib.sha256(read_bytes(Path(self.program))).digest()

    def check_key(self, key: str, value: Any) -> str | None:
        head, _, rest = key.partition(".")
        data = self._data()
        if head == "layout" and rest:
            return self._check_layout(data, rest, value)
        kernel, _, dim = rest.partition(".")
        kernels = {k.get("name"): k for k in data["kernels"] if isinstance(k, dict)}
        if head != "division" or not kernel or not dim or "." in dim:
            return "unknown parameter; expected a machine key, division.<kernel>.<dim> or layout.<tensor>"
        if kernel not in kernels:
            return f"no kernel {kernel!r} in {self.program}; it has {', '.join(map(str, kernels))}"
        if dim not in kernels[kernel].get("dims", {}):
            return f"kernel {kernel!r} has no dim {dim!r}; it has {', '.join(kernels[kernel].get('dims', {}))}"
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            return f"expected a positive integer, got {value!r}"
        return None

    def _check_layout(self, data: dict[str, Any], tensor: str, value: Any) -> str | None:
        tensors = data.get("tensors", {})
        if tensor not in tensors:
            return f"no tensor {tensor!r} in {self.program}; it has {', '.join(tensors)}"
        rank = len(tensors[tensor].get("shape", []))
        if not isinstance(value, list) or sorted(value) != list(range(rank)):
            return f"expected a dim_order, a permutation of 0..{rank - 1}, got {value!r}"
        return None

    def kernel_program(self, params: dict[str, Any]) -> dict[str, Any]:
        data = copy.deepcopy(self._data())
        kernels = {k["name"]: k for k in data["kernels"]}
        for key, value in params.items():
            head, _, rest = key.partition(".")
            if head == "layout":
                data["tensors"][rest]["layout"] = {"dim_order": value}
            else:
                kernel, _, dim = rest.partition(".")
                kernels[kernel].setdefault("work_division", {})[dim] = value
        return data

    def _data(self) -> dict[str, Any]:
        data = read_json(Path(self.program))
        if not isinstance(data, dict) or not isinstance(data.get("kernels"), list):
            raise ConfigError("expected a kernel program (a JSON object with a kernels list)", self.program)
        return data
