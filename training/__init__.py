"""Training and research code, run from a checkout (``python -m training.emotion.train``).

Not installed with the package (``pyproject.toml`` installs ``akira_bot``, ``adapters``,
``core`` and ``config`` only): the runtime reads the shipped weights and recipes in
``core/emotion/weights`` and never imports this folder.
"""
