"""What the bot knows about a vLLM checkout."""
