# GIL hand-back (see gil_handback.pyx): the Sender thread's short GIL-free sections (a write, a
# poll of 1 ms at most) end with the GIL asked back within 100 us, not after CPython's
# switch interval (sys.getswitchinterval(), 5 ms by default).
#
# Threads: the thread that owns a Selector and its Channels (the Sender) calls these, with the
# GIL, around a GIL-free section: short_switch() before it, restore_switch() after it. Several
# such threads (several producers) may overlap: only an interval above 100 us is saved and put
# back, so the one set before any of them is the one left after. The switch interval is the
# process's: while such a section runs, every thread that waits for the GIL asks for it after
# 100 us. A thread that sets the interval meanwhile (sys.setswitchinterval) may see its value
# replaced by the one saved before the section. A no-op where the GIL is off (free-threaded).
cdef double short_switch() except -1.0      # the interval to restore (seconds)
cdef int restore_switch(double saved) except -1
