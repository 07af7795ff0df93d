"""Per-target lowerings. ``triton_dist.backends.{nvidia,amd,sim}`` are the only modules that contain PTX, AMDGCN,
SHMEM symbol names or simulator code. Each package implements the backend contract of the language layer
(``triton_dist.language._backend``: one Protocol per area) and registers itself for its target when imported; the
registry imports the package ``triton_dist.target.BACKEND_PACKAGES`` names the first time a kernel for that target
is traced.

A new target adds a package here (its ``__init__`` builds a ``Backend`` and calls ``register_backend``) and its
entry in ``triton_dist.target`` (how it is recognised, and ``BACKEND_PACKAGES``)."""
