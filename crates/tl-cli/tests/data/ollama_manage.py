"""Drives `tl serve`'s model-management routes with the official `ollama`
Python client (installed by the test from pip) and prints what each call
returned, as JSON. The server's models folder holds the default model
(so pulling it fetches nothing) and `spare.gguf`, a copy it may delete.

    python3 ollama_manage.py URL MODEL
"""

import json
import sys

import ollama

url, model = sys.argv[1], sys.argv[2]
out = {}
o = ollama.Client(host=url)


def status_of(call):
    """The HTTP status a call failed with, or "no error"."""
    try:
        call()
        return "no error"
    except ollama.ResponseError as e:
        return e.status_code


running = o.ps().models
out["ps"] = [[m.model, m.size_vram, m.expires_at is not None, len(m.digest or "")] for m in running]

out["pull_stream"] = [p.status for p in o.pull("smollm2", stream=True)]
out["pull"] = o.pull("smollm2").status
out["pull_unknown"] = status_of(lambda: o.pull("no-such-model"))

out["create"] = o.create(model="mario", from_="smollm2", system="You are Mario.",
                         parameters={"temperature": 0, "num_predict": 6}).status
out["create_bad_name"] = status_of(lambda: o.create(model="../mario", from_="smollm2"))
show = o.show("mario")
out["show_modelfile"] = show.modelfile
out["show_parameters"] = show.parameters
question = [{"role": "user", "content": "Who are you?"}]
mario = o.chat(model="mario", messages=question)
out["mario_eval_count"] = mario.eval_count
out["mario_model"] = mario.model
out["copy"] = o.copy("mario", "luigi").status
tags = o.list().models
out["tags"] = [m.model for m in tags]
out["digests"] = {m.model: m.digest for m in tags}

out["delete_luigi"] = o.delete("luigi").status
out["delete_default"] = status_of(lambda: o.delete(model))
out["delete_spare"] = o.delete("spare").status
out["tags_after"] = [m.model for m in o.list().models]

# keep_alive=0 on a request without a prompt unloads the model.
out["unload"] = o.generate(model=model, keep_alive=0).done_reason
out["ps_after_unload"] = [m.model for m in o.ps().models]
print(json.dumps(out))
