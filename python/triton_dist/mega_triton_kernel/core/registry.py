"""The registry of task types: op type name -> (family, builder). A family module registers its op types with
:func:`register_task`; :class:`~triton_dist.mega_triton_kernel.ModelBuilder` finds them here."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict

from .task import FAMILIES

__all__ = ["TaskType", "register_task", "task_type", "task_types"]


@dataclass(frozen=True)
class TaskType:
    """A registered op type: ``name`` (as in ``make_<name>`` / traces), its ``family`` and ``build``, the function
    ``build(builder, layer_id, *tensors, **params) -> Op`` that checks the arguments and tiles the op."""
    name: str
    family: str
    build: Callable


_REGISTRY: Dict[str, TaskType] = {}


def register_task(name: str, family: str):
    """Decorator registering ``build`` as the task type ``name`` of ``family``."""
    if family not in FAMILIES:
        raise ValueError(f"register_task({name!r}): unknown family {family!r}; families: {', '.join(FAMILIES)}")

    def deco(build):
        if name in _REGISTRY and _REGISTRY[name].build is not build:
            raise ValueError(f"task type {name!r} is already registered (family {_REGISTRY[name].family})")
        _REGISTRY[name] = TaskType(name, family, build)
        return build

    return deco


def task_type(name: str) -> TaskType:
    from .. import tasks  # noqa: F401  (registers the built-in families)

    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown task type {name!r}; registered: {', '.join(sorted(_REGISTRY))}") from None


def task_types() -> Dict[str, TaskType]:
    from .. import tasks  # noqa: F401

    return dict(_REGISTRY)
