"""``gpuscale doctor``: why a GPU pod stays Pending, read from a cluster dump (Karpenter, kube-scheduler, KAI, the
device plugin), with the objects that prove it and the metrics to confirm it. See ``docs/doctor.md``."""
