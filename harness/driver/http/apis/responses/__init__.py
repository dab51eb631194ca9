"""OpenAI Responses (`/v1/responses`): bodies from chat messages, stream decoding."""
