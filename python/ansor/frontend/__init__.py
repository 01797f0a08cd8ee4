"""Frontend: getting programs in (imports `core` and the target registry).

    workloads.py     built-in workloads (Ansor's single-op suite, subgraphs, toy networks)
    torch_import.py  PyTorch -> torch-mlir (in an exporter process, _torch_export.py) -> linalg
    partition.py     a model -> deduplicated, weighted tasks (ansor-partition fusion groups)
    winograd.py      3x3 convolutions as Winograd F(m x m, 3 x 3) (opt-in);  models.py  model zoo
"""
