"""``python -m tests.benchmarks``: one shed + place cycle per strategy, printed as a table."""

from tests.benchmarks.shedding import main

main()
