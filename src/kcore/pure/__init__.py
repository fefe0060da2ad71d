"""Pure-Python twins of the kcore kernels: same API, same bytes."""
