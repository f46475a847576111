"""Drives `tl serve`'s structured output with the official `openai` and
`ollama` clients and LangChain's `with_structured_output`, and prints what
came back as JSON: each answer's finish reason and whether it parsed and
validated against its schema (python `jsonschema`).

    python3 structured_output.py URL MODEL SAMPLED_REQUESTS
"""

import json
import sys

import jsonschema
import ollama
from openai import OpenAI

url, model, sampled = sys.argv[1], sys.argv[2], int(sys.argv[3])
out = {}

# Bounded strings and arrays, so that a sampled answer always fits 256 tokens.
PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 20},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "hobbies": {
            "type": "array",
            "items": {"type": "string", "maxLength": 16},
            "maxItems": 3,
        },
    },
    "required": ["name", "age", "hobbies"],
    "additionalProperties": False,
}
question = [{"role": "user", "content": "Describe a person as JSON."}]


def check(text, schema):
    """'valid', or why not."""
    try:
        value = json.loads(text)
    except ValueError as e:
        return f"not JSON ({e}): {text!r}"
    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError as e:
        return f"invalid ({e.message}): {text!r}"
    return "valid"


client = OpenAI(base_url=f"{url}/v1", api_key="not-needed")
person_format = {
    "type": "json_schema",
    "json_schema": {"name": "person", "schema": PERSON, "strict": True},
}

# Sampled answers at temperature 1.0: each must end with "stop" and validate.
results = []
for seed in range(sampled):
    chat = client.chat.completions.create(
        model=model, messages=question, max_tokens=256, temperature=1.0,
        seed=seed, response_format=person_format)
    choice = chat.choices[0]
    results.append([choice.finish_reason, check(choice.message.content, PERSON)])
out["openai_sampled"] = results

stream = client.chat.completions.create(
    model=model, messages=question, max_tokens=256, temperature=0,
    response_format=person_format, stream=True)
text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
out["openai_stream"] = check(text, PERSON)

# The client's completions take no response_format argument: sent as extra body.
completion = client.completions.create(
    model=model, prompt="A JSON object:", max_tokens=256, temperature=0,
    extra_body={"response_format": {"type": "json_object"}})
out["openai_completion_json_object"] = [
    completion.choices[0].finish_reason,
    check(completion.choices[0].text, {"type": "object"}),
]

try:
    client.chat.completions.create(
        model=model, messages=question, response_format={
            "type": "json_schema",
            "json_schema": {"name": "bad", "schema": {"type": "string", "pattern": "(unclosed"}},
        })
    out["openai_bad_schema"] = "no error"
except Exception as e:  # the client raises BadRequestError
    out["openai_bad_schema"] = type(e).__name__

o = ollama.Client(host=url)
options = {"temperature": 1.0, "num_predict": 256, "seed": 7}
reply = o.chat(model=model, messages=question, format=PERSON, options=options)
out["ollama_chat_schema"] = [reply.done_reason, check(reply.message.content, PERSON)]
reply = o.generate(model=model, prompt="A JSON object:", format="json", options=options)
out["ollama_generate_json"] = [reply.done_reason, check(reply.response, {"type": "object"})]
try:
    o.generate(model=model, prompt="x", format={"type": "strnig"})
    out["ollama_bad_format"] = "no error"
except ollama.ResponseError as e:
    out["ollama_bad_format"] = e.status_code

# LangChain: a Pydantic model's schema ($defs, titles, descriptions) through
# response_format, parsed back into the model.
from typing import List  # noqa: E402

from langchain_openai import ChatOpenAI  # noqa: E402
from pydantic import BaseModel, Field  # noqa: E402


class Pet(BaseModel):
    """A pet."""
    name: str = Field(max_length=12, description="The pet's name")
    legs: int = Field(ge=0, le=8)


class Owner(BaseModel):
    """A pet owner."""
    name: str = Field(max_length=20)
    pets: List[Pet] = Field(max_length=2)


llm = ChatOpenAI(base_url=f"{url}/v1", api_key="not-needed", model=model,
                 temperature=0, max_tokens=256)
owner = llm.with_structured_output(Owner, method="json_schema", strict=True).invoke(
    "Describe a pet owner.")
out["langchain_structured"] = type(owner).__name__
out["langchain_valid"] = check(owner.model_dump_json(), Owner.model_json_schema())

print(json.dumps(out))
