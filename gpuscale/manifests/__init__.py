"""Pure builders: spec in, Kubernetes object bodies and Helm values out (no Pulumi resources)."""
