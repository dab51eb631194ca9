"""OpenAI `/v1/chat/completions` and `/v1/completions`: bodies and stream decoding."""

from harness.driver.apis.api import API
from harness.driver.apis.openai.request import OpenAIRequest

CHAT = API("chat", "/chat/completions", OpenAIRequest, chat_template=True, usage_per_event=True)
COMPLETIONS = API(
    "completions", "/completions", OpenAIRequest, chat_template=False, usage_per_event=True
)
