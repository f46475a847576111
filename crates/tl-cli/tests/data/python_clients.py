"""Drives `tl serve` with the official `openai` and `ollama` Python clients
(installed by the test from pip) and prints what each call returned, as JSON.

    python3 python_clients.py URL MODEL
"""

import json
import sys

import ollama
from openai import OpenAI

url, model = sys.argv[1], sys.argv[2]
question = [{"role": "user", "content": "Name one planet."}]
out = {}

client = OpenAI(base_url=f"{url}/v1", api_key="not-needed")
chat = client.chat.completions.create(
    model=model, messages=question, max_tokens=8, temperature=0)
out["openai_chat"] = chat.choices[0].message.content
out["openai_chat_finish"] = chat.choices[0].finish_reason
out["openai_chat_usage"] = [chat.usage.prompt_tokens, chat.usage.completion_tokens]
stream = client.chat.completions.create(
    model=model, messages=question, max_tokens=8, temperature=0, stream=True)
out["openai_chat_stream"] = "".join(
    c.choices[0].delta.content or "" for c in stream if c.choices)
completion = client.completions.create(
    model=model, prompt="1, 2, 3, 4,", max_tokens=4, temperature=0)
out["openai_completion"] = completion.choices[0].text
stream = client.completions.create(
    model=model, prompt="1, 2, 3, 4,", max_tokens=4, temperature=0, stream=True)
out["openai_completion_stream"] = "".join(c.choices[0].text for c in stream if c.choices)
out["openai_models"] = [m.id for m in client.models.list()]
try:
    client.chat.completions.create(model="no-such-model", messages=question)
    out["openai_missing_model"] = "no error"
except Exception as e:  # the client raises NotFoundError
    out["openai_missing_model"] = type(e).__name__

o = ollama.Client(host=url)
options = {"temperature": 0, "num_predict": 8}
out["ollama_chat"] = o.chat(model=model, messages=question, options=options).message.content
out["ollama_chat_stream"] = "".join(
    part.message.content for part in o.chat(model=model, messages=question, options=options, stream=True))
out["ollama_generate"] = o.generate(model=model, prompt="Name one planet.", options=options).response
out["ollama_generate_stream"] = "".join(
    part.response for part in o.generate(model=model, prompt="Name one planet.", options=options, stream=True))
out["ollama_list"] = [m.model for m in o.list().models]
out["ollama_show_family"] = o.show(model).details.family
try:
    o.generate(model="no-such-model", prompt="x")
    out["ollama_missing_model"] = "no error"
except ollama.ResponseError as e:
    out["ollama_missing_model"] = e.status_code

print(json.dumps(out))
