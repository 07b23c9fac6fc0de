"""The source task process (the run loop, its generation authority, metrics; it finds
its connector through ``connectors.registry``), and the process-level settings the
operator starts with (heap)."""
