"""Stop strings: matched on the decoded text, across chunk boundaries, never half-sent."""

from __future__ import annotations

import pytest

from harness.serving.responses import StopStrings


def feed_all(stops: tuple[str, ...], deltas: list[str]) -> tuple[list[str], str, bool]:
    matcher = StopStrings(stops)
    sent = [matcher.feed(d, final=k == len(deltas) - 1) for k, d in enumerate(deltas)]
    return sent, matcher.text, matcher.stopped


def test_without_stop_strings_text_passes_straight_through():
    assert feed_all((), ["the", " of", " and"]) == (["the", " of", " and"], "the of and", False)


def test_a_stop_split_over_two_chunks_is_found_and_never_half_sent():
    sent, text, stopped = feed_all(("END",), ["the E", "N", "D and more", " tail"])
    assert text == "the " and stopped
    assert "".join(sent) == "the " and "E" not in "".join(sent)


def test_the_earliest_of_several_stops_wins():
    sent, text, stopped = feed_all(("and", "of"), ["the of and"])
    assert (text, stopped, "".join(sent)) == ("the ", True, "the ")


@pytest.mark.parametrize("deltas", [["ab", "c", "d"], ["a", "b", "c", "d"], ["abcd"]])
def test_held_back_text_comes_out_at_the_end_when_no_stop_matches(deltas):
    sent, text, stopped = feed_all(("xyz",), deltas)
    assert "".join(sent) == text == "abcd" and not stopped
