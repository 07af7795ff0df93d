"""The simulator state is declared by the sim backend, which reads it (``triton_dist.backends.sim.context``); the
runtime implements :class:`SimContext` and installs it with :func:`set_current`. Re-exported for the runtime."""
from ...backends.sim.context import (SimAborted, SimContext, SimPeerExited, SimSignalMismatch,  # noqa: F401
                                     SimWaitTimeout, current, is_active, set_current)
