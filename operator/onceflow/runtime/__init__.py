"""The source task process: the run loop, its generation authority, metrics, plugins."""
