"""Onceflow: exactly-once data pipelines on Kubernetes.

The package is layered, lowest first: ``api`` (models) -> ``model``/``logic`` (pure
decisions) -> ``eos``/``runtime``/``control`` (adapters doing I/O). The pure layers
never import an I/O library; ``.importlinter`` makes that a checked fact.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
