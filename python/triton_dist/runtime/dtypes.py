"""dtype names and groups shared by the kernels, the ops and their dispatch tables (one place each)."""
from __future__ import annotations

from typing import Optional

import torch

#: The FP8 dtypes this torch has (e4m3 / e5m2; an older torch may lack them).
FP8_DTYPES = tuple(d for d in (getattr(torch, "float8_e4m3fn", None), getattr(torch, "float8_e5m2", None)) if d)
#: 16-bit floating dtypes the GEMMs take (and produce for FP8 inputs: bf16).
HALF_DTYPES = (torch.bfloat16, torch.float16)


def dtype_name(dtype) -> Optional[str]:
    """``torch.bfloat16`` -> ``"bfloat16"`` (a name is returned as given; None stays None): the spelling of dtypes
    in error messages and in the dispatch tables' keys."""
    return None if dtype is None else str(dtype).replace("torch.", "")


def dtype_names(dtypes) -> str:
    """``"bfloat16, float16"``: the accepted dtypes of an error message."""
    return ", ".join(dtype_name(d) for d in dtypes)


__all__ = ["FP8_DTYPES", "HALF_DTYPES", "dtype_name", "dtype_names"]
