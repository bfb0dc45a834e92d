"""Decay of past usage, as Slurm's fair-share does with PriorityDecayHalfLife.

The controller keeps per team a decayed sum of GPU-seconds and passes it in the snapshot; this is
the one formula both the controller and the simulator use to age it.
"""

from __future__ import annotations


def decay(usage: float, elapsed_s: float, half_life_s: float) -> float:
    """`usage` (GPU-seconds) as it counts `elapsed_s` later."""
    if half_life_s <= 0:
        return 0.0
    return usage * 0.5 ** (elapsed_s / half_life_s)
