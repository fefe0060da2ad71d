# The producer's clock for compiled code: monotonic milliseconds (and microseconds, for linger)
# on time.monotonic()'s clock (PyTime_MonotonicRaw), read without the GIL by any thread. Python
# code (the pure twins, pyprod) reads the same clock through kcore.now_ms and
# NetworkPoll.now_us (kcore/_network_poll.py).
from cpython.time cimport monotonic
from libc.stdint cimport int64_t


cdef inline int64_t now_ms_c() noexcept nogil:
    return <int64_t>(monotonic() * 1000)


cdef inline int64_t now_us_c() noexcept nogil:
    return <int64_t>(monotonic() * 1000000)
