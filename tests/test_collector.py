"""The one garbage-collector policy: thresholds and the frozen set put back, however it ends."""

from __future__ import annotations

import gc

import pytest

from harness import collector


def test_held_back_sets_young_collections_and_freezes_then_puts_all_back():
    before = gc.get_threshold(), gc.get_freeze_count()
    kept = [object() for _ in range(100)]
    with collector.held_back(collector.ANALYSIS_GEN0):
        assert gc.get_threshold()[0] == collector.ANALYSIS_GEN0
        assert gc.get_threshold()[1:] == before[0][1:]
        assert gc.get_freeze_count() >= len(kept)
    assert (gc.get_threshold(), gc.get_freeze_count()) == before


def test_without_freeze_nothing_is_frozen():
    before = gc.get_threshold(), gc.get_freeze_count()
    with collector.held_back(collector.VIRTUAL_GEN0, freeze=False):
        assert gc.get_threshold()[0] == collector.VIRTUAL_GEN0
        assert gc.get_freeze_count() == before[1]
    assert (gc.get_threshold(), gc.get_freeze_count()) == before


def test_an_error_inside_still_puts_the_collector_back():
    before = gc.get_threshold(), gc.get_freeze_count()
    with pytest.raises(KeyError), collector.held_back(collector.REALTIME_GEN0):
        raise KeyError("x")
    assert (gc.get_threshold(), gc.get_freeze_count()) == before
