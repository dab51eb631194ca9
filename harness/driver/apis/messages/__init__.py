"""Anthropic Messages (`/v1/messages`): bodies from chat messages, stream decoding."""

from harness.driver.apis.api import API
from harness.driver.apis.messages.cache import ANTHROPIC
from harness.driver.apis.messages.request import MessagesRequest

MESSAGES = API(
    "messages",
    "/messages",
    MessagesRequest,
    chat_template=True,
    options=("anthropic_version", "cache_control"),
    not_carried=("seed",),  # Anthropic's API has no seed
    hosted=(ANTHROPIC,),
)
