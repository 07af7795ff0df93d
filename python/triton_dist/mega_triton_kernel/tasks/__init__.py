"""The task families (one module each registers its op types with ``core.registry.register_task``):
Activation (``activation``), AllReduce (``allreduce``), Barrier (``barrier``), Elementwise (``elementwise``),
FlashAttention (``flash_attn``), FlashDecode (``flash_decode``), Linear (``linear``), Normalization (``norm``,
``qk_norm_rope``), Prefetch (``prefetch``)."""
from . import (activation, allreduce, barrier, elementwise, flash_attn, flash_decode, linear, norm,  # noqa: F401
               prefetch, qk_norm_rope)
