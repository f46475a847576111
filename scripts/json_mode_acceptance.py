#!/usr/bin/env python3
"""JSON mode's acceptance run (issue 29): sampled requests at temperature 1.0
with `max_tokens` 256 against a running `tl serve`, each with a JSON schema of
bounded arrays and strings, through OpenAI's `response_format`. Every answer
must finish with "stop" (a "length" finish is a failure) and parse and
validate against its schema (python `jsonschema`). Then, for the overhead of
the mask, the same prompts' decode speed with and without a schema, from the
server's usage and timings.

usage: json_mode_acceptance.py URL MODEL [--requests 100] [--parallel 4]
Exits 1 if any request fails.
"""
import argparse
import json
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import jsonschema

NAME = {"type": "string", "minLength": 1, "maxLength": 24}
SCHEMAS = [
    ("person", "Describe a person.", {
        "type": "object",
        "properties": {
            "name": NAME,
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
            "hobbies": {"type": "array", "items": {"type": "string", "maxLength": 16},
                        "maxItems": 3},
        },
        "required": ["name", "age", "hobbies"],
        "additionalProperties": False,
    }),
    ("recipe", "Give a short recipe.", {
        "type": "object",
        "properties": {
            "title": NAME,
            "servings": {"type": "integer", "minimum": 1, "maximum": 12},
            "ingredients": {
                "type": "array", "minItems": 1, "maxItems": 4,
                "items": {
                    "type": "object",
                    "properties": {"item": NAME, "grams": {"type": "number", "minimum": 0,
                                                            "maximum": 1000}},
                    "required": ["item", "grams"],
                    "additionalProperties": False,
                },
            },
            "vegetarian": {"type": "boolean"},
        },
        "required": ["title", "servings", "ingredients", "vegetarian"],
        "additionalProperties": False,
    }),
    ("weather", "Report the weather in a city.", {
        "type": "object",
        "properties": {
            "city": NAME,
            "sky": {"enum": ["sunny", "cloudy", "rain", "snow"]},
            "temperature_c": {"type": "number", "minimum": -60, "maximum": 60},
            "alerts": {"type": "array", "items": {"type": "string", "maxLength": 30},
                       "maxItems": 2},
        },
        "required": ["city", "sky", "temperature_c", "alerts"],
        "additionalProperties": False,
    }),
    ("tags", "Tag this sentence: the cat sat on the mat.", {
        "type": "array", "minItems": 1, "maxItems": 5,
        "items": {"type": "string", "pattern": "^[a-z]{1,12}$"},
    }),
]


def post(url, body):
    request = urllib.request.Request(
        f"{url}/v1/chat/completions", data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as response:
        return json.load(response)


def ask(url, model, index, constrained):
    name, prompt, schema = SCHEMAS[index % len(SCHEMAS)]
    body = {
        "model": model,
        "messages": [{"role": "user", "content": prompt + " Answer in JSON."}],
        "max_tokens": 256, "temperature": 1.0, "seed": index,
    }
    if constrained:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": name, "schema": schema, "strict": True},
        }
    reply = post(url, body)
    choice = reply["choices"][0]
    text = choice["message"]["content"]
    verdict = "valid"
    if constrained:
        try:
            jsonschema.validate(json.loads(text), schema)
        except (ValueError, jsonschema.ValidationError) as e:
            verdict = f"invalid: {e}"
    return name, choice["finish_reason"], verdict, reply["usage"]["completion_tokens"], text


def run(url, model, requests, parallel, constrained):
    start = time.perf_counter()
    with ThreadPoolExecutor(parallel) as pool:
        results = list(pool.map(lambda i: ask(url, model, i, constrained), range(requests)))
    return results, time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url")
    parser.add_argument("model")
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--parallel", type=int, default=4)
    args = parser.parse_args()

    results, seconds = run(args.url, args.model, args.requests, args.parallel, True)
    failures = [r for r in results if r[1] != "stop" or r[2] != "valid"]
    tokens = sum(r[3] for r in results)
    print(f"{args.requests} constrained requests at temperature 1.0, max_tokens 256, "
          f"{args.parallel} in flight: {args.requests - len(failures)} finished with "
          f"'stop' and validated, {len(failures)} failed")
    print(f"  {tokens} tokens in {seconds:.1f} s: {tokens / seconds:.1f} tok/s")
    for name in sorted({r[0] for r in results}):
        mine = [r for r in results if r[0] == name]
        print(f"  {name}: {len(mine)} requests, {sum(r[3] for r in mine) / len(mine):.0f} "
              f"tokens each on average; e.g. {mine[0][4]}")
    for failure in failures:
        print(f"  FAILED {failure}")

    free, free_seconds = run(args.url, args.model, args.requests, args.parallel, False)
    free_tokens = sum(r[3] for r in free)
    print(f"  unconstrained, same prompts: {free_tokens} tokens in {free_seconds:.1f} s: "
          f"{free_tokens / free_seconds:.1f} tok/s")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
