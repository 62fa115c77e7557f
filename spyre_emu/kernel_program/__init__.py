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

__all__ = ["NO_HOST_DIM", "TensorLayout", "check_layout", "default_layout", "device_bytes", "dim_map",
           "elems_per_stick", "from_device", "host_strides", "to_device"]
