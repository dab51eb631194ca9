"""matplotlib's figure modules imported without their help texts (report/plots/matplotlib_internals):
the texts are skipped, everything else behaves, the pieces are put back, and a matplotlib that
moved a piece is imported as it is."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

from harness.report.plots import matplotlib_internals as internals

ROOT = Path(__file__).resolve().parents[2]

FRESH = """
import inspect, sys
import harness.report.plots.base
import matplotlib.artist as artist
from matplotlib.lines import Line2D
import matplotlib._docstring as docstring

# skipped: Line2D.set lists no properties (matplotlib's own would list them)
assert "linewidth" not in (Line2D.set.__doc__ or ""), Line2D.set.__doc__
# everything else behaves: properties, aliases, and an unknown one refused
line = Line2D([], [])
line.set(color="red", lw=3)
assert (line.get_color(), line.get_linewidth()) == ("red", 3)
try:
    line.set(no_such_property=1)
except AttributeError:
    pass
else:
    raise AssertionError("an unknown property was accepted")
# put back: matplotlib's own pieces, and no empty property table left for later docstrings
hook = vars(artist.Artist)["_update_set_signature_and_docstring"].__func__
assert hook.__module__ == "matplotlib.artist", hook
assert artist.kwdoc.__module__ == "matplotlib.artist"
assert "linewidth" in artist.kwdoc(Line2D)
assert not [k for k, v in docstring.interpd.params.items() if k.endswith(":kwdoc") and not v]
class Later(artist.Artist):  # a class defined after writes its texts as matplotlib does
    pass
assert "alpha" in Later.set.__doc__ and "alpha" in inspect.signature(Later.set).parameters
import matplotlib.pyplot  # what imports later imports as it is
print("ok")
"""


def test_a_fresh_process_skips_the_texts_and_puts_the_pieces_back():
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(FRESH)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def _artist(with_kwdoc: bool = True, hook_kind=classmethod) -> ModuleType:
    """A stand-in for matplotlib.artist, with or without the pieces in their expected shape."""
    module = ModuleType("fake_artist")

    class Artist:
        pass

    setattr(Artist, internals.HOOK, hook_kind(lambda cls: None))
    module.Artist = Artist  # type: ignore[attr-defined]
    if with_kwdoc:
        module.kwdoc = lambda artist: "a table"  # type: ignore[attr-defined]
    return module


@pytest.fixture
def fake_modules(tmp_path, monkeypatch):
    """`MODULES` pointed at modules of our own, not yet imported; one records what it saw."""
    (tmp_path / "fig_seen.py").write_text(
        "import sys\nartist = sys.modules['fake_artist']\n"
        f"seen = (vars(artist.Artist)[{internals.HOOK!r}], artist.kwdoc('x'))\n"
    )
    (tmp_path / "fig_broken.py").write_text("raise ImportError('a module that fails')\n")
    (tmp_path / "fig_plain.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("fig_seen", "fig_broken", "fig_plain"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setattr(internals, "MODULES", ("fig_seen",))
    return tmp_path


def test_the_pieces_are_swapped_while_importing_then_put_back(fake_modules, monkeypatch):
    artist = _artist()
    hook, kwdoc = vars(artist.Artist)[internals.HOOK], artist.kwdoc
    monkeypatch.setitem(sys.modules, "fake_artist", artist)
    assert internals.import_figures(artist) is True
    seen_hook, seen_table = sys.modules["fig_seen"].seen
    assert seen_hook is not hook and seen_table == ""
    assert vars(artist.Artist)[internals.HOOK] is hook and artist.kwdoc is kwdoc


def test_a_failed_import_still_puts_the_pieces_back(fake_modules, monkeypatch):
    artist = _artist()
    hook, kwdoc = vars(artist.Artist)[internals.HOOK], artist.kwdoc
    monkeypatch.setattr(internals, "MODULES", ("fig_broken",))
    with pytest.raises(ImportError, match="fails"):
        internals.import_figures(artist)
    assert vars(artist.Artist)[internals.HOOK] is hook and artist.kwdoc is kwdoc


@pytest.mark.parametrize(
    "artist",
    [_artist(with_kwdoc=False), _artist(hook_kind=staticmethod)],
    ids=["no kwdoc", "hook not a classmethod"],
)
def test_a_moved_piece_imports_matplotlib_as_it_is(fake_modules, monkeypatch, artist):
    hook, kwdoc = vars(artist.Artist)[internals.HOOK], getattr(artist, "kwdoc", None)
    monkeypatch.setattr(internals, "MODULES", ("fig_plain",))
    assert internals.import_figures(artist) is False
    assert "fig_plain" in sys.modules
    assert vars(artist.Artist)[internals.HOOK] is hook and getattr(artist, "kwdoc", None) is kwdoc


def test_modules_already_imported_are_left_as_they_are(monkeypatch):
    monkeypatch.setattr(internals, "MODULES", ("os",))
    assert internals.import_figures(_artist()) is False
