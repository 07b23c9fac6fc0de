"""The source task process (the run loop, its generation authority, metrics, plugins),
and the process-level settings the operator starts with (heap)."""
