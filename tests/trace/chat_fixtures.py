"""A small Hugging Face tokenizer folder whose counts can be worked out by hand.

A word-level tokenizer over the trace's content vocabulary (one token per word; whitespace is
dropped), role names, and the special tokens <s>, </s> and <bos>; its post-processor puts <bos>
before a text when special tokens are added. So a chat prompt rendered with `TEMPLATE` has
`words + 3` tokens per message (<s>, role, content words, </s>) plus 2 for the generation prompt.
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import Tokenizer, models, pre_tokenizers, processors

from harness.trace.content import WORDS

SPECIALS = ("<s>", "</s>", "<bos>")
TEMPLATE = (
    "{% for m in messages %}\n"
    "<s>{{ m['role'] }}\n{{ m['content'] }}</s>\n"
    "{% endfor %}\n"
    "{% if add_generation_prompt %}<s>assistant\n{% endif %}"
)
PER_MESSAGE, GENERATION_PROMPT = 3, 2


def build_tokenizer() -> Tokenizer:
    names = ["[UNK]", *SPECIALS, *sorted({"system", "user", "assistant", *WORDS})]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(names)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.add_special_tokens(list(SPECIALS))
    bos = names.index("<bos>")
    tok.post_processor = processors.TemplateProcessing(
        single="<bos> $A", special_tokens=[("<bos>", bos)]
    )
    return tok


def tokenizer_dir(
    folder: Path, *, template: str | None = TEMPLATE, in_config: bool = False
) -> Path:
    """tokenizer.json + tokenizer_config.json (+ chat_template.jinja unless `in_config`)."""
    folder.mkdir(parents=True, exist_ok=True)
    build_tokenizer().save(str(folder / "tokenizer.json"))
    config: dict = {"bos_token": {"content": "<bos>"}, "eos_token": "</s>"}
    if template is not None and in_config:
        config["chat_template"] = [
            {"name": "tool_use", "template": "unused"},
            {"name": "default", "template": template},
        ]
    elif template is not None:
        (folder / "chat_template.jinja").write_text(template)
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return folder
