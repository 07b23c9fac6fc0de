"""The source task process: the run loop, where its transactions end (``boundaries``),
its generation authority and metrics. It finds its connector through
``connectors.registry``."""
