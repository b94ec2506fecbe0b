"""monet-ilp: exact and certified optimisation of neural-network training schedules.

The pipeline runs one way: graph builders -> TrainingGraph -> (hardware, costs)
-> Instance -> formulations -> Schedule -> evaluator.
"""

from monet_ilp._native import prefer_fresh
from monet_ilp.errors import MonetError

prefer_fresh()  # compiled modules only while they match their source (setup.py)

__version__ = "0.1.0"
__all__ = ["MonetError", "__version__"]
