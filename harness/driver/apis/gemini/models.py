"""Gemini's model list (`GET /v1beta/models`): `{"models": [{"name": "models/<id>",
"inputTokenLimit", "outputTokenLimit", "supportedGenerationMethods", ...}], "nextPageToken"}`,
as cards by the name after `models/` (the name the request URL takes)."""

from __future__ import annotations

STREAMED = "streamGenerateContent"


def gemini_models(listing: object) -> dict[str, dict]:
    """The models that stream (`supportedGenerationMethods` holds streamGenerateContent, where
    the card says), by name; empty when the list holds none, or has another shape."""
    models = listing.get("models") if isinstance(listing, dict) else None
    cards: dict[str, dict] = {}
    for card in models if isinstance(models, list) else ():
        if not isinstance(card, dict) or not isinstance(card.get("name"), str):
            continue
        methods = card.get("supportedGenerationMethods")
        if isinstance(methods, list) and STREAMED not in methods:
            continue
        name = card["name"].removeprefix("models/")
        cards[name] = {**card, "id": name}
    return cards
