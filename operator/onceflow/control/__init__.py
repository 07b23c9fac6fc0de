"""The operator's reconcilers and its one Kubernetes boundary (``kube``)."""
