"""bot: finds EAGLE-3 interface gaps in vLLM and proposes upstream-quality fixes."""

__version__ = "0.1.0"
