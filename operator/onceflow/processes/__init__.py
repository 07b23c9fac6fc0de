"""How Onceflow's own processes live and stop: a child dies with the ``onceflow run``
that started it, and stop signals are taken by a thread of their own. Shared by the
task process, the Spark driver and the CLI, which are siblings and cannot import each
other; nothing here knows Kafka or exactly-once."""
