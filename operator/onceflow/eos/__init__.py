"""The Kafka side of the protocols: fencing, the offsets store, the sink's markers,
transactional and idempotent writers, reading to the end (adapters over
confluent-kafka)."""
