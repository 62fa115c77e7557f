"""A sweep over a torch model: each point compiles it with ``backend="spyre_emu"`` and times one call.

``ModelTask("package.module:function")`` calls that function with the point's ``model.<name>``
values as keyword arguments; it returns the model and its example inputs (meta tensors keep a large
model cheap: only timing is simulated). ``options.<name>`` sets a backend option (``cores``,
``fallback``, ...) and machine keys (``section.key``) become the options' ``set``. Lives here, not in
``spyre_emu.sweep``, because it imports torch.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from spyre_emu.errors import ConfigError
from spyre_emu.sweep.tasks import Task

from .options import parse_options
from .report import last_report

SET_BY_SWEEP = {"functional", "set", "machine"}  # timing only; machine keys and the task's config


@dataclass(frozen=True)
class ModelTask(Task):
    factory: str
    config: str | None = None
    NAME: ClassVar[str] = "model"
    FIGURES: ClassVar[tuple[str, ...]] = ("latency_us", "cycles", "kernels", "fallbacks", "round_trips",
                                          "card_flop_share", "error")

    def check_key(self, key: str, value: Any) -> str | None:
        head, _, name = key.partition(".")
        if head == "model" and name:
            try:
                inspect.signature(self._factory()).bind_partial(**{name: value})
            except TypeError as exc:
                return f"the model factory {self.factory} does not take it: {exc}"
            return None
        if head != "options" or not name:
            return "unknown parameter; expected a machine key, model.<argument> or options.<backend option>"
        if name in SET_BY_SWEEP:
            return f"a sweep sets options.{name} itself (timing only; machine keys and [task] config)"
        try:
            parse_options({name: value})
        except ConfigError as exc:
            return exc.message
        return None

    def simulate(self, params: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
        kwargs = {k.partition(".")[2]: v for k, v in params.items() if k.startswith("model.")}
        options = {k.partition(".")[2]: v for k, v in params.items() if k.startswith("options.")}
        model, inputs = self._build(kwargs)
        torch._dynamo.reset()  # each point compiles afresh: no recompile limit across a long sweep
        compiled = torch.compile(model, backend="spyre_emu", dynamic=False, options={
            **options, "functional": False, "set": overrides, **({"machine": self.config} if self.config else {})})
        with torch.no_grad():
            compiled(*inputs)
        rep = last_report()
        return {"latency_us": round(rep.latency_us, 6), "cycles": rep.total_cycles, "kernels": len(rep.kernels),
                "fallbacks": rep.fallback_count, "round_trips": len(rep.crossings),
                "card_flop_share": round(rep.card_flop_share, 6)}

    def require(self, params: dict[str, Any]) -> None:
        self._factory()

    def _factory(self) -> Callable[..., tuple[torch.nn.Module, Any]]:
        module, _, name = self.factory.partition(":")
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError, ValueError) as exc:
            raise ConfigError(f"cannot load the model factory {self.factory!r} (module:function): {exc}", None,
                              "task.factory") from None

    def _build(self, kwargs: dict[str, Any]) -> tuple[torch.nn.Module, tuple]:
        model, inputs = self._factory()(**kwargs)
        return model, tuple(inputs)
