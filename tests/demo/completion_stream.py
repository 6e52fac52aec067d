"""A streamed completion in the shape of an OpenAI-compatible server's (vLLM's), at a set rate.

Shared by the demo's model server (model-server.py), the vLLM stand-in (tests/standins/vllm) and
the end-to-end tests of deployd's `benchmark` check. Not a model: the text is a fixed answer
repeated, one word a token.

    stream_completion(handler, request, model, answer, tokens_per_s)

writes to `handler` (an http.server.BaseHTTPRequestHandler whose POST body was `request`, a
dict) a 200 `text/event-stream` answer: `data: {chunk}` events, token i (from 0) sent at
(i + 1) / tokens_per_s seconds after the request (paced against the clock, so a late token does
not slow the ones after it), up to the request's max_tokens; then a chunk with the
finish_reason, the usage chunk when the request asked for it (stream_options.include_usage)
and `data: [DONE]`. Completions carry choices[0].text; chat completions (a request with
"messages") choices[0].delta.content. The connection is closed at the end.
"""

import json
import time
import uuid


def token(answer, i):
    """Token i of the answer repeated: its words in turn, each after a space (the first one only
    when the answer starts with one)."""
    words = answer.split() or ["."]
    return (" " if i or answer[:1].isspace() else "") + words[i % len(words)]


def _event(handler, payload):
    data = payload if isinstance(payload, str) else json.dumps(payload)
    handler.wfile.write(("data: %s\n\n" % data).encode())
    handler.wfile.flush()


def stream_completion(handler, request, model, answer, tokens_per_s):
    chat = "messages" in request
    max_tokens = int(request.get("max_tokens") or request.get("max_completion_tokens") or 16)
    usage = bool((request.get("stream_options") or {}).get("include_usage"))
    started = time.monotonic()
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Cache-Control", "no-cache")
    handler.send_header("Connection", "close")
    handler.end_headers()
    handler.close_connection = True
    ident = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
    base = {"id": ident, "object": "chat.completion.chunk" if chat else "text_completion",
            "created": int(time.time()), "model": model}

    def chunk(text, finish=None):
        if chat:
            choice = {"index": 0, "delta": {"content": text} if text else {}, "finish_reason": finish}
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
        return dict(base, choices=[choice], usage=None)

    try:
        if chat:
            _event(handler, dict(base, choices=[{"index": 0, "delta": {"role": "assistant", "content": ""},
                                                 "finish_reason": None}], usage=None))
        for i in range(max_tokens):
            delay = started + (i + 1) / tokens_per_s - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            _event(handler, chunk(token(answer, i)))
        _event(handler, chunk("", "length"))
        if usage:
            prompt_tokens = len(json.dumps(request.get("prompt", request.get("messages", "")))) // 4 + 1
            _event(handler, dict(base, choices=[], usage={"prompt_tokens": prompt_tokens,
                                                          "completion_tokens": max_tokens,
                                                          "total_tokens": prompt_tokens + max_tokens}))
        _event(handler, "[DONE]")
    except (BrokenPipeError, ConnectionResetError):
        pass  # the client went away (a cancelled benchmark): nothing left to say
