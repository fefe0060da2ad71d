# GIL hand-back (see gil_handback.pyx): the Sender thread's short GIL-free sections (a write, a
# poll that does not wait) end with the GIL asked back within HANDBACK_US, not after CPython's
# switch interval (sys.getswitchinterval(), 5 ms by default).
#
# Threads: the Sender thread alone calls these, with the GIL, around a GIL-free section:
# short_switch() before it, restore_switch() after it. The switch interval is the process's:
# while such a section runs, every thread that waits for the GIL asks for it after HANDBACK_US.
# A thread that sets the interval meanwhile (sys.setswitchinterval) may see its value replaced by
# the one saved before the section. A no-op where the GIL is off (free-threaded build).
cdef double short_switch() except -1.0      # the interval to restore (seconds)
cdef int restore_switch(double saved) except -1
