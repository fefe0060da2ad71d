# NetworkPoll and BrokerConnection (see network_poll.pyx): Python classes compiled, no C-level
# state.
#
# Threads (the one place these rules are written): the NetworkClient's thread (the Sender
# thread) alone, with the GIL, for everything NetworkPoll and its BrokerConnections hold: the
# connections, their FIFOs and Channels, the Selector, the correlation ids, the completed
# responses. The one exception is wakeup() (its Waker's rules are in selector.pxd): any thread. Nothing here runs
# without the GIL; the Selector's select_io section is the only GIL-free I/O (selector.pxd).
# Fork: in a forked child the Sender thread does not exist; shutdown(after_fork=True) (the
# producer's hook there, on the one thread) closes the child's descriptors, nothing else runs.
