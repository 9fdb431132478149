"""The foundation layer (docs/architecture.md): exceptions, evidence, budgets, determinism,
devices, fingerprint, floats, versions, plots, soak and the claim registry (``claims/``).
Importing this package imports nothing."""
