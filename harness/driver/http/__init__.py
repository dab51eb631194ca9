"""The HTTP target and the APIs it speaks (OpenAI chat and completions, Anthropic Messages,
OpenAI Responses), streamed over one aiohttp session per run."""
