"""What users and the front end write: tensors and ordered kernels (SuperDSC-like)."""

from .layout import (
    NO_HOST_DIM,
    TensorLayout,
    check_layout,
    default_layout,
    device_bytes,
    dim_map,
    elems_per_stick,
    from_device,
    host_strides,
    to_device,
)
from .load import FORMAT, load_kernel_program, parse_kernel_program
from .model import Kernel, KernelProgram, Tensor
from .sdsc_import import import_sdsc

__all__ = ["FORMAT", "NO_HOST_DIM", "Kernel", "KernelProgram", "Tensor", "TensorLayout", "load_kernel_program",
           "parse_kernel_program", "import_sdsc", "check_layout", "default_layout", "device_bytes", "dim_map",
           "elems_per_stick", "from_device", "host_strides", "to_device"]
