"""The torch side of spyre-emu (``spyre_emu.frontend``): the only code that imports torch.

``torch.compile(model, backend="spyre_emu")`` compiles a model to kernel programs, simulates
them and returns their results; ``last_report()`` and ``capture()`` give what each call cost;
``export_program`` writes the kernel program of a model for ``spyre-emu run``.
"""

from .backend import spyre_emu_backend
from .drawer import drawer_step, step_us
from .export import export_program
from .report import FrontendReport, capture, last_report

__all__ = ["FrontendReport", "drawer_step", "capture", "export_program", "last_report", "spyre_emu_backend", "step_us"]
