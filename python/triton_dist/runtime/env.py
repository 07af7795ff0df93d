"""Reading triton_dist's environment variables (booleans, integers) with errors that name the variable.

Internal: the public names are re-exported by :mod:`triton_dist.utils` (import them from there).
"""
from __future__ import annotations

import os

__all__ = ["get_bool_env", "get_int_env", "process_group_layout"]

_TRUE = ("1", "true", "on", "yes")
_FALSE = ("0", "false", "off", "no")


def get_bool_env(name: str, default: bool) -> bool:
    """``True`` for 1/true/on/yes, ``False`` for 0/false/off/no (any case); ``default`` when unset. Any other value
    raises ValueError naming the variable and the accepted values."""
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    v = value.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise ValueError(f"{name}={value!r} is not a boolean: use one of 1/0, true/false, on/off, yes/no")


def get_int_env(name: str, default: int) -> int:
    """The integer value of ``name``; ``default`` when unset. A non-integer raises ValueError naming it."""
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    try:
        return int(value.strip(), 0)
    except ValueError:
        raise ValueError(f"{name}={value!r} is not an integer") from None


def process_group_layout(group=None):
    """``(rank, world, local_rank, local_world)`` of this process in the torch process group ``group`` (None: the
    world group), counted in the group itself: its rank and size in the group, and the group's own node layout.

    The world group: ``LOCAL_RANK`` / ``LOCAL_WORLD_SIZE`` as the launcher set them (defaults: ``rank %
    local_world`` / the world). A subgroup -- e.g. each half of a 2-rank world its own group of 1, over which the
    reference's scripts bootstrap SHMEM -- has its own: ``local_world`` is the number of its members on this
    process's node (a node = ``LOCAL_WORLD_SIZE`` consecutive global ranks, torchrun's numbering) and
    ``local_rank`` this process's index among them, so the launcher's sizes never describe a group they do not
    fit."""
    import torch.distributed as dist

    rank, world = dist.get_rank(group), dist.get_world_size(group)
    global_world = dist.get_world_size()
    launch_local = get_int_env("LOCAL_WORLD_SIZE", global_world)
    if world == global_world:
        local_world = launch_local
        return rank, world, get_int_env("LOCAL_RANK", rank % local_world if local_world > 0 else 0), local_world
    if launch_local <= 0:
        raise ValueError(f"LOCAL_WORLD_SIZE={launch_local} must be positive")
    members = dist.get_process_group_ranks(group)  # global ranks, in group-rank order
    me = members[rank]
    on_my_node = [g for g in members if g // launch_local == me // launch_local]
    return rank, world, on_my_node.index(me), len(on_my_node)

