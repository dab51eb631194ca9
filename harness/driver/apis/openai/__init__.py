"""OpenAI `/v1/chat/completions` and `/v1/completions`: bodies and stream decoding."""

from dataclasses import replace

from harness.driver.apis.api import API
from harness.driver.apis.openai.cache import OPENAI
from harness.driver.apis.openai.request import OpenAIRequest

CHAT = API(
    "chat",
    "/chat/completions",
    OpenAIRequest,
    chat_template=True,
    usage_per_event=True,
    hosted=(OPENAI,),
)
COMPLETIONS = API(
    "completions",
    "/completions",
    OpenAIRequest,
    chat_template=False,
    usage_per_event=True,
    # OpenAI's legacy completions: its rules only when asked for, never by the host alone
    hosted=(replace(OPENAI, hosts=()),),
)
