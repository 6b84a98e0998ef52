"""gpuscale: GPU autoscaling for LLM inference on EKS, correct by construction.

The public API: the spec models, the sizing functions and (in ``gpuscale.components``) the Pulumi components.
"""

from gpuscale.sizing import ModelSizing, PlatformSizing, size_model, size_platform
from gpuscale.spec import *  # noqa: F403
from gpuscale.spec import __all__ as _spec_all

__all__ = [*_spec_all, "ModelSizing", "PlatformSizing", "size_model", "size_platform"]
