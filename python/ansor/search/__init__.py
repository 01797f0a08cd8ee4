"""Search: which schedules to measure next (imports `core`, `space`, `measure`, the target registry).

    policy.py      SearchPolicy (next_batch, update, retrain, fastest, transfer), RandomSearch
    evolution.py   EvolutionarySearch: Ansor's evolutionary search under a cost model
    cost_model.py  XGBModel (Ansor's objective), RandomModel, metrics
    features.py    program features of a scheduled program (C++ ansor-extract-features, in workers)
"""
