"""The task families (one module each registers its op types with ``core.registry.register_task``):
Activation (``activation``), AllReduce (``allreduce``), Barrier (``barrier``), Elementwise (``elementwise``),
FlashAttention (``flash_attn``), FlashDecode (``flash_decode``), Linear (``linear``), Normalization (``norm``,
``qk_norm_rope``), Prefetch (``prefetch``)."""
import importlib

_MODULES = ("linear", "norm", "elementwise", "activation", "qk_norm_rope", "flash_decode", "flash_attn", "allreduce",
            "barrier", "prefetch")

for _m in _MODULES:
    try:
        importlib.import_module(f"{__name__}.{_m}")
    except ModuleNotFoundError as _e:  # a family not written yet
        if _e.name != f"{__name__}.{_m}":
            raise
