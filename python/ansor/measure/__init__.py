"""Measurement: build, verify and time candidates in worker processes (imports `core`, `space`,
the target registry; never `search` — the worker loads feature extraction by name).

    measurer.py    Measurer, LocalMeasurer, SyntheticMeasurer, MeasureInput/Result, RunOptions,
                   reference outputs, timing, the worker loop
    worker.py      the worker process's entry point (`python -m ansor.measure.worker`)
    verify.py      what "correct" means: poisoned outputs, element-wise tolerance
    baselines.py   numpy references of the built-in workloads, numpy's BLAS
    provenance.py  what every record says about how it was measured
"""
