"""Drives `tl serve` with the official `openai` and `ollama` Python clients and
LangChain's `OpenAIEmbeddings` (installed by the test from pip) and prints what
each call returned, as JSON.

    python3 python_clients.py URL MODEL
"""

import json
import sys

import ollama
from langchain_openai import OpenAIEmbeddings
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
# Two choices of one request.
pair = client.chat.completions.create(
    model=model, messages=question, max_tokens=8, temperature=1.0, seed=5, n=2)
out["openai_choices"] = [[c.index, c.message.content] for c in pair.choices]
# Log-probabilities: per token, its own and its two best alternatives'.
scored = client.chat.completions.create(
    model=model, messages=question, max_tokens=4, temperature=0, logprobs=True, top_logprobs=2)
out["openai_logprobs"] = [[e.token, e.logprob, [t.logprob for t in e.top_logprobs]]
                          for e in scored.choices[0].logprobs.content]
# A base URL without /v1, as some tools are configured.
bare = OpenAI(base_url=url, api_key="not-needed")
out["openai_without_v1"] = bare.chat.completions.create(
    model=model, messages=question, max_tokens=8, temperature=0).choices[0].message.content
out["openai_models_without_v1"] = [m.id for m in bare.models.list()]
try:
    client.chat.completions.create(model="no-such-model", messages=question)
    out["openai_missing_model"] = "no error"
except Exception as e:  # the client raises NotFoundError
    out["openai_missing_model"] = type(e).__name__

# Embeddings: the client asks for base64 unless told otherwise.
texts = ["Hello world", "The capital of France is Paris."]
out["openai_embeddings"] = [d.embedding for d in client.embeddings.create(model=model, input=texts).data]
floats = client.embeddings.create(model=model, input=texts[0], encoding_format="float")
out["openai_embedding_float"] = floats.data[0].embedding
out["openai_embedding_tokens"] = floats.usage.prompt_tokens
out["openai_embedding_64"] = client.embeddings.create(
    model=model, input=texts[0], dimensions=64).data[0].embedding
try:
    client.embeddings.create(model=model, input="")
    out["openai_empty_embedding"] = "no error"
except Exception as e:  # the client raises BadRequestError
    out["openai_empty_embedding"] = type(e).__name__

# LangChain's embeddings, without the length check that needs tiktoken's
# downloads (unreachable here).
lc = OpenAIEmbeddings(model=model, base_url=f"{url}/v1", api_key="not-needed",
                      check_embedding_ctx_length=False)
out["langchain_documents"] = lc.embed_documents(texts)
out["langchain_query"] = lc.embed_query(texts[0])

o = ollama.Client(host=url)
out["ollama_embed"] = [list(v) for v in o.embed(model=model, input=texts).embeddings]
out["ollama_embeddings"] = list(o.embeddings(model=model, prompt=texts[0]).embedding)
options = {"temperature": 0, "num_predict": 8}
out["ollama_chat"] = o.chat(model=model, messages=question, options=options).message.content
out["ollama_chat_stream"] = "".join(
    part.message.content for part in o.chat(model=model, messages=question, options=options, stream=True))
out["ollama_generate"] = o.generate(model=model, prompt="Name one planet.", options=options).response
out["ollama_generate_stream"] = "".join(
    part.response for part in o.generate(model=model, prompt="Name one planet.", options=options, stream=True))
scored = o.chat(model=model, messages=question, options={"temperature": 0, "num_predict": 4},
                logprobs=True, top_logprobs=2)
out["ollama_logprobs"] = [[e.token, e.logprob, [t.logprob for t in e.top_logprobs]]
                          for e in scored.logprobs]
out["ollama_list"] = [m.model for m in o.list().models]
out["ollama_show_family"] = o.show(model).details.family
try:
    o.generate(model="no-such-model", prompt="x")
    out["ollama_missing_model"] = "no error"
except ollama.ResponseError as e:
    out["ollama_missing_model"] = e.status_code

print(json.dumps(out))
