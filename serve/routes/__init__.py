"""The HTTP API's routes, one FastAPI router per resource; `serve/ingress.py` includes them into
its app, and its `Ingress` deployment holds what they share (auth, admission, the pair actors'
handles, the caches):

- `common`: the running ingress (a dependency), the error bodies, `/healthz`;
- `turns`: a turn (plain or streamed), the history, the pushed messages, the status, the
  greeting, an operator's event;
- `characters`: list, create, import, get, change, remove, export;
- `files`: a pair's files (upload, list, remove);
- `openai`: the OpenAI-compatible chat completions;
- `operator`: API keys, the dashboard, a pair's last turns, the system's status.
"""
