"""Search settings shared by the tuning benchmarks (suite.py, search_efficiency.py): the round
size, the evolutionary search's population and generations, and the cost model's warm-up, with
Ansor's defaults."""

from __future__ import annotations

import argparse


def add_search_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--batch-size", type=int, default=64, help="measurements per search round")
    ap.add_argument("--population", type=int, default=2048, help="evolutionary search population")
    ap.add_argument("--generations", type=int, default=4, help="evolutionary search generations")
    ap.add_argument("--warmup-samples", type=int, default=100,
                    help="measured programs before the cost model's predictions replace random scores")


def tune_kwargs(args: argparse.Namespace, seed: int = 0) -> dict:
    """Keyword arguments of `ansor.tune` for these settings (a fresh cost model per call)."""
    from ansor.search.cost_model import XGBModel

    return {
        "batch_size": args.batch_size,
        "cost_model": XGBModel(few_shot_threshold=args.warmup_samples, seed=seed),
        "search_options": {"population": args.population, "generations": args.generations},
    }
