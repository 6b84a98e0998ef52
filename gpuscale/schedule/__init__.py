"""``gpuscale schedule``: the real KAI Scheduler (v0.17.0, a Go program in ``kai/``) over what a stack emits.

``snapshot`` turns synth output into the cluster KAI would see (one node per possible node of each pool, the
Queues, PriorityClasses and Topology, the pods of every workload at a replica count); ``binary`` builds the Go
program once per source hash; ``replay`` runs it; ``report`` reads its verdict per model and role.
"""
