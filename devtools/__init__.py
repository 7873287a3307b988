"""Tools for working on the dashboard, shared by tests/ and bench/; not part of the wheel
(pyproject.toml's `[tool.setuptools] packages` does not list it).

- `live_server`: real dashboard server processes on free ports (`ServerState`, `LiveServer`,
  `running`).
"""
