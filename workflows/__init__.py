"""The GitHub Actions workflows, installed as the package ``bot._workflows`` (pyproject.toml)."""
