"""monet-ilp: exact and certified optimisation of neural-network training schedules.

The pipeline runs one way: graph builders -> TrainingGraph -> (hardware, costs)
-> Instance -> formulations -> Schedule -> evaluator.
"""

from monet_ilp.errors import MonetError

__version__ = "0.1.0"
__all__ = ["MonetError", "__version__"]
