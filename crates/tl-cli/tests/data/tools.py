"""Drives `tl serve`'s tool calling with the official `openai` and `ollama`
clients and LangChain (`bind_tools` in an agent loop, and
`with_structured_output` through function calling), against a model whose
chat template renders tools, and prints what came back as JSON: each
call's name and whether its arguments validate against the tool's schema
(python `jsonschema`).

    python3 tools.py URL MODEL
"""

import json
import sys
from typing import Literal

import httpx
import jsonschema
import ollama
from openai import OpenAI

url, model = sys.argv[1], sys.argv[2]
out = {}

# Bounded arguments (enums), so that a random model's call always fits.
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather forecast for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "enum": ["Paris", "London", "Tokyo"]},
                "days": {"type": "integer", "enum": [1, 2, 3]},
            },
            "required": ["city", "days"],
        },
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "parameters": {
            "type": "object",
            "properties": {"zone": {"type": "string", "enum": ["UTC", "CET"]}},
            "required": ["zone"],
        },
    },
}
TOOLS = [WEATHER, TIME]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
question = [{"role": "user", "content": "What is the weather in Paris?"}]


def check(name, arguments):
    """'valid', or why not; `arguments` is a JSON string or an object."""
    if name not in SCHEMAS:
        return f"unknown function {name!r}"
    try:
        value = json.loads(arguments) if isinstance(arguments, str) else arguments
        jsonschema.validate(value, {**SCHEMAS[name], "additionalProperties": False})
    except (ValueError, jsonschema.ValidationError) as e:
        return f"invalid ({e}): {arguments!r}"
    return "valid"


client = OpenAI(base_url=f"{url}/v1", api_key="not-needed")
common = dict(model=model, messages=question, tools=TOOLS, max_tokens=200)

# A required call, sampled: every call validates.
chat = client.chat.completions.create(
    **common, tool_choice="required", temperature=1.0, seed=7)
message = chat.choices[0].message
whole = [[c.function.name, check(c.function.name, c.function.arguments)]
         for c in message.tool_calls]
out["openai_required"] = [chat.choices[0].finish_reason, whole]

# The same, streamed: the deltas add up to the same calls.
stream = client.chat.completions.create(
    **common, tool_choice="required", temperature=1.0, seed=7, stream=True)
calls, finish = {}, None
for chunk in stream:
    if not chunk.choices:
        continue
    finish = chunk.choices[0].finish_reason or finish
    for delta in chunk.choices[0].delta.tool_calls or []:
        call = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
        call["id"] += delta.id or ""
        call["name"] += delta.function.name or ""
        call["arguments"] += delta.function.arguments or ""
streamed = [[c["name"], check(c["name"], c["arguments"])] for c in calls.values()]
out["openai_stream"] = [finish, streamed == whole, all(c["id"] for c in calls.values())]

# A named function.
chat = client.chat.completions.create(
    **common, tool_choice={"type": "function", "function": {"name": "get_time"}}, seed=1)
out["openai_named"] = [c.function.name for c in chat.choices[0].message.tool_calls]

# A strict tool the model may or may not call: if it calls, the call is valid.
strict = [{**WEATHER, "function": {**WEATHER["function"], "strict": True}}]
results = []
for seed in range(3):
    chat = client.chat.completions.create(
        model=model, messages=question, tools=strict, max_tokens=40, seed=seed)
    m = chat.choices[0].message
    if m.tool_calls:
        results.append([check(c.function.name, c.function.arguments) for c in m.tool_calls])
    else:
        results.append("<tool_call>" not in (m.content or ""))
out["openai_strict_auto"] = results

# The call and its result sent back, then an answer without tools.
history = question + [
    message.model_dump(exclude_none=True),
    {"role": "tool", "tool_call_id": message.tool_calls[0].id, "content": '{"temperature": 21}'},
]
chat = client.chat.completions.create(
    model=model, messages=history, tools=TOOLS, tool_choice="none", max_tokens=8, seed=1)
out["openai_round_trip"] = [chat.choices[0].finish_reason, chat.choices[0].message.tool_calls]

try:
    client.chat.completions.create(
        **{**common, "tools": [{"type": "function", "function": {"parameters": {}}}]})
    out["openai_bad_tools"] = "no error"
except Exception as e:  # the client raises BadRequestError
    out["openai_bad_tools"] = [type(e).__name__, "function.name" in str(e)]

# Ollama: tools through the client (the model chooses; a random one talks),
# and a required call (`tool_choice`, an extension the client cannot send,
# so sent with its HTTP library) read back with the client's own types.
o = ollama.Client(host=url)
options = {"seed": 3, "num_predict": 200}
reply = o.chat(model=model, messages=question, tools=TOOLS, options={**options, "num_predict": 8})
out["ollama_auto"] = reply.done_reason
body = {"model": model, "messages": question, "tools": TOOLS, "tool_choice": "required",
        "options": options}
reply = ollama.ChatResponse.model_validate(
    httpx.post(f"{url}/api/chat", json={**body, "stream": False}, timeout=60).json())
ollama_calls = [[c.function.name, check(c.function.name, c.function.arguments)]
                for c in reply.message.tool_calls]
out["ollama_required"] = [reply.done_reason, ollama_calls]
streamed = []
with httpx.stream("POST", f"{url}/api/chat", json=body, timeout=60) as response:
    for line in response.iter_lines():
        part = ollama.ChatResponse.model_validate_json(line)
        streamed += [[c.function.name, check(c.function.name, c.function.arguments)]
                     for c in part.message.tool_calls or []]
out["ollama_stream"] = streamed == ollama_calls
history = question + [reply.message, {"role": "tool", "content": "21 degrees",
                                      "tool_name": ollama_calls[0][0]}]
out["ollama_round_trip"] = o.chat(
    model=model, messages=history, tools=TOOLS, options={**options, "num_predict": 8}).done_reason

# LangChain: an agent loop over `bind_tools` (a required call each step, the
# tool run on its arguments, its result sent back), then an answer.
from langchain_core.messages import HumanMessage  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402
from pydantic import BaseModel  # noqa: E402


@tool
def get_weather(city: Literal["Paris", "London", "Tokyo"], days: Literal[1, 2, 3]) -> str:
    """Get the weather forecast for a city."""
    return f"Sunny in {city} for {days} days."


llm = ChatOpenAI(base_url=f"{url}/v1", api_key="not-needed", model=model,
                 temperature=0, max_tokens=200)
agent = llm.bind_tools([get_weather], tool_choice="required")
messages = [HumanMessage("What is the weather in Paris?")]
ran = []
for _ in range(2):
    step = agent.invoke(messages)
    messages.append(step)
    for call in step.tool_calls:
        result = get_weather.invoke(call)  # a ToolMessage answering the call
        ran.append([call["name"], result.tool_call_id == call["id"]])
        messages.append(result)
answer = llm.invoke(messages)
out["langchain_agent"] = [ran, isinstance(answer.content, str)]


class Weather(BaseModel):
    """A weather report."""
    city: Literal["Paris", "London", "Tokyo"]
    days: Literal[1, 2, 3]


report = llm.with_structured_output(Weather, method="function_calling").invoke(
    "Report the weather in Paris.")
out["langchain_structured"] = [type(report).__name__, report.city in ("Paris", "London", "Tokyo")]

print(json.dumps(out))
