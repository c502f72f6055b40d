"""The `tubeless` program: `main` (`_main`), its parser (`_parser`) and one module per
command family (`run`, `batch`, `history`, `export`, `approvals`, `mcp`, the views), with
the sources, stores and destinations they share.
"""
