"""Communication kernels written against the public triton_dist API only (``dl.*``, ``tl.*``), so each one runs on
NVIDIA, (compiles for) AMD, and runs on the CPU simulator.

Collectives (intra-node): :mod:`.allgather` (push / pull), :mod:`.reduce_scatter` (direct pull / push, ring),
:mod:`.allreduce` (one-shot, two-shot), :mod:`.p2p` (send / recv); :mod:`.common` holds the signalling helpers and
the protocol description. Use them through :mod:`triton_dist.ops` (contexts + functional calls).
"""
