"""CPU kernels: loop templates compiled with ``@njit`` by ``builder``."""
