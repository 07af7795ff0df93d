"""Triton's launch path as ``triton_dist.jit.BoundLaunch`` and the runtime use it: the specialization binder
``JITFunction.run`` uses, the active driver (device, stream, target), a compiled kernel's launcher, and the
allocator for device-side tensor descriptors.

Covers Triton 3.6-3.9 (``triton.runtime.jit.create_function_from_signature``, ``triton.runtime.driver``,
``CompiledKernel.run`` / ``packed_metadata`` / ``launch_metadata``, ``triton.runtime._allocation``); tested in
``test/python/test_compat.py`` (section "launcher") and through ``test_jit.py``'s bound-launch tests.
"""
from __future__ import annotations

import triton


def allocator_is_unset() -> bool:
    """Whether no Triton allocator (``triton.set_allocator``) is installed for this context: device-side tensor
    descriptors then have no scratch memory. Triton 3.6 keeps the allocator in ``triton.runtime._allocation``
    (a context variable holding a ``NullAllocator`` until set)."""
    from triton.runtime import _allocation

    return isinstance(_allocation._allocator.get(), _allocation.NullAllocator)


def specialization_binder(fn, target=None):
    """A function ``binder(*args, **kwargs) -> (bound_args, specialization, options)`` computing how Triton
    specializes a launch of the ``JITFunction`` ``fn`` on ``target`` (a ``GPUTarget``; default: the active
    driver's). ``specialization`` is a list with one hashable ``(type, attribute)`` pair per parameter: two launches
    with equal lists and equal options run the same compiled kernel.

    Assumption (Triton 3.5-3.6): ``triton.runtime.jit.create_function_from_signature(signature, params, backend)``
    builds the binder ``JITFunction.run`` uses (native ``specialize_impl``)."""
    from triton.compiler import make_backend
    from triton.runtime.jit import create_function_from_signature

    if target is None:
        from triton.runtime import driver

        target = driver.active.get_current_target()
    return create_function_from_signature(fn.signature, fn.params, make_backend(target))


def device_and_stream_getters():
    """``(get_device, get_stream)``: the active driver's functions that ``JITFunction.run`` calls on every launch,
    ``get_device() -> index`` and ``get_stream(index) -> raw stream handle`` (Triton 3.5-3.6: the ``GPUDriver``
    attributes ``get_current_device`` / ``get_current_stream``, bound to torch's current device and stream)."""
    from triton.runtime import driver

    drv = driver.active
    return drv.get_current_device, drv.get_current_stream


def compiled_kernel_launcher(kernel):
    """``launch(grid3, stream, *all_args)`` for a compiled kernel returned by a ``JITFunction`` launch: starts it
    on ``stream`` with ``grid3 = (x, y, z)``; ``all_args`` are every parameter's value in declaration order,
    constexprs included (what ``JITFunction.run`` passes). Launch hooks (``knobs.runtime.launch_enter_hook`` /
    ``launch_exit_hook``) are honoured as in ``JITFunction.run``.

    Assumptions (Triton 3.5-3.6): a launch may return a future with ``result()`` (parallel compile); a
    ``CompiledKernel`` has ``run`` (the backend launcher, called as ``run(gx, gy, gz, stream, function,
    packed_metadata, launch_metadata, enter_hook, exit_hook, *args)``), ``function``, ``packed_metadata`` and
    ``launch_metadata(grid, stream, *args)``; the handles are loaded by ``run``'s first access."""
    if hasattr(kernel, "result"):
        kernel = kernel.result()
    run = kernel.run  # loads the module on first access
    function, packed = kernel.function, kernel.packed_metadata
    meta = kernel.launch_metadata
    rt = triton.knobs.runtime

    def launch(grid3, stream, *args):
        enter = rt.launch_enter_hook
        lm = meta(grid3, stream, *args) if enter is not None else None
        run(grid3[0], grid3[1], grid3[2], stream, function, packed, lm, enter, rt.launch_exit_hook, *args)

    return launch


#: what a compiled launch on a machine without a GPU raises (Triton's own words are "0 active drivers")
NO_GPU_DRIVER = ("triton_dist: no GPU here (Triton has no active CUDA / ROCm driver), so a kernel cannot be compiled "
                 "for this machine and launched. Without a GPU, kernels run on the CPU simulator: start the script "
                 "with scripts/launch.sh or torchrun, or set TRITON_DIST_BACKEND=sim, or call "
                 "triton_dist.utils.initialize_distributed() before the first launch")


def active_driver():
    """Triton's driver of the installed GPU backend (``get_current_target()``, ``get_current_device()``,
    ``get_current_stream(index)``, ...), chosen on first use. Without a GPU backend: ``RuntimeError``
    (:data:`NO_GPU_DRIVER`, naming the simulator's switches, instead of Triton's "0 active drivers"). Assumptions:
    ``triton.runtime.driver.active`` is the slot that holds it (``driver.set_active`` replaces it), and Triton
    chooses it among the drivers of ``triton.backends.backends`` whose ``is_active()`` is true."""
    from triton.backends import backends
    from triton.runtime import driver

    try:
        return driver.active
    except RuntimeError:
        if any(b.driver.is_active() for b in backends.values()):
            raise
        raise RuntimeError(NO_GPU_DRIVER) from None
