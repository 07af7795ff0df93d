"""The simulator state is declared by the sim backend, which reads it (``triton_dist.backends.sim.context``); the
runtime implements :class:`SimContext` and installs it with :func:`set_current`. Re-exported for the runtime."""
from ...backends.sim.context import (SimAborted, SimContext, SimWaitTimeout, current, is_active,  # noqa: F401
                                     set_current)
