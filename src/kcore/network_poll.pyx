# cython: binding=False
"""Compiled twin of kcore/pure/network_poll.py: the NetworkClient's data path, compiled in from
kcore/shared/network_poll.py, so that a steady produce stream runs no Python bytecode in it."""

include "shared/network_poll.py"  # (its __all__ is this module's)
