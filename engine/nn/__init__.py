"""Neural-network building blocks: ``ember.nn.functional`` holds the module ops.

>>> import ember.nn.functional as F
>>> F.linear(ember.ones((2, 3)), ember.ones((4, 3))).shape
(2, 4)
"""
from . import functional

__all__ = ["functional"]
