"""The source task process: the run loop, its generation authority and metrics. It
finds its connector through ``connectors.registry``."""
