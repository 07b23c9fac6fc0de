"""PySpark side: the job entry point and the exactly-once sinks."""
