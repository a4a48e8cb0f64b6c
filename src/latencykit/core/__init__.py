"""Pure logic with no I/O: the per-call timing state machine and the call record.

Everything here is driven by an injected clock and plain method calls, so the same code
serves sync and async clients and both providers. It may import only the standard
library and numpy.
"""
