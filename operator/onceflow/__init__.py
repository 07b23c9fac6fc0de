"""Onceflow: exactly-once data pipelines on Kubernetes.

The package is layered, lowest first: ``api`` (models) -> ``model`` -> ``logic`` (pure
decisions) -> ``eos`` (Kafka) -> ``spark``/``runtime`` (the driver and the task
process) -> ``control``/``standalone`` (the operator and ``onceflow run``) ->
``handlers``/``render``/``report`` -> ``cli``. ``connectors`` build on ``api`` alone.
The pure layers never import an I/O library; ``.importlinter`` makes all of that a
checked fact.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
