"""How a search runs, as one record: what `tune`, `TaskTuner` and `TaskScheduler.tune` pass down.

    tune(task, trials=..., options=TuningOptions(...) or keyword fields)
        --> TaskTuner(options) --> _make_policy(options) --> EvolutionarySearch(**search_options)
    TaskScheduler.tune(trials, options=...) --> one TaskTuner per task, sharing model and measurer

(TVM bundles the same in its `TuningOptions` plus a policy-params dict.)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ansor.measure.measurer import Measurer, RunOptions
    from ansor.search.cost_model import CostModel
    from ansor.search.evolution import FeaturesFn


@dataclass(frozen=True)
class TuningOptions:
    """`search`: "learned" (evolutionary search + XGBoost cost model, Ansor's) or "random";
    `crossover=False` is the evolutionary search's ablation switch; `cost_model`: "xgb", "random"
    or a `CostModel`; `features_fn` overrides program feature extraction (tests);
    `search_options` go to `EvolutionarySearch` (population, generations, mutation_weights, ...;
    the target's mutation weights unless given); `batch_size`: candidates per measured batch
    (Ansor's 64); `run_options`: how candidates are run when the measurer is created here;
    `transfer` (networks, learned search): hand each task the fastest schedules of similar tasks;
    `cluster`, `builders`: where and with how many builders candidates are measured."""

    search: str = "learned"
    crossover: bool = True
    cost_model: str | CostModel = "xgb"
    features_fn: FeaturesFn | None = None
    search_options: Mapping[str, Any] = field(default_factory=dict)
    batch_size: int = 64
    run_options: RunOptions | None = None
    transfer: bool = True
    #: where candidates are measured when the measurer is created here: None = this machine,
    #: "ray" / "ray://HOST:PORT" / "ray:HOST:PORT" = a Ray cluster (`measure/cluster.py`)
    cluster: str | None = None
    #: build-ahead worker processes on this machine (0: the runner's worker builds), or with
    #: `cluster`, builder actors per node (0: one); None: the target's `default_builders()`
    #: (CPU 0: builds beside a CPU timing disturb it; CUDA all cores but two), one per node on a cluster
    builders: int | None = None
    #: runner worker processes on this machine, sharing the device through a lock (each loads its
    #: next candidate while another verifies and times); None: the target's `default_runners()`;
    #: ignored on a cluster (one runner per device there)
    runners: int | None = None

    def __post_init__(self) -> None:
        if self.search not in ("learned", "random"):
            raise ValueError(f"unknown search {self.search!r} (expected 'learned' or 'random')")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, not {self.batch_size}")
        if self.builders is not None and self.builders < 0:
            raise ValueError(f"builders must be >= 0, not {self.builders}")
        if self.runners is not None and self.runners < 1:
            raise ValueError(f"runners must be >= 1, not {self.runners}")
        if self.cluster is not None:
            from ansor.measure.cluster import parse_cluster  # (does not import Ray)

            parse_cluster(self.cluster)

    def create_measurer(self, target: str = "cpu") -> Measurer:
        """The measurer these options describe (`measurer.create_measurer`) for tasks of `target`."""
        from ansor.measure.measurer import create_measurer
        from ansor.targets import get_target

        builders = self.builders
        if builders is None:  # this machine's cores say nothing about a cluster's nodes: one each
            builders = 1 if self.cluster is not None else get_target(target).default_builders()
        runners = self.runners if self.runners is not None else get_target(target).default_runners()
        return create_measurer(self.run_options, builders=builders, cluster=self.cluster, runners=runners)

    @classmethod
    def of(cls, options: TuningOptions | None = None, **fields: Any) -> TuningOptions:
        """`options` (default: the defaults) with the given fields replaced (None: keep). An
        unknown field is a TypeError naming it."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(fields) - known)
        if unknown:
            raise TypeError(f"unknown tuning option(s): {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        base = options or cls()
        given = {k: v for k, v in fields.items() if v is not None}
        if "search_options" in given:
            given["search_options"] = dict(given["search_options"])
        return dataclasses.replace(base, **given) if given else base
