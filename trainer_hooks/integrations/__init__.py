"""Integrations of `trainer_hooks` with other training frameworks.

Each lives in its own module and imports its framework there, so `trainer_hooks` itself stays
light: `trainer_hooks.integrations.hf` (Hugging Face `transformers` `Trainer` and TRL, the
`hf` extra: `pip install "./clients/python[hf]"` from a checkout, the client distribution
telescope-trainer-hooks).
"""
