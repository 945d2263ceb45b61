"""Clustering's bin packing of one partition (``_groups_for_partition``) equals a model of Hudi's
size-based strategy: slices largest first (ties by file id), a group closed when the next slice
would take it past ``max_bytes_per_group``, at most ``max_num_groups`` groups, a lone slice only
when single groups are allowed."""

from __future__ import annotations

import dataclasses
import random

import pytest

from hoodie.services.clustering import ClusteringPolicy, _groups_for_partition


def _model(sizes: list[int], policy: ClusteringPolicy) -> tuple[list[list[int]], bool]:
    """The packing, slice by slice (positions into ``sizes``, already in order)."""
    packed: list[list[int]] = []
    current: list[int] = []
    total = 0
    partial = False
    for at, size in enumerate(sizes):
        if current and total + size > policy.max_bytes_per_group:
            packed.append(current)
            current, total = [], 0
            if len(packed) >= policy.max_num_groups:
                partial = True
                break
        current.append(at)
        total += size
    if current and not partial and (len(current) > 1 or policy.single_group_clustering):
        packed.append(current)
    return packed, partial


@pytest.mark.parametrize("seed", range(40))
def test_packing_equals_the_model(seed: int) -> None:
    rng = random.Random(seed)
    policy = dataclasses.replace(
        ClusteringPolicy(),
        max_bytes_per_group=rng.choice([1, 100, 250, 1000, 10**12]),
        max_num_groups=rng.choice([1, 2, 3, 30]),
        single_group_clustering=rng.random() < 0.5,
    )
    sizes = sorted(
        (rng.choice([0, 1, 50, 99, 100, 120, 400]) for _ in range(rng.randrange(0, 12))), reverse=True
    )
    found, partial = _groups_for_partition(sizes, sum(sizes), policy)
    expected, expected_partial = _model(sizes, policy)
    assert [list(range(start, stop)) for start, stop in found] == expected
    assert partial == expected_partial
