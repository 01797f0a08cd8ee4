"""The benchmarks, a package so that they import one another without `sys.path` edits.

Run each as a module from the repository root, with the project's venv:

    python -m bench.matmul --help
    python -m bench.suite --trials 200

(on the GPU host, without an installed `ansor`: `env PYTHONPATH=python python3 -m bench.gpu ...`).
What more than one benchmark uses lives in `bench.common` (timing rounds, search settings, the
PyTorch helper processes, suite entries, results/ files); child processes are started as modules
too (`common.module_argv`). `python bench/NAME.py` prints how to run it instead: every script
checks `__package__` in its `if __name__ == "__main__":` block, so a script imports `bench.*`
only inside functions, never at module level (where that check has not run yet). Importing this
package imports nothing.
"""
