# cython: binding=False
"""The GIL asked back within 100 us after the Sender's short GIL-free sections (thread rules:
gil_handback.pxd).

A caller thread in a send() loop holds the GIL until CPython asks it to drop it, which it does
only once a waiting thread has waited the switch interval (5 ms by default). The Sender lets
the GIL go for its writes and polls; each time, taking it back could cost it those 5 ms while
the caller filled buffer_memory. Around a section that does not sleep, the Sender lowers the
interval to 100 us, so its wait for the GIL ends then, and restores it once it holds the GIL
again. No pure twin: the pure kernels have no GIL-free sections."""
import sys

cdef double _HANDBACK_S = 0.0001
cdef object _get = sys.getswitchinterval
cdef object _set = sys.setswitchinterval
cdef bint _GIL = getattr(sys, "_is_gil_enabled", lambda: True)()


cdef double short_switch() except -1.0:
    cdef double saved
    if not _GIL:
        return 0.0
    saved = _get()
    if saved > _HANDBACK_S:
        _set(_HANDBACK_S)
    return saved


cdef int restore_switch(double saved) except -1:
    if saved > _HANDBACK_S:
        _set(saved)
    return 0


def section_intervals():
    """(the switch interval inside a short GIL-free section, after it), in seconds."""
    cdef double saved = short_switch()
    during = _get()
    restore_switch(saved)
    return during, _get()
