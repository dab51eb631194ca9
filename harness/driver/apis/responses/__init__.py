"""OpenAI Responses (`/v1/responses`): bodies from chat messages, stream decoding."""

from harness.driver.apis.api import API
from harness.driver.apis.openai.cache import OPENAI
from harness.driver.apis.responses.request import ResponsesRequest

RESPONSES = API(
    "responses",
    "/responses",
    ResponsesRequest,
    chat_template=True,
    # vLLM 0.32 tokenizes a rendered Responses prompt with special tokens added (its tokenize
    # parameters' default), where chat and Messages (a chat request inside) add none: a template
    # that writes {{ bos_token }} gets a second BOS (measured: 18 prompt tokens for the
    # conversation chat counts as 17; docs/driver.md, "APIs")
    special_tokens=True,
    options=("previous_response_id",),
    server_history="previous_response_id",
    hosted=(OPENAI,),
)
