"""The PR write-up templates; installed as the package ``bot._templates`` (see pyproject.toml)."""
