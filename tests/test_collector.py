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


def test_none_turns_automatic_collection_off_without_freezing():
    before = gc.get_threshold(), gc.get_freeze_count()
    with collector.held_back(collector.NONE, freeze=False):
        assert gc.get_threshold()[0] == 0 and gc.get_freeze_count() == before[1]
    assert (gc.get_threshold(), gc.get_freeze_count()) == before


def test_an_error_inside_still_puts_the_collector_back():
    before = gc.get_threshold(), gc.get_freeze_count()
    with pytest.raises(KeyError), collector.held_back(collector.REALTIME_GEN0):
        raise KeyError("x")
    assert (gc.get_threshold(), gc.get_freeze_count()) == before
