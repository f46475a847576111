"""Writes the golden renders of a tool-calling conversation for the chat
template tests (`crates/tl-engine/tests/golden/templates/tools_*.txt`):
each template rendered by Jinja2 set up as Hugging Face transformers'
`apply_chat_template` sets it up (trim_blocks, lstrip_blocks, loop
controls, `tojson` as `json.dumps(ensure_ascii=False)`, `raise_exception`),
so the test compares our renderer with the one the templates were written for.

    python3 scripts/jinja2_tool_renders.py   # needs jinja2 (3.1.6 was used)

The conversation and tools must stay the same as `tool_conversation()` and
`weather_tool()` in `crates/tl-engine/src/chat_template/tests.rs`.
"""

import json
import pathlib

import jinja2
import jinja2.ext
import jinja2.sandbox

ROOT = pathlib.Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "testdata" / "templates"
GOLDEN = ROOT / "crates" / "tl-engine" / "tests" / "golden" / "templates"

# Golden file name -> template file.
CASES = {
    "tools_qwen2.5": "Qwen-Qwen2.5-7B-Instruct.jinja",
    "tools_hermes2_pro": "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja",
    "tools_hermes3": "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja",
    "tools_llama3.1": "meta-llama-Llama-3.1-8B-Instruct.jinja",
    "tools_mistral_nemo": "mistralai-Mistral-Nemo-Instruct-2407.jinja",
}

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the weather forecast for a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "The city"},
                    "days": {"type": "integer", "description": "How many days"},
                },
                "required": ["city"],
            },
        },
    }
]

MESSAGES = [
    {"role": "system", "content": "You are a weather bot."},
    {"role": "user", "content": "What is the weather in Paris?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call12345",
                "type": "function",
                "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 1}},
            }
        ],
    },
    {
        "role": "tool",
        "content": '{"temperature": 21}',
        "tool_call_id": "call12345",
        "name": "get_weather",
    },
]


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(value, indent=None, separators=None, sort_keys=False):
    return json.dumps(
        value, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys
    )


def environment():
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def main():
    env = environment()
    for name, file in CASES.items():
        template = env.from_string((TEMPLATES / file).read_text())
        text = template.render(
            messages=MESSAGES,
            tools=TOOLS,
            add_generation_prompt=True,
            bos_token="<s>",
            eos_token="</s>",
        )
        (GOLDEN / f"{name}.txt").write_text(text)
        print(f"{name}: {len(text)} bytes")


if __name__ == "__main__":
    main()
