"""The HTTP side of AKIRA (``AKIRA_HTTP__PORT``): a memory API compatible with Synapse's
client, an admin web view, ``/health``, ``/metrics`` and ``/openapi.json``.

Modules: server (the aiohttp app, started by ``akira-bot run``), keys (Mind Keys, JWTs,
login links and their store), auth (who is calling), schemas (request bodies), memory_api
(the routes), ops (health, metrics), metrics (the Prometheus counters and the pipeline
stage), openapi (the document), admin (the web view). Needs the ``http`` extra.
"""
