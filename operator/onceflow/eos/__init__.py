"""The Kafka side of the protocols: fencing, the offsets store, transactional and
idempotent writers, reading to the end (adapters over confluent-kafka); and how a
process holding those clients starts and stops (``stop_signals``, ``lifeline``),
shared by the source task and the Spark driver."""
