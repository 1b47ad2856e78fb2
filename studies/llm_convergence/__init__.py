"""A real small LLM: SmolLM2-135M-Instruct, its first runs and the registered study (README.md)."""
