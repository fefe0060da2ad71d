# The producer's clock for compiled code: monotonic milliseconds on time.monotonic()'s clock
# (PyTime_MonotonicRaw), read without the GIL by any thread. Python code (the pure twins,
# pyprod) reads the same clock through kcore.now_ms (kcore/_network_poll.py).
from cpython.time cimport monotonic
from libc.stdint cimport int64_t


cdef inline int64_t now_ms_c() noexcept nogil:
    return <int64_t>(monotonic() * 1000)
