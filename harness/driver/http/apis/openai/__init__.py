"""OpenAI `/v1/chat/completions` and `/v1/completions`: bodies and stream decoding."""
