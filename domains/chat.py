"""The one conversation and tool-call format of the project (SFT renders it, RL parses it, eval scores it).

A conversation is a list of messages (plain dicts, JSON-serialisable):

    {"role": "system",    "content": "You are ..."}
    {"role": "user",      "content": "What is 17*3?"}
    {"role": "assistant", "content": "Let me compute.", "tool_calls": [{"name": "calc", "arguments": {"expr": "17*3"}}]}
    {"role": "tool",      "name": "calc", "content": "51"}
    {"role": "assistant", "content": "51"}

Rendered text (ChatML with Qwen/Hermes-style tool calls), exactly:

    <|im_start|>system\nYou are ...<|im_end|>\n
    <|im_start|>user\nWhat is 17*3?<|im_end|>\n
    <|im_start|>assistant\nLet me compute.<tool_call>{"name": "calc", "arguments": {"expr": "17*3"}}</tool_call><|im_end|>\n
    <|im_start|>tool\n<tool_response>51</tool_response><|im_end|>\n
    <|im_start|>assistant\n51<|im_end|>\n

Tools the model may call are announced in the system message, one line per tool, by tools_prompt(tools):

    - calc(expr: string): Evaluate an arithmetic expression.
    - transform(name: string, position?: [number, number, number]): Move an object.   (? = optional)

The assistant turn's trainable span (SFT loss mask, RL action tokens) is everything after
"<|im_start|>assistant\\n" up to and including its "<|im_end|>".
The special tokens below are made into the tokenizer by pretrain_ckpt/.
"""
from __future__ import annotations

import json
import re

BOS = "<|endoftext|>"
EOS = "<|endoftext|>"
PAD = "<|pad|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
TOOL_CALL_START, TOOL_CALL_END = "<tool_call>", "</tool_call>"
TOOL_RESP_START, TOOL_RESP_END = "<tool_response>", "</tool_response>"
SPECIAL_TOKENS = [EOS, PAD, IM_START, IM_END, TOOL_CALL_START, TOOL_CALL_END, TOOL_RESP_START, TOOL_RESP_END]
ROLES = ("system", "user", "assistant", "tool")
ASSISTANT_PREFIX = f"{IM_START}assistant\n"

_CALL_RE = re.compile(re.escape(TOOL_CALL_START) + r"(.*?)" + re.escape(TOOL_CALL_END), re.S)


def call_json(call: dict) -> str:
    """A tool call as its canonical JSON (arguments in sorted key order), as the model writes it."""
    args = json.loads(json.dumps(call.get("arguments", {}), sort_keys=True))
    return json.dumps({"name": call["name"], "arguments": args})


def render_message(msg: dict) -> str:
    """One message as text, including its trailing newline."""
    role = msg["role"]
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}: use one of {ROLES}")
    body = msg.get("content") or ""
    if role == "tool":
        body = f"{TOOL_RESP_START}{body}{TOOL_RESP_END}"
    for call in msg.get("tool_calls") or []:
        body += TOOL_CALL_START + call_json(call) + TOOL_CALL_END
    return f"{IM_START}{role}\n{body}{IM_END}\n"


def render(messages: list[dict], add_generation_prompt: bool = False) -> str:
    """The whole conversation; with add_generation_prompt, open an assistant turn for the model to continue."""
    text = "".join(render_message(m) for m in messages)
    return text + (ASSISTANT_PREFIX if add_generation_prompt else "")


def render_segments(messages: list[dict]) -> list[tuple[str, bool]]:
    """(text, trainable) pieces whose concatenation equals render(messages): assistant bodies + <|im_end|> are trainable."""
    out: list[tuple[str, bool]] = []
    for m in messages:
        text = render_message(m)
        if m["role"] == "assistant":
            out.append((ASSISTANT_PREFIX, False))
            out.append((text[len(ASSISTANT_PREFIX):-1], True))  # body + <|im_end|>
            out.append(("\n", False))
        else:
            out.append((text, False))
    return out


def render_plain(messages: list[dict]) -> str:
    """A plain transcript with no special tokens ("User: ...", "Assistant: ...", "Call: {json}", "Result: ...").

    For mid-training text in a base corpus: the base learns the domains' language and the copying they need
    without ever seeing the chat template, which SFT then teaches.
    """
    lines = []
    for m in messages:
        if m["role"] not in ROLES:
            raise ValueError(f"unknown role {m['role']!r}: use one of {ROLES}")
        label = {"system": "System", "user": "User", "assistant": "Assistant", "tool": "Result"}[m["role"]]
        if m.get("content"):
            lines.append(f"{label}: {m['content']}")
        lines += ["Call: " + call_json(call) for call in m.get("tool_calls") or []]
    return "\n".join(lines) + "\n"


class ToolCallError(ValueError):
    """A tool call the model emitted that cannot be parsed (bad JSON, missing name, non-dict arguments)."""


def parse_assistant(text: str) -> dict:
    """Generated assistant text (up to, optionally including, <|im_end|>) -> an assistant message.

    Raises ToolCallError on a malformed call, so RL/eval can feed the error back to the policy.
    """
    text = text.split(IM_END, 1)[0]
    calls = []
    for raw in _CALL_RE.findall(text):
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as e:
            raise ToolCallError(f"tool call is not valid JSON ({e.msg} at char {e.pos}): {raw[:200]!r}") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            raise ToolCallError(f"tool call needs a string 'name': {raw[:200]!r}")
        args = obj.get("arguments", {})
        if not isinstance(args, dict):
            raise ToolCallError(f"tool call 'arguments' must be an object, got {type(args).__name__}")
        calls.append({"name": obj["name"], "arguments": args})
    content = _CALL_RE.sub("", text)
    if TOOL_CALL_START in content:
        raise ToolCallError("unterminated <tool_call>: close it with </tool_call>")
    msg = {"role": "assistant", "content": content}
    if calls:
        msg["tool_calls"] = calls
    return msg


def _type_text(sch: dict) -> str:
    """Compact JSON-schema type for tools_prompt: string, integer, cube|sphere, [number, number, number], ..."""
    if "enum" in sch:
        return "|".join(map(str, sch["enum"]))
    t = sch.get("type", "any")
    if t == "array":
        item = _type_text(sch.get("items", {}))
        n = sch.get("minItems")
        return f"[{', '.join([item] * n)}]" if n and n == sch.get("maxItems") and n <= 4 else f"list[{item}]"
    return "|".join(t) if isinstance(t, list) else str(t)


def tools_prompt(tools: list[dict]) -> str:
    """The tool list as it appears in a system message (helper added after v1; render() is unchanged)."""
    lines = []
    for t in tools:
        params = t.get("parameters", {})
        req = set(params.get("required", []))
        args = ", ".join(f"{k}{'' if k in req else '?'}: {_type_text(v)}" for k, v in params.get("properties", {}).items())
        lines.append(f"- {t['name']}({args}): {t.get('description', '')}")
    return "\n".join(lines)
