"""A real agent framework's task recorded by `harness record`: the OpenAI Agents SDK
(`openai-agents`, a PyPI package: `pip install openai-agents`), offline, against a local model.

    .venv/bin/python benchmarks/agent_framework.py [-o DIR] [--tasks 3]

The model is a scripted chat-completions server on 127.0.0.1 (this file): it plays a coding
model that calls tools, so the framework runs its real loop: the main agent reads a file, runs
the tests (two calls in one reply), hands a review to a reviewer agent exposed as a tool (the
SDK's `Agent.as_tool`: a subagent with a fresh context of its own, which reads the file itself),
then answers. `harness record` sits between the SDK and the model; the script prints the
recording's `recording.json` counts and `harness trace stats` of its trace. Nothing leaves
the machine: tracing export is off and the client's base URL is the proxy's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REVIEWER = "You review Python changes for a coding agent. Read the file before you judge."
MAIN = "You are a coding agent working in a Python repository. Use the tools; be brief."


# ---- the scripted model ------------------------------------------------------------------------


def _reply(body: dict) -> dict:
    """The next assistant message for a conversation: tool calls by step, then an answer."""
    messages = body.get("messages", [])
    step = sum(1 for m in messages if m.get("role") == "assistant")
    system = next((m.get("content") for m in messages if m.get("role") == "system"), "") or ""
    reviewer = "review" in str(system)[:40].lower()
    plan = (
        [[("read_file", {"path": "parser.py"})], [("final", None)]]
        if reviewer
        else [
            [("read_file", {"path": "parser.py"}), ("read_file", {"path": "test_parser.py"})],
            [("run_tests", {"target": "tests/test_parser.py"})],
            [("review_code", {"input": "Review the fix in parser.py: split on the first comma."})],
            [("final", None)],
        ]
    )
    calls = plan[min(step, len(plan) - 1)]
    if calls[0][0] == "final":
        text = "The review passed." if not reviewer else "Looks correct; one edge case noted."
        return {"role": "assistant", "content": text}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"call_{step}_{i}_{int(time.time() * 1e6) % 10**6}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for i, (name, args) in enumerate(calls)
        ],
    }


def serve() -> None:
    from aiohttp import web

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        message = _reply(body)
        usage = {
            "prompt_tokens": len(json.dumps(body["messages"])) // 4,
            "completion_tokens": 12,
            "total_tokens": 0,
        }
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        choice = {"index": 0, "message": message, "finish_reason": finish}
        answer = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "m"),
            "choices": [choice],
            "usage": usage,
        }
        if not body.get("stream"):
            return web.json_response(answer)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        delta = dict(message)
        if delta.get("tool_calls"):
            delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(delta["tool_calls"])]
        chunk = {
            **answer,
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        await resp.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        await resp.write(b"data: [DONE]\n\n")
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)

    async def main() -> None:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        print(f"PORT {runner.addresses[0][1]}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


# ---- the agent ---------------------------------------------------------------------------------


async def task(base_url: str, n: int) -> str:
    from agents import (
        Agent,
        OpenAIChatCompletionsModel,
        Runner,
        function_tool,
        set_tracing_disabled,
    )
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=base_url, api_key="sk-local-not-a-key", max_retries=0)
    model = OpenAIChatCompletionsModel(model="scripted-coder", openai_client=client)

    @function_tool
    def read_file(path: str) -> str:
        """Read a file of the repository."""
        return "\n".join(
            f"{i:4d}\tdef parse_{i}(line): return line.split(',', 1)" for i in range(40)
        )

    @function_tool
    def run_tests(target: str) -> str:
        """Run the test suite (or one file of it)."""
        return f"{target}: 12 passed in 0.{n}4s"

    reviewer = Agent(name="reviewer", instructions=REVIEWER, tools=[read_file], model=model)
    main = Agent(
        name="coder",
        instructions=MAIN,
        model=model,
        tools=[
            read_file,
            run_tests,
            reviewer.as_tool(tool_name="review_code", tool_description="Ask a reviewer agent."),
        ],
    )
    result = await Runner.run(main, f"Task {n}: the parser splits on every comma; fix it.")
    return str(result.final_output)


def _start(cmd: list[str], marker: str, env=None) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if marker not in line:
        proc.kill()
        raise SystemExit(f"{cmd[:3]} did not start: {line!r}")
    return proc, line


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("-o", "--output", type=Path, default=None)
    ap.add_argument("--tasks", type=int, default=3)
    args = ap.parse_args()
    if args.serve:
        serve()
        return 0
    try:
        import agents  # noqa: F401
    except ImportError:
        print("skipped: the OpenAI Agents SDK is not installed (pip install openai-agents)")
        return 0
    folder = args.output or Path(tempfile.mkdtemp(prefix="agent-record-")) / "rec"
    model, line = _start([sys.executable, __file__, "--serve"], "PORT")
    env = {**os.environ, "XDG_CONFIG_HOME": str(folder.parent / "config")}
    rec, line = _start(
        [
            sys.executable,
            "-m",
            "harness",
            "record",
            "--upstream",
            f"http://127.0.0.1:{line.split()[1]}",
            "-o",
            str(folder),
        ],
        "listening on",
        env,
    )
    proxy = line.split("listening on ")[1].split(",")[0]
    try:
        for n in range(args.tasks):
            print(f"task {n}: {asyncio.run(task(f'{proxy}/v1', n))}")
            time.sleep(0.5)
    finally:
        rec.send_signal(2)
        rec.wait(60)
        model.kill()
    summary = json.loads((folder / "recording.json").read_text())
    print(
        json.dumps(
            {k: summary[k] for k in ("requests", "sessions", "tokens", "prefix_reuse")}, indent=1
        )
    )
    subprocess.run(
        [sys.executable, "-m", "harness", "trace", "stats", str(folder / "trace.jsonl")], check=True
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
