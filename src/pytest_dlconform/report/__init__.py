"""The run's results and what is made of them (docs/architecture.md): the frozen Report
(``document``), verdicts, outcomes, results, known divergences, compare, merge, HTML,
reproduction, ledgers and coverage; ``findings/`` holds the standalone scripts. Importing
this package imports nothing."""
