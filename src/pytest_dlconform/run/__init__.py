"""The run layer (docs/architecture.md): settings, activation, profiles, shards, strategies,
user models, the session's roles (``session/``) and the mutation runner (``mutants/``).
Importing this package imports nothing."""
