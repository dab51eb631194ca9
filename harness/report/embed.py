"""A figure embedded in a page: drawn as an SVG (a PNG past `SVG_POINTS` data points), as a data
URI inside its `<figure>`, with the number of data points it drew (`data-points`) and, for a
figure as wide as the page, a second drawing at a narrow page's width."""

from __future__ import annotations

import base64
import io

import matplotlib
from markupsafe import Markup
from matplotlib.figure import Figure

from harness.report.jinja import macro
from harness.report.plots.narrow import narrow_layout

SVG_POINTS = 5_000  # a figure of more data points comes as PNG: its SVG would grow with them


def figure_html(title: str, fig: Figure) -> Markup:
    """The figure as an image, its title in the image only (no caption repeating it); a figure
    wider than a narrow page also comes drawn at that width, so its text stays readable at 800 px.
    SVG when it drew at most SVG_POINTS data points: sharp at any zoom, its text text (found by
    the browser's search, copied as written), and drawn in about half a PNG's time; PNG above
    that, where an SVG's size would follow the data."""
    points = data_points(fig)
    draw = svg_uri if points <= SVG_POINTS else png_uri
    wide = draw(fig)
    narrow = draw(fig) if narrow_layout(fig) else None
    return macro("figure")(title, points, wide, narrow)


def sentence_html(name: str, text: str) -> Markup:
    """What a figure of one colour would have said, as a sentence in its place."""
    return macro("sentence")(name, text)


def data_points(fig) -> int:
    """How many data points a figure drew: line vertices, bars and scatter points over its axes."""
    n = 0
    for ax in fig.axes:
        n += sum(
            len(line.get_xdata())
            for line in ax.get_lines()
            if line.get_label() and not _is_guide(line)
        )
        n += sum(1 for p in ax.patches if p.get_width() and p.get_height())
        n += sum(_collection_points(c) for c in ax.collections)
    return n


def _collection_points(collection) -> int:
    """Scatter points, or for a filled area (a histogram drawn as steps) the vertices of its outline."""
    offsets = len(collection.get_offsets())
    if offsets > 1:
        return offsets
    return sum(len(p.vertices) for p in collection.get_paths()) or offsets


def _is_guide(line) -> bool:
    """axhline/axvline reference lines span the axes in axes coordinates: not data."""
    return line.get_transform() != line.axes.transData


def svg_text(fig: Figure) -> str:
    """matplotlib's SVG of the figure: text as text in matplotlib's font stack (DejaVu Sans,
    then Lucida Grande, Verdana, Arial, sans-serif: as wide or narrower, so a label laid out for
    it still fits), anchored at its alignment point, so centred and right-aligned labels stay
    put in another font. Fixed ids and no date: the same analyses give the same page."""
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "harness"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    return buf.getvalue()


def svg_uri(fig: Figure) -> str:
    return _data_uri("svg+xml", svg_text(fig).encode("utf-8"))


def png_uri(fig: Figure) -> str:
    buf = io.BytesIO()
    # zlib level 3, not 6: about a third of the encoding's time for a slightly larger page
    fig.savefig(buf, format="png", pil_kwargs={"compress_level": 3})
    return _data_uri("png", buf.getvalue())


def _data_uri(kind: str, data: bytes) -> str:
    return f"data:image/{kind};base64," + base64.b64encode(data).decode("ascii")
