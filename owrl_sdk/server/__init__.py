"""``owrl serve``: an HTTP API that runs tasks, flows (with their inputs, handing back their
outputs) and batches of a flow over rows of inputs as jobs, for embedding owrl as an RPA
executor.

- :mod:`.jobs`: the SQLite job store (stdlib only), so jobs survive a restart;
- :mod:`.runner`: runs queued jobs through :class:`owrl_sdk.Agent`, a few at a time, one
  shared browser, each job in its own run folder (a batch: :class:`owrl_sdk.flows.batch.Batch` in
  its batch folder, each row taking a slot);
- :mod:`.app`: the FastAPI application (imported only by ``owrl serve`` and its tests:
  FastAPI is an optional dependency, the ``serve`` extra).

The API is described in docs/serve.md and served as ``/openapi.json``.
"""
