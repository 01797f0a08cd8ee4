"""Tuning: driving search and measurement to a budget (imports everything below it).

    options.py    TuningOptions: how a search runs, one record
    tuner.py      TaskTuner (one task, one batch at a time), tune, pretrain
    scheduler.py  TaskScheduler: Ansor's gradient task scheduler over a network's tasks
    records.py    the append-only JSON-lines log;  progress.py  progress output
"""
