"""Google's Gemini API (`POST /v1beta/models/{model}:streamGenerateContent?alt=sse`): bodies from
chat messages, stream decoding, its model list, its implicit prompt cache."""

from harness.driver.apis.api import API
from harness.driver.apis.gemini.cache import IMPLICIT
from harness.driver.apis.gemini.models import gemini_models
from harness.driver.apis.gemini.request import GeminiRequest

GEMINI = API(
    "gemini",
    "/models/{model}:streamGenerateContent",
    GeminiRequest,
    chat_template=True,
    running_usage=True,  # usageMetadata's counts on every chunk
    not_carried=("min_tokens", "ignore_eos"),  # Google refuses fields it does not know
    version="/v1beta",
    query="alt=sse",  # server-sent events (without it: one JSON array)
    models_query="pageSize=1000",  # 50 a page unless asked; 1,000 is the most a page holds
    model_list=gemini_models,
    hosted=(IMPLICIT,),
)
