"""Reverse-mode autodiff for Ember (graph, steps, gradient rules).

Filled in by the autograd issue; the engine does not depend on it.
"""
