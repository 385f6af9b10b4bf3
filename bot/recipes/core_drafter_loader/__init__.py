"""Fix class core-drafter-loader: the speculative-decoding loaders, fixed once in vLLM core."""
