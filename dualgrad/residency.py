"""Residency helpers (see ``dualgrad.api.residency``)."""
from .api.residency import (ptr_is_live, set_host_data, store_weight, tensor_scope,  # noqa: F401
                            write_resident)

__all__ = ["ptr_is_live", "tensor_scope", "write_resident", "store_weight", "set_host_data"]
