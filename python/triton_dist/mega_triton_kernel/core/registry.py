"""The registries the task families fill: task types (op type name -> (family, builder), :func:`register_task`) and
compile-time fusion rules (:func:`register_fusion`). Core owns them and never imports a family: each module of
``tasks/`` registers itself when imported, and the package's builder layer imports ``tasks`` (so every built-in
family is registered whenever ``triton_dist.mega_triton_kernel`` is); a user's family registers the same way.
:class:`~triton_dist.mega_triton_kernel.ModelBuilder` and ``core/fusion.py`` find them here."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from .task import FAMILIES, Op

__all__ = ["TaskType", "register_task", "task_type", "task_types", "FusionRule", "register_fusion", "fusion_rules"]


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
    """The registered task type ``name``; ``ValueError`` naming the registered ones when there is none."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown task type {name!r}; registered: {', '.join(sorted(_REGISTRY))}") from None


def task_types() -> Dict[str, TaskType]:
    """Every registered task type, by name (a copy)."""
    return dict(_REGISTRY)


#: ``rule(prev, op) -> ops or None``: for two adjacent ops of a step, the ops that replace ``[prev, op]`` when the
#: rule fuses them (bit-identical to running both), or None when it does not apply.
FusionRule = Callable[[Op, Op], Optional[Sequence[Op]]]

_FUSIONS: List[Tuple[int, str, FusionRule]] = []


def register_fusion(order: int):
    """Decorator registering a :data:`FusionRule`; rules are tried in increasing ``order`` (the first that applies to
    a pair wins). Registering the same function again is a no-op."""

    def deco(rule: FusionRule):
        key = f"{rule.__module__}.{rule.__qualname__}"
        if all(name != key for _, name, _ in _FUSIONS):
            _FUSIONS.append((order, key, rule))
            _FUSIONS.sort(key=lambda entry: (entry[0], entry[1]))
        return rule

    return deco


def fusion_rules() -> List[FusionRule]:
    """The registered fusion rules, in the order they are tried."""
    return [rule for _, _, rule in _FUSIONS]
