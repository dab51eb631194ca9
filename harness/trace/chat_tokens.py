"""A prompt in the server's own tokens: chat messages rendered with the model's chat template and
tokenized the way vLLM's OpenAI server does it (through Hugging Face transformers).

The trace counts tokens in its own units; a chat server counts the tokens of the *rendered*
conversation, role markers and separators included, so a chat run's ideal cache and prompt
lengths are only comparable with the server's figures in the server's tokens (docs/metrics.md).

- Template: `chat_template.jinja` in the tokenizer folder, else `chat_template` in
  `tokenizer_config.json` (a string, or a list of named templates of which "default" is used).
- Rendering, as transformers' `apply_chat_template`: a sandboxed jinja2 environment with
  `trim_blocks` and `lstrip_blocks`, the loop-controls extension and a `{% generation %}` block;
  a `tojson` filter that does not escape HTML; `raise_exception` and `strftime_now`; variables
  `messages`, `tools`, `documents`, `add_generation_prompt` (true: vLLM's default) and the named
  special tokens (`bos_token`, `eos_token`, ...) of `tokenizer_config.json`.
- Tool calls: an assistant message's `tool_calls[].function.arguments`, a JSON string on the
  wire, reach the template as the object it parses to (vLLM parses them before rendering, as
  transformers' tool-use templates expect; a string that does not parse becomes `{}`). A null
  `content` (a turn that only calls tools) reaches it as "" (vLLM's message parsing), so a
  template that prints the content bare prints nothing, not "None".
- Tokenizing: chat prompts without added special tokens (vLLM's chat request field
  `add_special_tokens` defaults to false: a template that wants a BOS writes `{{ bos_token }}`);
  text prompts of `/v1/completions` with them (the tokenizer's post-processor adds its BOS).
  Special-token text in the rendered prompt (e.g. `<start_of_turn>`) becomes that token.
- The APIs whose prompts are rendered this way are the driver's to say (each API's registry
  entry, recorded in the manifest's replay section): chat, and Anthropic Messages and OpenAI
  Responses, which the driver builds from the same chat messages and a server such as vLLM turns
  back into them before rendering (system blocks or `instructions` -> the system message,
  `tool_use` / `function_call` -> assistant `tool_calls`, `tool_result` /
  `function_call_output` -> `tool` messages; tool-call arguments parsed to objects either way),
  so the rendered conversation is the chat request's; its tokens too, but for the special
  tokens vLLM adds to a Responses prompt (`chat_ids(..., special_tokens=True)`).
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

from harness.errors import ChatTemplateError, InputError

TOKENIZER_FILE = "tokenizer.json"
CONFIG_FILE = "tokenizer_config.json"
TEMPLATE_FILE = "chat_template.jinja"
SPECIAL_TOKEN_NAMES = (
    "bos_token",
    "eos_token",
    "unk_token",
    "sep_token",
    "pad_token",
    "cls_token",
    "mask_token",
)


class _Generation(jinja2.ext.Extension):
    """`{% generation %}...{% endgeneration %}`: transformers marks assistant text with it; the
    rendered text is the block's body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller):
        return caller()


def _raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(
        x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def compile_template(source: str) -> jinja2.Template:
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[_Generation, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env.from_string(source)


class ChatTokenizer:
    """A Hugging Face tokenizer folder (or its tokenizer.json): counts, renders and tokenizes."""

    def __init__(
        self, tokenizer, template: str | None, special_tokens: dict[str, str], path: Path
    ) -> None:
        self.tokenizer = tokenizer
        self.template_source = template
        self.special_tokens = special_tokens
        self.path = path
        self._template = compile_template(template) if template is not None else None

    @classmethod
    def load(cls, path: str | Path) -> ChatTokenizer:
        """`path`: a folder holding tokenizer.json, or a tokenizer.json (its folder is read for
        the template and the special tokens)."""
        path = Path(path)
        folder = path if path.is_dir() else path.parent
        file = path / TOKENIZER_FILE if path.is_dir() else path
        if not file.is_file():
            raise InputError(f"no {TOKENIZER_FILE} here", path=file)
        config = _read_config(folder / CONFIG_FILE)
        try:
            from tokenizers import Tokenizer
        except ImportError as exc:  # pragma: no cover - optional dependency
            raise InputError(
                "a tokenizer needs the 'tokenizers' package: "
                "pip install 'agentic-harness[tokenizers]'"
            ) from exc
        try:
            tokenizer = Tokenizer.from_file(str(file))
        except Exception as exc:  # the Rust library raises plain Exception for a bad file
            raise InputError(f"not a Hugging Face tokenizer file: {exc}", path=file) from exc
        template = _template(folder, config)
        try:
            return cls(tokenizer, template, _special_tokens(config), folder)
        except jinja2.exceptions.TemplateSyntaxError as exc:
            raise InputError(
                f"the chat template does not parse: {exc}", path=folder, line=exc.lineno
            ) from exc

    @property
    def has_template(self) -> bool:
        return self._template is not None

    def count(self, text: str) -> int:
        """Tokens of a plain text, without special tokens (for fitting trace text)."""
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def render(
        self, messages: list[dict], *, tools: list | None = None, add_generation_prompt: bool = True
    ) -> str:
        if self._template is None:
            raise ChatTemplateError(
                f"{self.path} has no chat template ({TEMPLATE_FILE} or "
                f"'chat_template' in {CONFIG_FILE})"
            )
        try:
            return self._template.render(
                messages=_arguments_parsed(messages),
                tools=tools,
                documents=None,
                add_generation_prompt=add_generation_prompt,
                **self.special_tokens,
            )
        except jinja2.exceptions.TemplateError as exc:
            raise ChatTemplateError(f"the chat template refused the conversation: {exc}") from exc

    def chat_ids(
        self, messages: list[dict], *, tools: list | None = None, special_tokens: bool = False
    ) -> list[int]:
        """The prompt tokens of a chat request (or of another API's request built from these
        messages), as vLLM counts them: the rendered text, with the tokenizer's special tokens
        added where the API's server adds them."""
        return self.tokenizer.encode(
            self.render(messages, tools=tools), add_special_tokens=special_tokens
        ).ids

    def text_ids(self, text: str) -> list[int]:
        """The prompt tokens of a /v1/completions text prompt (special tokens added)."""
        return self.tokenizer.encode(text, add_special_tokens=True).ids


def _arguments_parsed(messages: list[dict]) -> list[dict]:
    """The messages as vLLM renders them: each tool call's arguments parsed from JSON, and a
    null content (an assistant turn that only calls tools) empty, never the text "None"."""
    out = []
    for m in messages:
        if not isinstance(m, dict):
            out.append(m)
            continue
        calls = m.get("tool_calls")
        if isinstance(calls, list):
            m = {**m, "tool_calls": [_parsed_call(c) for c in calls]}
        if "content" in m and m["content"] is None:
            m = {**m, "content": ""}
        out.append(m)
    return out


def _parsed_call(call):
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or isinstance(function.get("arguments"), dict):
        return call
    try:
        args = json.loads(function.get("arguments") or "{}")
    except ValueError:
        args = {}
    return {**call, "function": {**function, "arguments": args if isinstance(args, dict) else {}}}


def _read_config(path: Path) -> dict:
    if not path.is_file():
        return {}
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"not readable as JSON: {exc}", path=path) from exc
    if not isinstance(config, dict):
        raise InputError("must be a JSON object", path=path)
    return config


def _template(folder: Path, config: dict) -> str | None:
    file = folder / TEMPLATE_FILE
    if file.is_file():
        return file.read_text(encoding="utf-8")
    template = config.get("chat_template")
    if isinstance(template, list):  # named templates: [{"name": ..., "template": ...}, ...]
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default")
    if template is not None and not isinstance(template, str):
        raise InputError(
            "must be a string or a list of named templates",
            path=folder / CONFIG_FILE,
            field="chat_template",
        )
    return template


def _special_tokens(config: dict) -> dict[str, str]:
    """bos_token etc. as strings; tokenizer_config.json may hold {"content": ...} objects."""
    out = {}
    for name in SPECIAL_TOKEN_NAMES:
        value = config.get(name)
        if isinstance(value, dict):
            value = value.get("content")
        if isinstance(value, str):
            out[name] = value
    return out
