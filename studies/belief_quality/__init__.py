"""What the belief knows before a prompt's first sample (README.md)."""
