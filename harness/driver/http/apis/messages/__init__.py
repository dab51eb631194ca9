"""Anthropic Messages (`/v1/messages`): bodies from chat messages, stream decoding."""
